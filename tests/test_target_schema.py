"""Projects whose profile (target) schema is not ``main``: their target-schema tables are captured as
``main.<alias>`` (harvester/sandbox/inside/harvest_names.py), so the official scorer, which looks graded
tables up by bare name in ``main``, can grade them.

Real git repositories, real sandboxed dbt-duckdb builds, real DuckDB gold, the real scorer. The fixture
``target_schema`` is an original Fivetran-style package (``fleet_upkeep``) whose ``integration_tests``
build needs the profile schema ``fleet_upkeep_integration_tests``; one of its models is built in a
custom schema and must keep it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from harvester.cli import main
from harvester.gitrepos import make_git_repo
from harvester.sandbox.inside import harvest_names
from harvester.sandbox.inside.harvest_names import captured_name, first_collision, graded_name
from tests.fixtures import fixture_dir, fixture_repo

TARGET = "fleet_upkeep_integration_tests"
IN_MAIN = {
    "main.stg_fleet_upkeep__vehicles",
    "main.stg_fleet_upkeep__visits",
    "main.fleet_upkeep__vehicle_costs",
    "main.fleet_upkeep__depot_costs",
}
AUDIT = f"{TARGET}_audit.fleet_upkeep__visit_audit"  # dbt's default custom schema: <target>_<custom>


def _run(tmp: Path, *args: str) -> tuple[int, str, str]:
    env = {"HARVEST_HOME": str(tmp / "home"), "HARVEST_PINS": str(tmp / "pins")}
    result = CliRunner().invoke(main, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _gold_tables(path: Path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {f"{s}.{t}" for s, t in con.execute("select schema_name, table_name from duckdb_tables()").fetchall()}
    finally:
        con.close()


@pytest.fixture(scope="module")
def added(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """`harvest add` of the fixture, sandboxed: (the folder holding home/ and pins/, the JSON summary)."""
    root = tmp_path_factory.mktemp("target-schema")
    repo = fixture_repo("target_schema", root / "repo")
    code, out, err = _run(root, "add", f"{repo.path}@{repo.head}", "--json")
    assert code == 0, err
    return root, json.loads(out)


# --- the naming rule, pure --------------------------------------------------------------------------

def test_target_schema_tables_are_named_in_main_and_others_keep_their_schema() -> None:
    assert captured_name("dbt_pkg_tests", "orders", "dbt_pkg_tests") == "main.orders"
    assert captured_name("DBT_PKG_TESTS", "orders", "dbt_pkg_tests") == "main.orders"  # DuckDB ignores case
    assert captured_name("dbt_pkg_tests_audit", "orders", "dbt_pkg_tests") == "dbt_pkg_tests_audit.orders"
    assert captured_name("main", "orders", "dbt_pkg_tests") == "main.orders"
    # target main: nothing is renamed, whatever the schema (pins built there keep their exact names)
    for schema in ("main", "Main", "staging", "main_marts"):
        assert captured_name(schema, "t", "main") == f"{schema}.t"
    assert graded_name("main.orders") == "orders" and graded_name("audit.orders") is None
    assert graded_name("orders") is None


def test_a_collision_is_found_only_where_the_renaming_causes_it() -> None:
    rel = [("model.p.a", "tests_schema", "orders"), ("model.p.b", "main", "Orders")]
    line = first_collision(rel, "tests_schema")
    assert "model.p.a" in line and "model.p.b" in line and "main.Orders" in line and "\n" not in line
    assert first_collision(rel, "main") == ""  # tests_schema.orders and main.Orders differ
    assert first_collision([("model.p.a", "x", "orders"), ("model.p.b", "y", "orders")], "z") == ""


def test_the_rule_is_importable_inside_the_sandbox_with_only_its_folder_on_the_path() -> None:
    folder = Path(harvest_names.__file__).parent
    probe = (
        "import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p and p not in ('', '.')];"
        f"sys.path.insert(0, {str(folder)!r}); import harvest_names as h;"
        "print(h.captured_name('s', 'a', 's')); print(any(m.startswith('harvester') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.split() == ["main.a", "False"]


def test_capture_step_carries_the_target_schema() -> None:
    from harvester.errors import SandboxError
    from harvester.sandbox.steps import CaptureStep, step_request

    assert step_request(CaptureStep())["target_schema"] == "main"
    assert step_request(CaptureStep(target_schema=TARGET))["target_schema"] == TARGET
    for bad in ("", "a.b", " x"):
        with pytest.raises(SandboxError, match="target_schema"):
            step_request(CaptureStep(target_schema=bad))


# --- harvest add --------------------------------------------------------------------------------------

def test_add_captures_target_schema_tables_as_main(added) -> None:  # type: ignore[no-untyped-def]
    root, summary = added
    assert summary["project_dir"] == "integration_tests"
    names = {t["name"] for t in summary["tables"]}
    assert names == IN_MAIN | {AUDIT}
    assert all(not t["empty"] and t["deterministic"] for t in summary["tables"])
    from harvester.pin import read_pin

    pin = read_pin(Path(summary["pin"]))
    assert pin.profile_schema == TARGET
    assert {t.name for t in pin.tables} == names
    gold = root / "home" / "gold" / f"{pin.gold_sha256}.duckdb"
    assert _gold_tables(gold) == names  # nothing left under the target schema's own name
    # the lineage names every model exactly as the pin does
    from harvester.mint.lineage import models
    from harvester.state import load_state
    from tests.conftest import use_env

    with use_env(root / "home", root / "pins"):
        nodes = models(load_state(pin.id).manifest, pin.profile_schema)
    assert {n.table for n in nodes.values() if n.materialized != "ephemeral"} == names


def test_a_table_renamed_onto_one_already_in_main_fails_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(fixture_dir("target_schema"), src)
    # a schema macro that takes custom schemas verbatim, and a model built literally in `main` under
    # the alias of a target-schema model
    (src / "integration_tests" / "macros").mkdir()
    (src / "integration_tests" / "macros" / "verbatim_schema.sql").write_text(
        "{% macro generate_schema_name(custom_schema_name, node) -%}\n"
        "    {{ custom_schema_name | trim if custom_schema_name is not none else target.schema }}\n"
        "{%- endmacro %}\n"
    )
    (src / "integration_tests" / "models").mkdir()
    (src / "integration_tests" / "models" / "depot_costs_copy.sql").write_text(
        "{{ config(materialized='table', schema='main', alias='fleet_upkeep__depot_costs') }}\n"
        "select depot, depot_upkeep_cost from {{ ref('fleet_upkeep__depot_costs') }}\n"
    )
    repo = make_git_repo(src, tmp_path / "repo")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}")
    assert code == 1, (out, err)
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "would both be captured as main.fleet_upkeep__depot_costs" in err, err
    assert "model.fleet_upkeep_integration_tests.depot_costs_copy" in err
    assert not (tmp_path / "pins").exists() or not list((tmp_path / "pins").glob("*.toml"))
    home = tmp_path / "home"
    assert not (home / "gold").exists() or not any((home / "gold").iterdir())
    assert not list((home / "builds").rglob("gold.duckdb*"))  # refused before the gold file was made


# --- harvest mint -------------------------------------------------------------------------------------

def test_mint_keeps_a_task_the_official_scorer_can_grade(added, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from corpora.store import load_tasks
    from eval.scorer import official
    from harvester.patching import apply_to_text, parse_patch
    from harvester.pin import read_pin
    from harvester.reward_build import build_and_score_with, release
    from harvester.workspace import template
    from tests.conftest import use_env

    source, summary = added
    shutil.copytree(source / "home", tmp_path / "home", symlinks=True)
    shutil.copytree(source / "pins", tmp_path / "pins")
    code, _, err = _run(tmp_path, "split", "assign", "--test", "0", "--dev", "0", "--json")
    assert code == 0, err
    code, out, err = _run(tmp_path, "mint", summary["id"], "--max-per-model", "1", "--json")
    assert code == 0, (out, err)
    report = json.loads(out)
    assert report["this_run"]["kept"] >= 1, report
    # the audit model's table is not in main: its candidates are screened out as ungradable
    assert "ungradable" in report["families"]["filter"]["screened_out"], report

    home, pins = tmp_path / "home", tmp_path / "pins"
    pin = read_pin(Path(summary["pin"]))
    gold = home / "gold" / f"{pin.gold_sha256}.duckdb"
    with use_env(home, pins):
        tasks = load_tasks("train", home, pins, purpose="inspect")
        assert tasks
        tree = template(pin)
        for task in tasks:
            graded = set(task.grading.condition_tabs)
            assert graded and {f"main.{name}" for name in graded} <= IN_MAIN, task.grading
            # the official scorer finds every graded table by bare name in gold's main schema
            assert official(gold, gold, task.grading).passed, task.instance_id
            original = (tree / task.file).read_text(encoding="utf-8")
            broken = apply_to_text(original, parse_patch(task.broken_patch)[0])
            fixed = apply_to_text(broken, parse_patch(task.fix_patch)[0])
            # the reward's fast path rebuilds the target-schema tables where the scorer looks
            verdict, path = build_and_score_with("fast", task, {task.file: fixed})
            assert path == "fast" and (verdict.official, verdict.strict) == (1, 1), verdict
            verdict, _ = build_and_score_with("fast", task, {task.file: broken})
            assert verdict.official == 0, verdict
        # and a sandboxed dbt build of the repair, captured like a submission, scores 1
        verdict, path = build_and_score_with("dbt", task, {task.file: fixed})  # the last task's repair
        assert path == "dbt" and (verdict.official, verdict.strict) == (1, 1), verdict
        release()


def test_a_pin_captured_under_the_old_names_is_refused_with_the_fix(added, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from harvester.pin import read_pin, write_pin

    source, summary = added
    shutil.copytree(source / "home", tmp_path / "home", symlinks=True)
    shutil.copytree(source / "pins", tmp_path / "pins")
    pin = read_pin(Path(summary["pin"]))
    # a pin written before target-schema tables were captured in main named them by their build schema
    old = tuple(dataclasses.replace(t, name=t.name.replace("main.", f"{TARGET}.", 1)) for t in pin.tables)
    write_pin(dataclasses.replace(pin, tables=old), tmp_path / "pins")
    code, _, err = _run(tmp_path, "split", "assign", "--test", "0", "--dev", "0", "--json")
    assert code == 0, err
    code, out, err = _run(tmp_path, "mint", summary["id"], "--max-per-model", "1", "--json")
    assert code == 1, out
    assert "harvest add --rebuild" in err and len(err.strip().splitlines()) == 1, err

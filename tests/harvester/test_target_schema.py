"""Projects whose models are built outside ``main``: a model relation with an alias no other model
shares is captured as ``main.<alias>`` (harvester/sandbox/inside/harvest_names.py), so the official
scorer, which looks graded tables up by bare name in ``main``, can grade it.

Real git repositories, real sandboxed dbt-duckdb builds, real DuckDB gold, the real scorer. The fixture
``target_schema`` is an original Fivetran-style package (``fleet_upkeep``) whose ``integration_tests``
build needs the profile schema ``fleet_upkeep_integration_tests``; one of its models is built in a
custom schema (``<target>_audit``).
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

from dbt_harvest.cli import main
from dbt_harvest.harvester.gitrepos import make_git_repo
from dbt_harvest.harvester.sandbox.inside import harvest_names
from dbt_harvest.harvester.sandbox.inside.harvest_names import captured_names, graded_name
from tests.fixtures import fixture_dir, fixture_repo

TARGET = "fleet_upkeep_integration_tests"
IN_MAIN = {
    "main.stg_fleet_upkeep__vehicles",
    "main.stg_fleet_upkeep__visits",
    "main.fleet_upkeep__vehicle_costs",
    "main.fleet_upkeep__depot_costs",
    "main.fleet_upkeep__visit_audit",  # built in dbt's default custom schema <target>_audit
}


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


def test_a_unique_alias_is_captured_in_main_and_a_shared_one_keeps_its_schema() -> None:
    names = captured_names(
        [
            ("model.p.a", "dbt_pkg_tests", "orders"),
            ("model.p.b", "dbt_pkg_tests_audit", "visits"),
            ("model.p.c", "main", "customers"),
            ("model.p.d", "staging", "Payments"),
            ("model.p.e", "main", "payments"),  # shares its alias with d, ignoring case as DuckDB does
        ]
    )
    assert names == {
        "model.p.a": "main.orders",
        "model.p.b": "main.visits",
        "model.p.c": "main.customers",
        "model.p.d": "staging.Payments",
        "model.p.e": "main.payments",
    }
    assert len({n.lower() for n in names.values()}) == len(names)  # never two relations on one name
    assert graded_name("main.orders") == "orders" and graded_name("audit.orders") is None
    assert graded_name("orders") is None


def test_the_rule_is_importable_inside_the_sandbox_with_only_its_folder_on_the_path() -> None:
    folder = Path(harvest_names.__file__).parent
    probe = (
        "import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p and p not in ('', '.')];"
        f"sys.path.insert(0, {str(folder)!r}); import harvest_names as h;"
        "print(h.captured_names([('m', 's', 'a')])['m']); print(any(m.split('.')[0] in ('dbt_harvest', 'harvester') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.split() == ["main.a", "False"]


# --- harvest add --------------------------------------------------------------------------------------


def test_add_captures_every_model_table_in_main(added) -> None:  # type: ignore[no-untyped-def]
    root, summary = added
    assert summary["project_dir"] == "integration_tests"
    names = {t["name"] for t in summary["tables"]}
    assert names == IN_MAIN
    assert all(not t["empty"] and t["deterministic"] for t in summary["tables"])
    from dbt_harvest.core.pin import read_pin

    pin = read_pin(Path(summary["pin"]))
    assert pin.profile_schema == TARGET
    assert {t.name for t in pin.tables} == names
    assert all(t.model.startswith("model.fleet_upkeep") for t in pin.tables)  # each table names its model
    gold = root / "home" / "gold" / f"{pin.gold_sha256}.duckdb"
    assert _gold_tables(gold) == names  # nothing left under the target schema's own name
    # the lineage names every model exactly as the pin does
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.state import load_state
    from tests.conftest import use_env

    with use_env(root / "home", root / "pins"):
        nodes = models(load_state(pin.id).manifest)
    assert {n.table for n in nodes.values() if n.materialized != "ephemeral"} == names


def test_models_sharing_an_alias_keep_their_schemas_and_the_rest_still_go_to_main(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(fixture_dir("target_schema"), src)
    # a model built literally in `main` under the alias of another model
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
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--json")
    assert code == 0, (out, err)
    names = {t["name"] for t in json.loads(out)["tables"]}
    assert {f"{TARGET}.fleet_upkeep__depot_costs", "main.fleet_upkeep__depot_costs"} <= names
    assert "main.fleet_upkeep__vehicle_costs" in names and "main.fleet_upkeep__visit_audit" in names


# --- harvest mint -------------------------------------------------------------------------------------


def test_mint_keeps_a_task_the_official_scorer_can_grade(added, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.core.pin import read_pin
    from dbt_harvest.core.scorer import official
    from dbt_harvest.corpora.store import load_tasks
    from dbt_harvest.harvester.grading.edited import grade, release
    from dbt_harvest.harvester.workspace import template
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
            verdict = grade(task, {task.file: fixed}, "fast")
            path = verdict.path
            assert path == "fast" and (verdict.official, verdict.strict) == (1, 1), verdict
            verdict = grade(task, {task.file: broken}, "fast")
            assert verdict.official == 0, verdict
        # and a sandboxed dbt build of the repair, captured like a submission, scores 1
        verdict = grade(task, {task.file: fixed}, "dbt")  # the last task's repair
        path = verdict.path
        assert path == "dbt" and (verdict.official, verdict.strict) == (1, 1), verdict
        release()
    # tasks verify rebuilds the graded models under perturbation from the fresh build of a project in a
    # subfolder whose tables live in other schemas (its database at the workspace root, its manifest under
    # integration_tests/target)
    code, out, err = _run(tmp_path, "tasks", "verify", task.instance_id, "--json")
    assert code == 0, (out, err[-2000:])
    (checks,) = [t["checks"] for t in json.loads(out)["tasks"]]
    assert checks["stable_gold"]["ok"] and "moves under" in checks["stable_gold"]["detail"], checks


def test_a_pin_captured_under_the_old_names_is_refused_with_the_fix(added, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from dbt_harvest.core.pin import read_pin, write_pin

    source, summary = added
    shutil.copytree(source / "home", tmp_path / "home", symlinks=True)
    shutil.copytree(source / "pins", tmp_path / "pins")
    pin = read_pin(Path(summary["pin"]))
    # a pin written before models outside main were gathered there named them by their build schema
    old = tuple(dataclasses.replace(t, name=t.name.replace("main.", f"{TARGET}.", 1)) for t in pin.tables)
    write_pin(dataclasses.replace(pin, tables=old), tmp_path / "pins")
    code, _, err = _run(tmp_path, "split", "assign", "--test", "0", "--dev", "0", "--json")
    assert code == 0, err
    code, out, err = _run(tmp_path, "mint", summary["id"], "--max-per-model", "1", "--json")
    assert code == 1, out
    assert "harvest add --rebuild" in err and len(err.strip().splitlines()) == 1, err

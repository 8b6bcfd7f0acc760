"""Projects as real repositories are (issue 42): failing tests of their own and a database their SQL names.

- Baseline test failures (harvester/baseline.py): a project whose own dbt tests fail on it is pinned with them as
  known failures, every later build leaves them out, and its tasks count only the tests that pass on the original.
- A named database: a project whose sources name their database builds into a DuckDB file of that name, in every
  build (gold, mint, verify, the environment, a dataset row rebuilt by hand).
- A declared compat edit (harvester/compat_edits.py): a compat patch that edits a file of the repository is refused
  unless declared (``--allow-edits``), never touches model SQL, and is recorded in the pin, the row and the card.

The fixture, ``harbor_moorings``, carries all three: a duplicated stay in its seeds (a ``unique`` test fails and ``dbt
build`` would skip the two marts downstream of it), a singular test over a column that no longer exists (it errors),
a boat type outside an accepted list (it warns), a source in ``database: harbor``, and berth codes DuckDB reads as
numbers (the patch types the seed column in ``dbt_project.yml``). Before, ``harvest add`` took the edit silently and
refused the project ('Catalog "harbor" does not exist', then "skipped by dbt because an upstream dbt test failed").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dbt_harvest.core.closing import repair_closing
from dbt_harvest.core.errors import PinError
from dbt_harvest.harvester.gitrepos import make_git_repo
from tests.cli_home import cli_json, run_cli
from tests.fixtures import fixture_dir

UNIQUE = "test.harbor_moorings.unique_stg_moorings_mooring_id.11654014ba"
SINGULAR = "test.harbor_moorings.assert_no_negative_fees"
WARNS = "test.harbor_moorings.accepted_values_stg_boats_boat_type__sail__motor.9bd7b72176"
REVENUE = "models/marts/stay_revenue.sql"
BOATS = "models/staging/stg_boats.sql"


def _compat_patch(root: Path, name: str, path: str, old: str, new: str) -> Path:
    from dbt_harvest.core.patching import make_patch

    text = (fixture_dir("harbor_moorings") / path).read_text()
    assert old in text
    patch = root / name
    patch.write_text(make_patch(path, text, text.replace(old, new)))
    return patch


_run, _json = run_cli, cli_json


@pytest.fixture(scope="module")
def harbor(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("baseline")
    source = fixture_dir("harbor_moorings")
    revenue = (source / REVENUE).read_text()
    repo = make_git_repo(
        source,
        root / "repo",
        commits=[
            {
                "message": "stay revenue reads a column the staging model does not have",
                "files": {REVENUE: revenue.replace("m.nights,", "m.night_count,")},
            },
        ],
    )
    # the seed's berth codes typed as text: an edit of the project's own dbt_project.yml
    typed = _compat_patch(
        root,
        "typed.diff",
        "dbt_project.yml",
        "        length_m: double\n",
        "        length_m: double\n        berth: varchar\n",
    )
    added = _json(root, "add", f"{repo.path}@{repo.commits[0]}", "--compat-patch", str(typed), "--allow-edits")
    _json(root, "split", "assign", "--test", "0", "--dev", "0")
    minted = _json(root, "mint", added["id"], "--max-per-model", "1")
    return {"root": root, "repo": repo, "added": added, "minted": minted, "typed": typed}


def _tasks(root: Path) -> list:
    from dbt_harvest.core.task_record import read_task

    return [read_task(p) for p in sorted((root / "home" / "tasks" / "train").glob("*.json"))]


def test_the_project_is_pinned_with_its_failing_tests_known_and_every_model_built(harbor: dict) -> None:
    root, added = harbor["root"], harbor["added"]
    shown = _json(root, "show", added["id"])
    assert shown["baseline_tests"] == [
        {"unique_id": WARNS, "status": "warn", "excluded": False},
        {"unique_id": SINGULAR, "status": "error", "excluded": True},
        {"unique_id": UNIQUE, "status": "fail", "excluded": True},
    ]
    # the marts downstream of the failing unique test are gold, with the duplicated stay in them
    assert shown["database"] == "harbor"
    tables = {t["name"]: t for t in shown["tables"]}
    assert tables["main.stay_revenue"]["rows"] == 8 and tables["main.boat_totals"]["gradable"]
    from dbt_harvest.core.pin import read_pin

    pin = read_pin(root / "pins" / f"{added['id']}.toml")
    assert pin.excluded_tests == (
        "resource_type:test,assert_no_negative_fees",
        "resource_type:test,unique_stg_moorings_mooring_id",
    )
    assert pin.known_failing_tests == {UNIQUE, SINGULAR}
    assert pin.db_file == "harbor.duckdb" and pin.database_named
    assert all(not t.database_columns for t in pin.tables)  # the name cannot vary, so nothing moved with it


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_add.py::test_bad_input_is_one_line_and_writes_no_pin",
        "tests/harvester/test_reach.py::test_a_rebuild_that_finds_known_failures_or_a_database_says_so",
    )
)
def test_a_model_that_fails_to_build_is_still_refused_with_its_error(harbor: dict) -> None:
    root, repo = harbor["root"], harbor["repo"]
    code, _, err = _run(
        root, "add", f"{repo.path}@{repo.commits[1]}", "--compat-patch", str(harbor["typed"]), "--allow-edits"
    )
    error = err.strip().splitlines()[-1]  # after the progress line, one line of error
    assert code == 1 and error.startswith("error: ") and "stay_revenue" in error and "night_count" in error
    assert not list((root / "pins").glob(f"*@{repo.commits[1][:12]}.toml"))


def test_a_compat_patch_edits_only_what_is_declared_and_never_model_sql(harbor: dict) -> None:
    root, repo, added = harbor["root"], harbor["repo"], harbor["added"]
    shown = _json(root, "show", added["id"])
    assert shown["compat_edits"] == ["dbt_project.yml"]
    spec = f"{repo.path}@{repo.commits[1]}"
    code, _, err = _run(root, "add", spec, "--compat-patch", str(harbor["typed"]))
    error = err.strip().splitlines()[-1]
    assert code == 1 and "edits files of the repository (dbt_project.yml)" in error and "--allow-edits" in error
    cast = _compat_patch(root, "cast.diff", BOATS, "lpad(berth,", "lpad(cast(berth as varchar),")
    code, _, err = _run(root, "add", spec, "--compat-patch", str(cast), "--allow-edits")
    error = err.strip().splitlines()[-1]
    assert code == 1 and f"edits model SQL ({BOATS})" in error
    assert not list((root / "pins").glob(f"*@{repo.commits[1][:12]}.toml"))
    # the mint never makes a task of a file the patch edits (here none is a model), and the rebuild keeps the edit
    assert all(t.file != "dbt_project.yml" for t in _tasks(root))


def test_tasks_count_only_the_tests_that_pass_on_the_original(harbor: dict) -> None:
    tasks = _tasks(harbor["root"])
    assert harbor["minted"]["tasks_per_pin"][harbor["added"]["id"]] == len(tasks) >= 2
    for task in tasks:
        covering = set(task.local_checks.covering_tests)
        assert not covering & {UNIQUE, SINGULAR}, task.instance_id
        assert task.local_checks.builds and task.local_checks.tests_failed == 0
    # the marts' own tests are checks of the tasks over them (the singular test over stay_revenue is not)
    assert any(
        "test.harbor_moorings.not_null_stay_revenue_revenue.4857b36ac6" in t.local_checks.covering_tests for t in tasks
    )
    assert max(t.local_tests for t in tasks) >= 2
    # a statement names dbt tests only where some cover the bug: the untested mart's tasks name none
    untested = [t for t in tasks if not t.local_tests]
    assert untested and all(t.file == "models/marts/arrivals_by_day.sql" for t in untested)
    for task in tasks:
        assert task.problem_statement.endswith(repair_closing(task.local_checks))
        assert ("dbt test" in task.problem_statement) == (task not in untested), task.problem_statement


def test_the_environment_reports_the_pre_existing_failures_on_the_fast_path_and_the_build_alike(
    harbor: dict, tmp_path: Path
) -> None:
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.eval.env.episode import Episode
    from dbt_harvest.eval.env.tools import RunSettings
    from dbt_harvest.eval.env.workspace import discard, materialize
    from dbt_harvest.harvester.workspace import template
    from tests.conftest import use_env

    root = harbor["root"]
    task = _tasks(root)[0]
    with use_env(root / "home", root / "pins"):
        original = (template(read_pin(pin_path(task.pin, pins_dir()))) / task.file).read_text(encoding="utf-8")
        broken = apply_to_text(original, parse_patch(task.broken_patch)[0])
        fixed = apply_to_text(broken, parse_patch(task.fix_patch)[0])
        answers = []
        for fast in (True, False):
            ws = materialize(task, pins_dir(), tmp_path)
            try:
                assert ws.exclude_tests == read_pin(pin_path(task.pin, pins_dir())).excluded_tests
                assert ws.db_file == "harbor.duckdb"
                episode = Episode(task, ws, RunSettings(graded_edits=fast))
                episode.act("write_file", {"path": task.file, "content": fixed})
                validated = episode.act("validate", {})
                episode.act("submit", {})
                assert episode.submission is not None and episode.submission.official == 1
                answers.append(validated)
            finally:
                discard(ws)
    assert answers[0] == answers[1], answers
    assert answers[0].startswith("local checks PASS")
    assert "2 pre-existing failing dbt tests of the original project not run" in answers[0]
    assert "unique_stg_moorings_mooring_id" in answers[0]


def test_tasks_verify_rebuilds_a_task_with_the_known_failures_left_out(harbor: dict) -> None:
    root = harbor["root"]
    task = _tasks(root)[0]
    report = _json(root, "tasks", "verify", task.instance_id)
    assert report["summary"]["ok"] == 1, report


def test_dataset_rows_carry_the_baseline_tests_and_refuse_a_forged_one(harbor: dict, tmp_path: Path) -> None:
    from datasets import load_dataset

    from dbt_harvest.core.pin import read_pin
    from dbt_harvest.corpora.materialize import row_pin
    from dbt_harvest.corpora.untrusted import UntrustedRowError, check_row

    root, added = harbor["root"], harbor["added"]
    _json(root, "dataset", "build", "--out", str(tmp_path / "ds"), "--split", "train")
    row = load_dataset(str(tmp_path / "ds"))["train"][0]
    assert [t["unique_id"] for t in row["baseline_tests"]] == [WARNS, SINGULAR, UNIQUE]
    assert row["database_file"] == "harbor.duckdb" and row_pin(row).db_file == "harbor.duckdb"
    assert row["compat_edits"] == ["dbt_project.yml"] and row_pin(row).compat_edits == ("dbt_project.yml",)
    check_row(row)
    for name in ("../harbor.duckdb", "harbor warehouse.duckdb", "harbor.db"):
        with pytest.raises(UntrustedRowError, match="database_file"):
            check_row({**row, "database_file": name})
    assert row_pin(row).excluded_tests == read_pin(root / "pins" / f"{added['id']}.toml").excluded_tests
    for forged in (
        {"unique_id": "test.harbor_moorings.x --select *", "status": "fail"},
        {"unique_id": "model.harbor_moorings.stay_revenue", "status": "fail"},
        {"unique_id": UNIQUE, "status": "skipped"},
        {"unique_id": UNIQUE, "status": "fail", "extra": 1},
    ):
        with pytest.raises(UntrustedRowError, match="baseline test"):
            check_row({**row, "baseline_tests": [forged]})
    n = len(_tasks(root))
    card = (tmp_path / "ds" / "README.md").read_text()
    assert f"Tasks of such projects, per split: train {n} of {n}." in card
    assert f"Tasks whose patch edits files, per split: train {n} of {n}." in card
    with pytest.raises(UntrustedRowError, match="compat_edits"):
        check_row({**row, "compat_edits": ["../outside.yml"]})
    # a task rebuilt by hand from its row is told to leave the same tests out
    (tmp_path / "mirror" / "local").mkdir(parents=True)
    (tmp_path / "mirror" / "local" / "harbor_moorings").symlink_to(harbor["repo"].path)
    done = _json(
        root,
        "tasks",
        "materialize",
        str(tmp_path / "ds"),
        row["instance_id"],
        str(tmp_path / "task"),
        "--repo-mirror",
        str(tmp_path / "mirror"),
    )
    assert "./harbor.duckdb" in (tmp_path / "task" / "project" / "profiles.yml").read_text()
    assert done["build"].endswith(
        """sh -c "dbt seed && dbt build --exclude 'resource_type:test,assert_no_negative_fees' """
        ''''resource_type:test,unique_stg_moorings_mooring_id'"'''
    )
    # built by hand as printed (our own fixture, outside the sandbox): another folder, another home, plain dbt on
    # the PATH; the true repair scores 1 against the task's gold, the broken project 0
    project = tmp_path / "task" / "project"
    scores = {}
    for state in ("broken", "repaired"):
        if state == "repaired":
            subprocess.run(["git", "apply"], input=row["patch"], text=True, cwd=project, check=True)
        (project / "harbor.duckdb").unlink(missing_ok=True)
        shutil.rmtree(project / "target", ignore_errors=True)
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "HOME": str(tmp_path / "someone"),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        }
        (tmp_path / "someone").mkdir(exist_ok=True)
        built = subprocess.run(
            ["bash", "-c", done["build"]], cwd=project, env=env, capture_output=True, text=True, timeout=600
        )
        assert built.returncode == 0, built.stdout[-2000:]
        scored = _json(
            root, "score", "--task", f"{tmp_path / 'ds'}:{row['instance_id']}", "--pred", str(project / "harbor.duckdb")
        )
        scores[state] = scored["official"]["score"]
    assert scores == {"broken": 0, "repaired": 1}


# ------------------------------------------------------------------------------------------------- pure parts


def test_baseline_tests_round_trip_in_the_pin_and_a_pin_without_them_keeps_its_bytes(harbor: dict) -> None:
    import dataclasses
    import tomllib

    from dbt_harvest.core.pin import BaselineTest, pin_from_dict, read_pin

    pin = read_pin(harbor["root"] / "pins" / f"{harbor['added']['id']}.toml")
    data = tomllib.loads(pin.to_toml())
    data.pop("digest")
    assert pin_from_dict(data) == pin
    bare = dataclasses.replace(pin, baseline_tests=())
    assert "baseline_tests" not in bare.to_toml()
    for entries, message in (
        ([{"unique_id": UNIQUE, "status": "pass"}], "status"),
        ([{"unique_id": "seed.p.raw", "status": "fail"}], "unique id"),
        ("fail", "must be a list"),
    ):
        with pytest.raises(PinError, match=message):
            pin_from_dict({**data, "baseline_tests": entries})
    assert BaselineTest("unit_test.p.orders_math", "fail").selector == "resource_type:unit_test,orders_math"


def test_only_a_test_id_a_pin_can_record_becomes_a_baseline_test() -> None:
    from dbt_harvest.core.pin import is_test_uid

    assert is_test_uid(UNIQUE) and is_test_uid(SINGULAR) and is_test_uid("unit_test.p.orders_math")
    # a singular test named with a dash cannot be an --exclude selector: it stays a failing test (the build fails)
    for uid in ("test.p.assert-no-negatives", "model.p.orders", "test.p", "test.p.x" + "y" * 600):
        assert not is_test_uid(uid), uid


def test_the_database_a_failed_build_looked_for_is_read_from_duckdbs_error() -> None:
    from dbt_harvest.harvester.add import missing_catalog

    assert (
        missing_catalog('model.p.m: Runtime Error in model m (m.sql) Binder Error: Catalog "harbor" does not exist!')
        == "harbor"
    )
    assert missing_catalog("Catalog Error: Catalog with name raw_data does not exist!") == "raw_data"
    assert missing_catalog('Catalog "system" does not exist!') is None
    assert missing_catalog("Table with name orders does not exist!") is None


def test_a_pin_database_is_a_plain_identifier(harbor: dict) -> None:
    import tomllib

    from dbt_harvest.core.pin import pin_from_dict, read_pin

    data = tomllib.loads(read_pin(harbor["root"] / "pins" / f"{harbor['added']['id']}.toml").to_toml())
    data.pop("digest")
    for bad in ("../x", "a b", ""):
        with pytest.raises(PinError, match="database"):
            pin_from_dict({**data, "database": bad})


def test_a_rebuild_that_finds_known_failures_or_a_database_says_so(harbor: dict) -> None:
    import dataclasses

    from dbt_harvest.core.pin import read_pin
    from dbt_harvest.harvester.add import _drift

    pin = read_pin(harbor["root"] / "pins" / f"{harbor['added']['id']}.toml")
    older = dataclasses.replace(pin, baseline_tests=(), database="build")
    assert _drift(older, pin) == (
        "baseline tests: 0 -> 3 (2 known failures left out of every build; re-mint the pin)",
        "database build -> harbor",
    )
    assert _drift(pin, pin) == ()
    # a model file that reads otherwise (a port applied with other line ends) changes the pin: said too
    first = sorted(pin.model_files)[0]
    edited = dataclasses.replace(pin, model_files={**pin.model_files, first: "0" * 64})
    assert _drift(edited, pin) == (f"model files: 1 read otherwise ({first})",)


def test_a_profile_refuses_an_exclusion_that_is_not_a_test_selector(tmp_path: Path) -> None:
    from dbt_harvest.core.errors import SandboxError
    from dbt_harvest.harvester.sandbox import write_profile
    from dbt_harvest.harvester.sandbox.profile import read_profile_meta

    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    with pytest.raises(SandboxError, match="excluded test"):
        write_profile(tmp_path, ".", "p", exclude_tests=("stay_revenue+",))
    write_profile(tmp_path, ".", "p", exclude_tests=("resource_type:test,b", "resource_type:test,a"))
    assert read_profile_meta(tmp_path, ".").exclude_tests == ("resource_type:test,a", "resource_type:test,b")

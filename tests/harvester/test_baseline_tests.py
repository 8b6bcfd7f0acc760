"""Baseline test failures (harvester/baseline.py): a project whose own dbt tests fail on it is pinned with them as
known failures, every later build leaves them out, and its tasks count only the tests that pass on the original.

The fixture, ``harbor_moorings``, carries a duplicated stay in its seeds (a ``unique`` test fails and ``dbt build``
would skip the two marts downstream of it), a singular test over a column that no longer exists (it errors) and a
boat type outside an accepted list (it warns). Before baseline tests, ``harvest add`` refused it ("skipped by dbt
because an upstream dbt test failed").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.errors import PinError
from dbt_harvest.harvester.gitrepos import make_git_repo
from tests.fixtures import fixture_dir

UNIQUE = "test.harbor_moorings.unique_stg_moorings_mooring_id.11654014ba"
SINGULAR = "test.harbor_moorings.assert_no_negative_fees"
WARNS = "test.harbor_moorings.accepted_values_stg_boats_boat_type__sail__motor.9bd7b72176"
REVENUE = "models/marts/stay_revenue.sql"


def _run(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"HARVEST_HOME": str(root / "home"), "HARVEST_PINS": str(root / "pins")})
    return result.exit_code, result.stdout, result.stderr


def _json(root: Path, *args: str) -> dict:
    code, out, err = _run(root, *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def harbor(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("baseline")
    source = fixture_dir("harbor_moorings")
    revenue = (source / REVENUE).read_text()
    repo = make_git_repo(source, root / "repo", commits=[
        {"message": "stay revenue reads a column the staging model does not have",
         "files": {REVENUE: revenue.replace("m.nights,", "m.night_count,")}},
    ])
    added = _json(root, "add", f"{repo.path}@{repo.commits[0]}")
    _json(root, "split", "assign", "--test", "0", "--dev", "0")
    minted = _json(root, "mint", added["id"])
    return {"root": root, "repo": repo, "added": added, "minted": minted}


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
    tables = {t["name"]: t for t in shown["tables"]}
    assert tables["main.stay_revenue"]["rows"] == 8 and tables["main.boat_totals"]["gradable"]
    from dbt_harvest.core.pin import read_pin

    pin = read_pin(root / "pins" / f"{added['id']}.toml")
    assert pin.excluded_tests == ("resource_type:test,assert_no_negative_fees",
                                  "resource_type:test,unique_stg_moorings_mooring_id")
    assert pin.known_failing_tests == {UNIQUE, SINGULAR}


def test_a_model_that_fails_to_build_is_still_refused_with_its_error(harbor: dict) -> None:
    root, repo = harbor["root"], harbor["repo"]
    code, _, err = _run(root, "add", f"{repo.path}@{repo.commits[1]}")
    error = err.strip().splitlines()[-1]  # after the progress line, one line of error
    assert code == 1 and error.startswith("error: ") and "stay_revenue" in error and "night_count" in error
    assert not list((root / "pins").glob(f"*@{repo.commits[1][:12]}.toml"))


def test_tasks_count_only_the_tests_that_pass_on_the_original(harbor: dict) -> None:
    tasks = _tasks(harbor["root"])
    assert harbor["minted"]["tasks_per_pin"][harbor["added"]["id"]] == len(tasks) >= 2
    for task in tasks:
        covering = set(task.local_checks.covering_tests)
        assert not covering & {UNIQUE, SINGULAR}, task.instance_id
        assert task.local_checks.builds and task.local_checks.tests_failed == 0
    # the marts' own tests are checks of the tasks over them (the singular test over stay_revenue is not)
    assert any("test.harbor_moorings.not_null_stay_revenue_revenue.4857b36ac6" in t.local_checks.covering_tests
               for t in tasks)
    assert max(t.local_tests for t in tasks) >= 2


def test_the_environment_reports_the_pre_existing_failures_on_the_fast_path_and_the_build_alike(
        harbor: dict, tmp_path: Path) -> None:
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
    check_row(row)
    assert row_pin(row).excluded_tests == read_pin(root / "pins" / f"{added['id']}.toml").excluded_tests
    for forged in ({"unique_id": "test.harbor_moorings.x --select *", "status": "fail"},
                   {"unique_id": "model.harbor_moorings.stay_revenue", "status": "fail"},
                   {"unique_id": UNIQUE, "status": "skipped"},
                   {"unique_id": UNIQUE, "status": "fail", "extra": 1}):
        with pytest.raises(UntrustedRowError, match="baseline test"):
            check_row({**row, "baseline_tests": [forged]})
    n = len(_tasks(root))
    assert f"Tasks of such projects, per split: train {n} of {n}." in (tmp_path / "ds" / "README.md").read_text()
    # a task rebuilt by hand from its row is told to leave the same tests out
    (tmp_path / "mirror" / "local").mkdir(parents=True)
    (tmp_path / "mirror" / "local" / "harbor_moorings").symlink_to(harbor["repo"].path)
    done = _json(root, "tasks", "materialize", str(tmp_path / "ds"), row["instance_id"], str(tmp_path / "task"),
                 "--repo-mirror", str(tmp_path / "mirror"))
    assert done["build"] == ("dbt seed && dbt build --exclude 'resource_type:test,assert_no_negative_fees' "
                             "'resource_type:test,unique_stg_moorings_mooring_id'")


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
    for entries, message in (([{"unique_id": UNIQUE, "status": "pass"}], "status"),
                             ([{"unique_id": "seed.p.raw", "status": "fail"}], "unique id"),
                             ("fail", "must be a list")):
        with pytest.raises(PinError, match=message):
            pin_from_dict({**data, "baseline_tests": entries})
    assert BaselineTest("unit_test.p.orders_math", "fail").selector == "resource_type:unit_test,orders_math"


def test_a_profile_refuses_an_exclusion_that_is_not_a_test_selector(tmp_path: Path) -> None:
    from dbt_harvest.core.errors import SandboxError
    from dbt_harvest.harvester.sandbox import write_profile
    from dbt_harvest.harvester.sandbox.profile import read_profile_meta

    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    with pytest.raises(SandboxError, match="excluded test"):
        write_profile(tmp_path, ".", "p", exclude_tests=("stay_revenue+",))
    write_profile(tmp_path, ".", "p", exclude_tests=("resource_type:test,b", "resource_type:test,a"))
    assert read_profile_meta(tmp_path, ".").exclude_tests == ("resource_type:test,a", "resource_type:test,b")

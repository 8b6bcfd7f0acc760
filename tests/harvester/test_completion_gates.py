"""Completion tasks a careful engineer can solve (issue 57), on the original ``tour_guides`` fixture: real
git, real sandboxed dbt-duckdb builds, the real mint.

- ``guide_summary``'s documentation omits its filter and its left join; the stated facts rule out every
  wrong completion the mint finds, so it is kept, with both statements and its facts.
- ``guide_leaderboard``'s ``row_number()`` over tied counts moves under a perturbed rebuild: never graded.
- ``guide_customers``' only wrong completion (a count of all rows for a distinct count) agrees with every
  stated fact: refused as ``underdetermined``.
- The documentation-only statement is what a dataset build or an export can choose, unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures import fixture_repo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def guides(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """tour_guides pinned, reserved to train and minted for completions only."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.ledger import Params, assign
    from dbt_harvest.corpora.store import load_tasks, mint_target
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.mint.pipeline import MintOptions, load_reports, mint
    from tests.conftest import use_env

    root = tmp_path_factory.mktemp("guides")
    repo = fixture_repo("tour_guides", root / "repo")
    home, pins = root / "home", root / "pins"
    with use_env(home, pins):
        pin = add(f"{repo.path}@{repo.head}", AddOptions()).pin
        assign(pins, Params(test=0, dev=0, seed=0))
        mint([pin], MintOptions(kinds=("completion",)), mint_target(harvest_home(), pins_dir()))
        reports = [r for r in load_reports(pin.id) if r.get("family") == "completion"]
        tasks = load_tasks("train", home, pins, purpose="inspect")
    return SimpleNamespace(pin=pin, reports=reports, tasks=tasks, home=home, pins=pins, root=root)


def _single(guides: SimpleNamespace, model: str):  # type: ignore[no-untyped-def]
    from dbt_harvest.core.patching import parse_patch

    found = [t for t in guides.tasks if t.file == f"models/marts/{model}.sql" and len(parse_patch(t.broken_patch)) == 1]
    return found[0] if found else None


def _report(guides: SimpleNamespace, model: str) -> dict:
    return next(r for r in guides.reports if r["file"] == f"models/marts/{model}.sql" and "+" not in r["key"])


def test_a_model_whose_docs_omit_its_filter_is_determined_by_the_stated_facts(guides: SimpleNamespace) -> None:
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.core.statement_facts import contradictions
    from dbt_harvest.harvester.mint.facts import read_file_table
    from tests.conftest import use_env

    task = _single(guides, "guide_summary")
    assert task is not None, _report(guides, "guide_summary")
    (facts,) = task.facts
    assert facts.rows == 8 and facts.grain == ("guide_id",)
    assert [(c.name, c.type, c.nulls) for c in facts.columns] == [
        ("guide_id", "integer", False),
        ("full_guide_name", "text", False),
        ("total_bookings", "integer", False),
    ]
    # a boundary case the SQL decides: a guide whose only booking has amount 0 is listed (the left join) with 0
    # bookings (the filter); the names show their order and separator; the busiest guide is the largest count
    assert ("5", "Emeka Obi", "0") in facts.examples and ("6", "Fumiko Sato", "4") in facts.examples
    # the full statement is the documentation, then the facts; the documentation alone is kept beside it
    assert task.problem_statement.startswith(task.documentation_statement.rsplit("\n\n", 1)[0])
    assert "It has exactly 8 rows." in task.problem_statement and "8 rows" not in task.documentation_statement
    assert "| 5 | Emeka Obi | 0 |" in task.problem_statement
    assert "amount > 0" not in task.problem_statement
    # every wrong completion contradicts a stated fact; the gold contradicts none
    wrong = [apply_to_text("", parse_patch(p)[0]) for p in task.wrong_repair_patches]
    assert wrong and not task.weak
    with use_env(guides.home, guides.pins):
        from dbt_harvest.harvester.gold import gold_path

        gold = read_file_table(gold_path(guides.pin.gold_sha256), facts.table)
    assert contradictions(facts, gold) == ()


def test_a_rank_over_ties_is_never_graded(guides: SimpleNamespace) -> None:
    task = _single(guides, "guide_leaderboard")
    report = _report(guides, "guide_leaderboard")
    if task is None:  # refused for another reason: never because its graded columns moved
        assert report["reason"] != "unstable_gold", report
        stability = _stability(guides)
        assert "leaderboard_position" in stability["main.guide_leaderboard"]
        return
    (facts,) = task.facts
    graded = {c.name for c in facts.columns}
    assert "leaderboard_position" not in graded and {"guide_id", "total_bookings"} <= graded
    (cols,) = task.grading.condition_cols
    record = next(t for t in guides.pin.tables if t.name == "main.guide_leaderboard")
    assert "leaderboard_position" not in {record.columns[i].name for i in cols}


def _stability(guides: SimpleNamespace) -> dict[str, list[str]]:
    from dbt_harvest.core.home import mint_dir
    from tests.conftest import use_env

    with use_env(guides.home, guides.pins):
        folder = mint_dir(guides.pin.id) / "stability"
    found = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return {f["table"]: f["unstable"] for f in found}


def test_the_perturbed_rebuilds_find_the_tied_rank_and_nothing_else(guides: SimpleNamespace) -> None:
    stability = _stability(guides)
    assert stability["main.guide_leaderboard"] == ["leaderboard_position"]
    assert all(not cols for table, cols in stability.items() if table != "main.guide_leaderboard"), stability


def test_a_model_whose_only_wrong_completion_agrees_with_every_fact_is_refused(guides: SimpleNamespace) -> None:
    assert _single(guides, "guide_customers") is None
    report = _report(guides, "guide_customers")
    assert (report["kept"], report["reason"]) == (False, "underdetermined")
    assert "grain.count_distinct_to_count" in report["detail"]


def test_the_documentation_only_statement_is_exported_unchanged(guides: SimpleNamespace, tmp_path: Path) -> None:
    from dbt_harvest.eval.export.spider2 import task_line

    task = _single(guides, "guide_summary")
    assert task is not None
    assert task_line(task, "documentation")["instruction"] == task.documentation_statement
    assert task_line(task)["instruction"] == task.problem_statement
    assert "Facts about the expected" not in task.documentation_statement


def _verify(guides: SimpleNamespace, *ids: str) -> dict:
    from click.testing import CliRunner

    from dbt_harvest.cli import main

    env = {"HARVEST_HOME": str(guides.home), "HARVEST_PINS": str(guides.pins)}
    result = CliRunner().invoke(main, ["tasks", "verify", *ids, "--json"], env=env)
    assert result.exit_code in (0, 1), result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_tasks_verify_rechecks_both_gates_on_fresh_builds(guides: SimpleNamespace) -> None:
    task = _single(guides, "guide_summary")
    assert task is not None
    report = _verify(guides, task.instance_id)
    (checks,) = [t["checks"] for t in report["tasks"]]
    assert checks["stable_gold"]["ok"] and checks["determined"]["ok"], checks
    assert report["summary"]["ok"] == 1, report


def test_tasks_verify_fails_a_completion_whose_gold_contradicts_its_facts_or_that_states_none(
    guides: SimpleNamespace,
) -> None:
    """The same task with a row count its gold does not have, and with no facts at all (minted before the gates)."""
    from dataclasses import replace

    from dbt_harvest.harvester.verify import verify
    from tests.conftest import use_env

    task = _single(guides, "guide_summary")
    assert task is not None
    (facts,) = task.facts
    wrong_count = replace(task, facts=(replace(facts, rows=facts.rows + 1),))
    no_facts = replace(task, facts=(), documentation_statement="")
    with use_env(guides.home, guides.pins):
        verdicts = verify([wrong_count, no_facts])
    for verdict, expected in zip(verdicts, ("gold contradicts a stated fact", "states no facts"), strict=True):
        checks = {c.name: c for c in verdict.checks}
        assert not checks["determined"].ok and expected in checks["determined"].detail, checks
        assert checks["stable_gold"].ok and not verdict.ok


def test_a_re_mint_under_the_gates_withdraws_the_task_an_earlier_decision_kept(
    guides: SimpleNamespace, tmp_path: Path
) -> None:
    """A home whose store holds a guide_customers task (as a mint before the gates kept it) is minted again:
    the shard now refuses the model and the stale task leaves the store; the kept ones stay."""
    import shutil
    from dataclasses import replace

    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.core.patching import make_patch
    from dbt_harvest.core.task_record import COMPLETE_OPERATOR, task_id, write_task
    from dbt_harvest.corpora.store import load_tasks, mint_target, split_dir
    from dbt_harvest.harvester.mint.pipeline import MintOptions, mint
    from dbt_harvest.harvester.workspace import template
    from tests.conftest import use_env

    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(guides.home, home, symlinks=True)
    shutil.copytree(guides.pins, pins)
    summary = _single(guides, "guide_summary")
    assert summary is not None
    file = "models/marts/guide_customers.sql"
    with use_env(home, pins):
        original = (template(guides.pin) / file).read_text()
        deleted = make_patch(file, original, None)
        stale_id = task_id(guides.pin.id.split("@", 1)[0], guides.pin.commit, COMPLETE_OPERATOR, file, deleted)
        stale = replace(
            summary,
            instance_id=stale_id,
            file=file,
            broken_patch=deleted,
            fix_patch=make_patch(file, None, original),
            facts=(),
            documentation_statement="",
        )
        write_task(stale, split_dir(home, "train"))
        before = {t.instance_id for t in load_tasks("train", home, pins, purpose="inspect")}
        assert stale_id in before
        # another seed re-decides every completion shard (it is part of their keys)
        mint([guides.pin], MintOptions(kinds=("completion",), seed=1), mint_target(harvest_home(), pins_dir()))
        after = {t.instance_id for t in load_tasks("train", home, pins, purpose="inspect")}
    assert stale_id not in after and summary.instance_id in after
    assert after == before - {stale_id}, sorted(after ^ before)

"""A problem statement never claims dbt tests that do not cover the bug: the closing follows the local
checks, records minted before that are read restated, and the task lock still recognises them."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from dbt_harvest.core.closing import (
    COMPLETION_TESTED,
    COMPLETION_UNTESTED,
    REPAIR_TESTED,
    REPAIR_UNTESTED,
    as_first_written,
    repair_closing,
    restated,
)
from dbt_harvest.core.task_record import COMPLETE_OPERATOR, LocalChecks, TaskRecord, read_task
from dbt_harvest.corpora.tasklock import compare, lock_of, record_sha256
from dbt_harvest.harvester.mint.contract import ColumnContract, Contract, completion_statement
from dbt_harvest.harvester.mint.statement import Symptom, fixed_phrases, template_statement
from tests.corpora.corpora_world import make_task

PIN = SimpleNamespace(
    id="acme__shop@" + "a" * 12,
    commit="a" * 40,
    url="https://github.com/acme/shop",
    gold_sha256="b" * 64,
    license="MIT",
)
UNTESTED = LocalChecks(builds=True, tests_total=0, tests_failed=0)
TESTED = LocalChecks(builds=True, tests_total=2, tests_failed=0, covering_tests=("test.shop.unique_orders_id.1",))
SYMPTOM = Symptom("fct_orders", "One row per order.", 10, 10, (("revenue", "Order revenue.", "higher"),))
TEST_WORDS = re.compile(r"\btests?\b", re.IGNORECASE)


def _repair(checks: LocalChecks, statement: str, n: int = 1, split: str = "train") -> TaskRecord:
    return replace(make_task(PIN, split, "g", n, statement=statement), local_checks=checks)  # type: ignore[arg-type]


def _contract(name: str) -> Contract:
    return Contract(
        model=f"model.shop.{name}",
        name=name,
        file=f"models/{name}.sql",
        description=f"One row per {name}.",
        materialized="table",
        columns=(ColumnContract("id", "The key.", ()),),
        model_tests=(),
        reads=(),
        depth=1,
    )


def _completion(checks: LocalChecks, statement: str) -> TaskRecord:
    return replace(_repair(checks, statement), kind="completion", operator=COMPLETE_OPERATOR)


def _written(record: TaskRecord, folder: Path) -> TaskRecord:
    path = folder / f"{record.instance_id}.json"
    path.write_text(record.to_json(), encoding="utf-8")
    return read_task(path)


def test_the_mint_closes_on_tests_only_when_a_test_covers_the_bug() -> None:
    untested = template_statement([SYMPTOM], repair_closing(UNTESTED))
    assert untested.endswith(REPAIR_UNTESTED) and not TEST_WORDS.search(untested)
    assert template_statement([SYMPTOM], repair_closing(TESTED)).endswith(REPAIR_TESTED)
    assert repair_closing(LocalChecks(builds=True, tests_total=1, tests_failed=1)) == REPAIR_TESTED  # a loud bug
    one = completion_statement(_contract("orders"), tested=False)
    two = completion_statement(_contract("orders"), _contract("customers"), tested=False)
    for text in (one, two):
        assert not TEST_WORDS.search(text.split("\n\n")[-1])
    assert one.endswith(COMPLETION_UNTESTED.format(name="orders") + "\n")
    assert completion_statement(_contract("orders")).endswith(COMPLETION_TESTED.format(name="orders") + "\n")
    # the lint discounts the new closing like every other fixed sentence of the templates
    for closing in (REPAIR_UNTESTED, COMPLETION_UNTESTED.split("{name}")[1]):
        assert tuple(re.findall(r"\w+", closing.lower())) in fixed_phrases()


def test_a_record_minted_with_the_earlier_closing_reads_restated(tmp_path: Path) -> None:
    old = _repair(UNTESTED, template_statement([SYMPTOM], REPAIR_TESTED))
    read = _written(old, tmp_path)
    assert read.problem_statement == template_statement([SYMPTOM], REPAIR_UNTESTED)
    assert not TEST_WORDS.search(read.problem_statement)
    assert as_first_written(read) == old and restated(read) == read
    # a task a test covers, a writer's own words and a loud task keep their statement byte for byte
    for kept in (
        _repair(TESTED, template_statement([SYMPTOM], REPAIR_TESTED), 2),
        _repair(UNTESTED, "Finance sees revenue too high on fct_orders; please look.", 3),
        _repair(LocalChecks(True, 1, 1), template_statement([SYMPTOM], REPAIR_TESTED), 4),
    ):
        assert _written(kept, tmp_path) == kept and as_first_written(kept) == kept
    for statement in (
        completion_statement(_contract("orders")),
        completion_statement(_contract("orders"), _contract("customers")),
    ):
        old_completion = _completion(UNTESTED, statement)
        read = _written(old_completion, tmp_path)
        assert read.problem_statement != statement and not TEST_WORDS.search(read.problem_statement.split("\n\n")[-1])
        assert read.problem_statement.split("\n\n")[:-1] == statement.split("\n\n")[:-1]  # only the closing moved
        assert as_first_written(read) == old_completion
        tested = _completion(replace(UNTESTED, covering_tests=("test.shop.not_null_orders_id.2",)), statement)
        assert _written(tested, tmp_path) == tested


def test_the_lock_recognises_a_restated_task_and_nothing_else(tmp_path: Path) -> None:
    old = [
        _repair(UNTESTED, template_statement([SYMPTOM], REPAIR_TESTED), 1),
        _repair(TESTED, template_statement([SYMPTOM], REPAIR_TESTED), 2),
        _repair(UNTESTED, template_statement([SYMPTOM], REPAIR_TESTED), 3, split="test"),
    ]
    locked = lock_of(old, "head")
    rebuilt = [_written(r, tmp_path) for r in old]
    assert record_sha256(rebuilt[0]) != record_sha256(old[0])  # the record itself changed
    diff = compare(locked, lock_of(rebuilt, "head", locked_golds=dict(locked.golds)))
    assert diff.same and len(diff.restated) == 2 and not diff.renamed
    assert "2 with a restated closing" in diff.summary()
    # once restated, any other change is still a change, sealed tasks included
    edited = [rebuilt[0], rebuilt[1], replace(rebuilt[2], fix_patch=rebuilt[2].fix_patch + "\n")]
    diff = compare(locked, lock_of(edited, "head", locked_golds=dict(locked.golds)))
    assert not diff.same and len(diff.missing) == 1 and len(diff.extra) == 1
    # a record claiming tests it does not have is not passed off as the locked one the other way round
    claimed = replace(old[1], local_checks=UNTESTED)
    assert not compare(lock_of([old[1]], "head"), lock_of([claimed], "head")).same
    data = json.loads(rebuilt[0].to_json())
    assert data["problem_statement"].endswith(REPAIR_UNTESTED)


def test_a_restated_task_whose_gold_was_renamed_too_is_recognised_either_way(tmp_path: Path) -> None:
    """Locked before both changes, or re-keyed after the restatement and then renamed: the same task."""
    from dbt_harvest.corpora.tasklock import under_gold

    old = [
        _repair(UNTESTED, template_statement([SYMPTOM], REPAIR_TESTED), 1),
        _repair(TESTED, template_statement([SYMPTOM], REPAIR_TESTED), 2),
    ]
    new_gold = "f" * 64
    rebuilt = [under_gold(_written(r, tmp_path), new_gold) for r in old]
    rekeyed = [_written(r, tmp_path) for r in old]  # restated and re-keyed under the old gold
    for locked, restated_count in ((lock_of(old, "head"), 1), (lock_of(rekeyed, "head"), 0)):
        diff = compare(locked, lock_of(rebuilt, "head", locked_golds=dict(locked.golds)))
        assert diff.same and len(diff.renamed) == 2 and len(diff.restated) == restated_count, diff

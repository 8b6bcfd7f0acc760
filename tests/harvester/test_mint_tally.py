"""The mint's progress tally (harvester/mint/tally.py): pins done, and per kind (repair, history, completion)
its shards finished of those planned and its candidates screened out, rejected at confirm and kept."""

from __future__ import annotations

from dbt_harvest.harvester.mint.shard import CandidateReport, ShardJob
from dbt_harvest.harvester.mint.tally import MintTally, counts_line


def _job(pin: str, model: str, kind: str = "repair") -> ShardJob:
    return ShardJob(pin, model, "train", "g", None, 1, 0, frozenset(), home="/h", pins="/p", kind=kind)


def _report(stage: str, kept: bool, family: str = "filter") -> CandidateReport:
    return CandidateReport("k", "p", "m", "f.sql", "op", family, "e", stage, kept, "" if kept else "why", "")


def test_counts_per_kind_and_pins_done_as_shards_finish_and_rounds_are_planned() -> None:
    tally = MintTally(pins=3, history_pins=frozenset({"hist@1"}))
    repair_a, repair_b, history = _job("a@1", "m1"), _job("b@1", "m2"), _job("hist@1", "m3")
    tally.plan([repair_a, repair_b, history])
    assert tally.line() == (
        "0/3 pins done; repair 0/2 shards: 0 candidates, 0 screened out, 0 rejected at confirm, 0 kept; "
        "history 0/1 shards: 0 candidates, 0 screened out, 0 rejected at confirm, 0 kept"
    )
    tally.add(repair_a, [_report("screen", False), _report("screen", False), _report("confirm", True)])
    tally.add(history, [_report("confirm", False, "history")])
    assert tally.line() == (
        "2/3 pins done; repair 1/2 shards: 3 candidates, 2 screened out, 0 rejected at confirm, 1 kept; "
        "history 1/1 shards: 1 candidates, 0 screened out, 1 rejected at confirm, 0 kept"
    )
    tally.add(repair_b, [])
    # a further round: pin a's completions, then its pairs shard; the pin is open again until they finish
    single, pairs = _job("a@1", "m1", "completion"), _job("a@1", "", "completion-pairs")
    tally.plan([single])
    assert tally.line().startswith("2/3 pins done; repair 2/2 shards: ")
    assert tally.line().endswith("; completion 0/1 shards: 0 candidates, 0 screened out, 0 rejected at confirm, 0 kept")
    tally.add(single, [_report("confirm", True, "completion")])
    tally.plan([pairs])
    tally.add(pairs, [_report("confirm", True, "completion"), _report("confirm", False, "completion")])
    assert tally.line().startswith("3/3 pins done; ")
    assert "; completion 2/2 shards: 3 candidates, 0 screened out, 1 rejected at confirm, 2 kept" in tally.line()
    # `harvest mint --json`'s this_run: every kind together, in its keys' order
    assert tally.this_run() == {"candidates": 7, "screened_out": 2, "confirm_rejected": 2, "kept": 3}
    assert list(tally.this_run()) == ["candidates", "screened_out", "confirm_rejected", "kept"]


def test_shards_never_planned_through_the_tally_are_counted_as_they_finish() -> None:
    """The --augment step's progress: no plan and no pin count, the shards and their candidates only."""
    tally = MintTally()
    assert (
        tally.line() == counts_line(tally.this_run()) == "0 candidates, 0 screened out, 0 rejected at confirm, 0 kept"
    )
    tally.add(_job("a@1", "m1"), [_report("confirm", True)])
    assert tally.line() == "repair 1 shards: 1 candidates, 0 screened out, 0 rejected at confirm, 1 kept"


def test_a_shard_the_budget_stopped_is_counted_but_not_finished() -> None:
    tally = MintTally(pins=1)
    first, second = _job("a@1", "m1"), _job("a@1", "m2")
    tally.plan([first, second])
    tally.add(first, [_report("screen", False)])
    tally.add(second, [_report("confirm", True)], stopped=True)
    assert tally.line() == (
        "0/1 pins done; repair 1/2 shards (1 stopped): 2 candidates, 1 screened out, 0 rejected at confirm, 1 kept"
    )

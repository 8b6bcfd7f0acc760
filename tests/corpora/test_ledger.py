"""The reservation ledger: seeded draws, refusal to change, forced history, extensions, tampering."""

from __future__ import annotations

import json

import pytest

from dbt_harvest.core.errors import PinError
from dbt_harvest.corpora.errors import LedgerError, ReservationError
from dbt_harvest.corpora.ledger import LEDGER_NAME, Params, SplitLedger, assign, group_of, split_of


def _repos(make, n: int) -> list:
    return [make(f"org{i}/proj{i}") for i in range(n)]


def test_nothing_reserved_means_no_split(world, make):
    pin = make("acme/shop")
    assert split_of(pin.id, world.pins) is None
    with pytest.raises(PinError):
        split_of("nobody__nothing@000000000000", world.pins)


def test_seeded_draw_is_deterministic_and_complete(world, make, tmp_path_factory):
    pins = _repos(make, 8)
    event = assign(world.pins, Params(test=2, dev=2, seed=7), now="2024-05-01T00:00:00+00:00")
    splits = {p.id: split_of(p.id, world.pins) for p in pins}
    assert sorted(splits.values()).count("test") == 2 and sorted(splits.values()).count("dev") == 2
    assert list(splits.values()).count("train") == 4
    assert event.commitment == event.compute_commitment() and len(event.commitment) == 64
    # same pins, same seed, another folder -> the same draw
    other = tmp_path_factory.mktemp("again")
    for p in pins:
        (other / f"{p.id}.toml").write_text((world.pins / f"{p.id}.toml").read_text())
    assign(other, Params(test=2, dev=2, seed=7), now="2024-05-01T00:00:00+00:00")
    assert {p.id: split_of(p.id, other) for p in pins} == splits
    assert (other / LEDGER_NAME).read_bytes() == (world.pins / LEDGER_NAME).read_bytes()
    assign(other, Params(test=2, dev=2, seed=8), force=True)
    events = SplitLedger.load(other).events
    assert [e.action for e in events] == ["reserve", "force"] and events[-1].params.seed == 8
    assert events[-1].prev == events[0].commitment


def test_changing_a_reservation_is_refused_unless_forced_and_history_is_kept(world, make):
    pins = _repos(make, 6)
    assign(world.pins, Params(test=1, dev=1, seed=1))
    before = {p.id: split_of(p.id, world.pins) for p in pins}
    with pytest.raises(ReservationError, match="--force"):
        assign(world.pins, Params(test=2, dev=1, seed=1))
    assert assign(world.pins, Params(test=1, dev=1, seed=1)) is None  # same request: nothing to do
    assert {p.id: split_of(p.id, world.pins) for p in pins} == before
    assign(world.pins, Params(test=2, dev=1, seed=1), force=True)
    ledger = SplitLedger.load(world.pins)
    assert [e.action for e in ledger.events] == ["reserve", "force"]
    assert sum(1 for p in pins if split_of(p.id, world.pins) == "test") == 2


def test_repository_pinned_later_joins_its_group_or_train(world, make):
    pins = _repos(make, 5)
    assign(world.pins, Params(test=1, dev=1, seed=3))
    test_pin = next(p for p in pins if split_of(p.id, world.pins) == "test")
    test_name = test_pin.url.split("github.com/")[-1]
    fork = make("mallory/fork", fork_of=test_name, files={"models/x.sql": "select 9\n"})
    fresh = make("newco/fresh")
    assert split_of(fork.id, world.pins) is None and split_of(fresh.id, world.pins) is None
    event = assign(world.pins, None)
    assert event.action == "extend"
    assert split_of(fork.id, world.pins) == "test"
    assert group_of(fork.id, world.pins) == group_of(test_pin.id, world.pins)
    assert split_of(fresh.id, world.pins) == "train"


def test_unlicensed_repository_pinned_later_is_reserved_for_test_and_passes_the_license_check(world, make):
    from dbt_harvest.corpora.checks import check_pins_folder

    _repos(make, 4)
    assign(world.pins, Params(test=1, dev=1, seed=3))
    unlicensed = make("someone/no-license-file", license="unknown")
    licensed = make("someone/mit-project", license="MIT")
    event = assign(world.pins, None)
    assert event.action == "extend"
    assert split_of(unlicensed.id, world.pins) == "test"  # the only split never published
    assert split_of(licensed.id, world.pins) == "train"
    assert not [p for p in check_pins_folder(world.pins) if p.startswith("license")]


def test_pin_linking_two_reserved_splits_is_refused(world, make):
    a = make("a/left", files={"models/l.sql": "select 'left side' as x\n"})
    b = make("b/right", files={"models/r.sql": "select 'right side' as x\n"})
    make("c/other")
    assign(world.pins, Params(test=0, dev=0, seed=0, test_groups=("a/left",)))
    assert split_of(a.id, world.pins) == "test" and split_of(b.id, world.pins) == "train"
    make("d/bridge", files={"models/l.sql": "select 'left side' as x\n", "models/r.sql": "select 'right side' as x\n"})
    with pytest.raises(ReservationError, match="different splits"):
        assign(world.pins, None)


def test_named_groups_and_impossible_requests(world, make):
    pins = _repos(make, 3)
    with pytest.raises(ReservationError, match="names no group"):
        assign(world.pins, Params(0, 0, 0, test_groups=("nobody/here",)))
    with pytest.raises(ReservationError, match="leave a train group"):
        assign(world.pins, Params(test=2, dev=1, seed=0))
    with pytest.raises(ReservationError, match="first reservation"):
        assign(world.pins, None)
    assign(world.pins, Params(0, 0, 0, test_groups=(pins[0].id,), dev_groups=("org1/proj1",)))
    assert [split_of(p.id, world.pins) for p in pins] == ["test", "dev", "train"]


@pytest.mark.parametrize("how", ["edit", "drop", "reorder", "garbage"])
def test_tampered_ledger_is_detected(world, make, how):
    _repos(make, 4)
    assign(world.pins, Params(1, 1, 0))
    make("late/comer")
    assign(world.pins, None)
    path = world.pins / LEDGER_NAME
    lines = path.read_text().splitlines()
    if how == "edit":
        first = json.loads(lines[0])
        gid = next(g for g, s in first["splits"].items() if s == "test")
        first["splits"][gid] = "train"
        lines[0] = json.dumps(first, sort_keys=True)
    elif how == "drop":
        lines = lines[1:]
    elif how == "reorder":
        lines = lines[::-1]
    else:
        lines[1] = lines[1][:-5]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerError):
        SplitLedger.load(world.pins)


def test_the_one_redraw_keeps_sealed_repositories_in_test_and_is_not_repeated(world, make):
    """Once the test split holds sealed tasks a redraw may not move its repositories out of test; once tasks
    are locked a second redraw is refused; and after an audit unsealed the test split none is allowed."""
    from dbt_harvest.corpora.tasklock import LockedTask, TaskLock, write_lock

    pins = _repos(make, 6)
    assign(world.pins, Params(test=1, dev=1, seed=1))
    tested = next(p for p in pins if split_of(p.id, world.pins) == "test")
    trained = next(p for p in pins if split_of(p.id, world.pins) == "train")
    (world.pins / "_sealed.json").write_text(json.dumps({"count": 2, "root": "0" * 64}) + "\n")
    leaving = Params(test=0, dev=0, seed=1, dev_groups=(tested.id,))
    with pytest.raises(ReservationError, match="holds sealed test tasks and would leave the test split"):
        assign(world.pins, leaving, force=True)
    assert split_of(tested.id, world.pins) == "test"  # nothing was appended
    ledger = SplitLedger.load(world.pins)
    lock = TaskLock(ledger.head, (LockedTask("train", trained.id, "a" * 64, f"{trained.id.split('@')[0]}.x.y"),))
    write_lock(lock, world.pins)
    moved = Params(test=0, dev=0, seed=1, test_groups=(tested.id,), dev_groups=(trained.id,))
    assign(world.pins, moved, force=True)  # the one redraw: a train repository into dev, test kept
    assert (split_of(tested.id, world.pins), split_of(trained.id, world.pins)) == ("test", "dev")
    with pytest.raises(ReservationError, match="already re-drawn"):
        assign(world.pins, Params(test=0, dev=0, seed=2, test_groups=(tested.id,)), force=True)
    assert [e.action for e in SplitLedger.load(world.pins).events] == ["reserve", "force"]


def test_no_redraw_after_the_test_split_was_unsealed(world, make):
    _repos(make, 5)
    assign(world.pins, Params(test=1, dev=1, seed=3))
    (world.pins / "_unseals.jsonl").write_text('{"recipe": "r@1"}\n')
    with pytest.raises(ReservationError, match="unsealed for an audit"):
        assign(world.pins, Params(test=2, dev=1, seed=3), force=True)

"""The task lock: written from the store, verified task for task, consistent with the ledger; tampering is seen."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from dbt_harvest.corpora.checks import check_pins_folder
from dbt_harvest.corpora.tasklock import (
    LOCK_NAME,
    TaskLockError,
    check_against_ledger,
    compare,
    lock_from_home,
    lock_of,
    read_lock,
    record_sha256,
    under_gold,
    updated_lock,
    write_lock,
)


def test_lock_lists_public_ids_and_only_hashes_for_test(world, reserved):
    pins, tasks = reserved
    write_lock(lock_from_home(world.home, world.pins), world.pins)
    text = (world.pins / LOCK_NAME).read_text()
    data = json.loads(text)
    assert data["counts"] == {"train": 2, "dev": 2, "test": 2}
    assert set(data["train"]) == {t.instance_id for t in tasks["train"]}
    for t in tasks["test"]:  # nothing of a sealed task but its pin, a hash and its kind
        assert t.instance_id not in text and t.problem_statement not in text
        assert {"pin": t.pin, "sha256": record_sha256(t), "kind": t.kind} in data["test"]
    lock = read_lock(world.pins)
    assert lock is not None and check_against_ledger(lock, world.pins) == []
    assert check_pins_folder(world.pins) == []


def test_record_hash_covers_every_field(reserved):
    _, tasks = reserved
    t = tasks["train"][0]
    assert record_sha256(replace(t)) == record_sha256(t)
    assert record_sha256(replace(t, problem_statement=t.problem_statement + " ")) != record_sha256(t)
    assert record_sha256(replace(t, wrong_repair_patches=())) != record_sha256(t)


def test_compare_reports_missing_extra_and_changed(world, reserved):
    _, tasks = reserved
    records = [t for split in tasks.values() for t in split]
    locked = lock_of(records, "head")
    assert compare(locked, lock_of(records, "head")).same
    changed = replace(tasks["train"][0], problem_statement="something else entirely")
    rebuilt = lock_of(
        [changed, *records[1:]]
        if records[0] is tasks["train"][0]
        else [r for r in records if r is not tasks["train"][0]] + [changed],
        "head",
    )
    diff = compare(locked, rebuilt)
    assert diff.changed == (f"train:{changed.instance_id}",) and not diff.missing and not diff.extra
    fewer = lock_of([r for r in records if r is not tasks["dev"][1]], "head")
    assert compare(locked, fewer).missing == (f"dev:{tasks['dev'][1].instance_id}",)
    assert compare(fewer, locked).extra == (f"dev:{tasks['dev'][1].instance_id}",)
    sealed_changed = replace(tasks["test"][0], problem_statement="changed sealed task")
    diff = compare(locked, lock_of([r for r in records if r is not tasks["test"][0]] + [sealed_changed], "head"))
    assert len(diff.missing) == 1 and len(diff.extra) == 1 and not diff.same


def test_partial_pins_allow_more_tasks_but_not_fewer_or_changed(world, reserved):
    pins, tasks = reserved
    records = [t for split in tasks.values() for t in split]
    dev_pin = pins["d/devrepo"].id
    partial_lock = lock_of([r for r in records if r is not tasks["dev"][1]], "head", partial=[dev_pin])
    assert compare(partial_lock, lock_of(records, "head")).same  # a complete rebuild found one more task
    assert not compare(partial_lock, lock_of([r for r in records if r is not tasks["dev"][0]], "head")).same
    # a rebuild that is itself stopped early: its pin's unreached tasks are not missing
    assert compare(lock_of(records, "head"), lock_of(records[:1], "head", partial=[p.id for p in pins.values()])).same


def test_tampered_lock_is_refused_or_disagrees_with_the_ledger(world, reserved):
    pins, tasks = reserved
    write_lock(lock_from_home(world.home, world.pins), world.pins)
    path = world.pins / LOCK_NAME
    good = path.read_text()
    path.write_text(good.replace('"train": 2', '"train": 3'))
    with pytest.raises(TaskLockError, match="counts say 3 train"):
        read_lock(world.pins)
    path.write_text(good.replace("\n", " \n", 1))
    with pytest.raises(TaskLockError, match="canonical"):
        read_lock(world.pins)
    path.write_text("{not json")
    with pytest.raises(TaskLockError, match="malformed task lock"):
        read_lock(world.pins)
    # a train task relabelled dev, written canonically: the ledger check catches it
    lock = lock_from_home(world.home, world.pins)
    moved = replace(lock, tasks=tuple(replace(t, split="dev") if t.split == "train" else t for t in lock.tasks))
    write_lock(moved, world.pins)
    problems = check_pins_folder(world.pins)
    assert any("locked as dev, the ledger reserves" in p for p in problems), problems
    write_lock(replace(lock, ledger_head="0" * 64), world.pins)
    assert any("not in" in p and "history" in p for p in check_against_ledger(read_lock(world.pins), world.pins))


def test_growing_the_corpus_in_a_fresh_home_keeps_every_other_pins_locked_tasks(world, reserved, make, tmp_path):
    """A repository pinned later (the ledger extends it to train) and minted in a home that never built the
    old pins: its entries join the lock, the old pins' entries (test hashes included) stay exactly, and the
    fresh home's sealed store (empty, under the committed seal) is never read."""
    from corpora_world import make_task

    from dbt_harvest.corpora.ledger import assign, group_of
    from dbt_harvest.corpora.store import store_task

    write_lock(lock_from_home(world.home, world.pins), world.pins)
    before = read_lock(world.pins)
    newer = make("n/newrepo")
    assert assign(world.pins, None).action == "extend"
    fresh = tmp_path / "fresh-home"
    fresh.mkdir()
    added = [make_task(newer, "train", group_of(newer.id, world.pins), n) for n in (1, 2, 3)]
    for t in added:
        store_task(t, fresh, world.pins)
    with pytest.raises(Exception, match="sealed store .* is empty"):
        lock_from_home(fresh, world.pins)  # the whole corpus cannot be locked from this home
    lock = updated_lock(before, fresh, world.pins, [newer.id])
    assert lock.count("train") == before.count("train") + 3
    assert set(before.tasks) <= set(lock.tasks)  # every old entry, sealed hashes included, unchanged
    assert {t.instance_id for t in lock.tasks if t.pin == newer.id} == {t.instance_id for t in added}
    write_lock(lock, world.pins)
    assert check_pins_folder(world.pins) == []  # the extended ledger's head, the new pin's split
    # naming an old pin whose tasks this home lacks drops them: the caller chooses which pins it rebuilt
    dropped = updated_lock(
        before,
        fresh,
        world.pins,
        [
            pins_id
            for pins_id in {t.pin for t in before.tasks}
            if group_of(pins_id, world.pins) and "trainrepo" in pins_id
        ],
    )
    assert dropped.count("train") == 0 and dropped.count("dev") == before.count("dev")


def test_a_renamed_gold_is_reproduced_only_when_nothing_else_changed(world, reserved):
    """Records minted again under a pin's renamed gold equal the locked ones once the locked gold name is
    put back (``renamed``, still the same); any other change, or a lock naming another gold, is a difference;
    the lock keeps the gold names through a write and a read."""
    _, tasks = reserved
    # as a mint writes them: the grading spec names the gold file
    tasks = {
        split: [replace(t, grading=replace(t.grading, gold=f"{t.gold_sha256}.duckdb")) for t in split_tasks]
        for split, split_tasks in tasks.items()
    }
    records = [t for split in tasks.values() for t in split]
    locked = lock_of(records, "head")
    assert dict(locked.golds) == {r.pin: r.gold_sha256 for r in records}
    write_lock(locked, world.pins)
    assert read_lock(world.pins) == locked
    moved = {r.pin for r in tasks["train"]} | {r.pin for r in tasks["test"]}
    new_name = "f" * 64
    renamed = [under_gold(r, new_name) if r.pin in moved else r for r in records]
    assert all(r.grading.gold == f"{new_name}.duckdb" for r in renamed if r.pin in moved)
    plain = lock_of(renamed, "head")
    assert not compare(locked, plain).same  # without the locked names every moved task looks changed
    diff = compare(locked, lock_of(renamed, "head", locked_golds=dict(locked.golds)))
    moved_tasks = [r for r in records if r.pin in moved]
    assert diff.same and len(diff.renamed) == len(moved_tasks) > 0
    assert {p for p, _, b in diff.golds} == moved and {b for _, _, b in diff.golds} == {new_name}
    assert "under a renamed gold" in diff.summary()
    train = tasks["train"][0]
    edited = [
        replace(r, problem_statement="another statement") if r is renamed[records.index(train)] else r for r in renamed
    ]
    diff = compare(locked, lock_of(edited, "head", locked_golds=dict(locked.golds)))
    assert diff.changed == (f"train:{train.instance_id}",) and not diff.same
    other = replace(locked, golds=tuple((p, "0" * 64) for p, _ in locked.golds))
    assert not compare(other, lock_of(renamed, "head", locked_golds=dict(other.golds))).same
    assert not [p for p in check_against_ledger(locked, world.pins) if "minted against" in p]
    problems = [p for p in check_against_ledger(other, world.pins) if "minted against" in p]
    assert len(problems) == len(locked.golds) and all("minted against 000000000000" in p for p in problems)


def test_per_model_caps_are_recorded_carried_and_checked(world, reserved, make, tmp_path):
    """A pin minted deeper than the default cap keeps its cap in the lock: written only when some pin has
    one (an older lock keeps its bytes), kept for pins a partial update does not name, replaced or dropped
    for those it names, and a cap that is not a positive integer makes the lock malformed."""
    from corpora_world import make_task

    from dbt_harvest.corpora.ledger import assign, group_of
    from dbt_harvest.corpora.store import store_task

    write_lock(lock_from_home(world.home, world.pins), world.pins)
    plain = (world.pins / LOCK_NAME).read_text()
    assert "caps" not in json.loads(plain)
    before = read_lock(world.pins)
    assert before is not None and before.cap_of(before.tasks[0].pin) is None
    deep = make("n/deeprepo")
    assert assign(world.pins, None).action == "extend"
    fresh = tmp_path / "fresh-home"
    fresh.mkdir()
    store_task(make_task(deep, "train", group_of(deep.id, world.pins), 1), fresh, world.pins)
    lock = updated_lock(before, fresh, world.pins, [deep.id], caps={deep.id: 8, "not/chosen@0": 5})
    assert lock.caps == ((deep.id, 8),)  # only the pins the update names get a cap
    write_lock(lock, world.pins)
    again = read_lock(world.pins)
    assert again is not None and again.cap_of(deep.id) == 8 and again == lock
    other = before.tasks[0].pin
    kept = updated_lock(again, world.home, world.pins, [other])  # another pin rewritten: the cap stays
    assert kept.cap_of(deep.id) == 8
    dropped = updated_lock(again, fresh, world.pins, [deep.id])  # minted again at the default: no cap
    assert dropped.cap_of(deep.id) is None and "caps" not in json.loads(dropped.to_json())
    data = json.loads((world.pins / LOCK_NAME).read_text())
    for bad in (0, "8", True):
        data["caps"] = {deep.id: bad}
        (world.pins / LOCK_NAME).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        with pytest.raises(TaskLockError, match="malformed task lock"):
            read_lock(world.pins)


def test_sealed_kinds_are_counted_read_back_and_checked(world, reserved):
    """The lock records each sealed task's kind (the split's count per kind, no id); an entry locked before
    kinds were recorded reads back as kind-less, and a kind that is neither repair nor completion is refused."""
    write_lock(lock_from_home(world.home, world.pins), world.pins)
    lock = read_lock(world.pins)
    assert lock is not None
    assert sorted(t.kind for t in lock.tasks if t.split == "test") == sorted(t.kind for t in reserved[1]["test"])
    assert all(t.kind == "" for t in lock.tasks if t.split != "test")
    data = json.loads((world.pins / LOCK_NAME).read_text())
    for entry in data["test"]:
        entry.pop("kind")
    (world.pins / LOCK_NAME).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    older = read_lock(world.pins)
    assert older is not None and {t.kind for t in older.tasks if t.split == "test"} == {""}
    assert compare(lock, older).same  # the kind is not part of a task's identity
    data["test"][0]["kind"] = "rewrite"
    (world.pins / LOCK_NAME).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    with pytest.raises(TaskLockError, match="malformed task lock"):
        read_lock(world.pins)

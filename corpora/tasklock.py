"""The task lock: ``pins/_tasks.lock``, a small committed record of what minting the pins produced.

A rebuild of the corpus (`harvest mint --all --verify-lock` over the committed pins, online or offline
through mirrors) is checked task for task against it. Per split it lists each kept task's instance id
with its pin and the sha256 of its canonical record (its JSON with sorted keys, as the record reads
today: the retired ``timings`` of older files is dropped when they are read). The test split is listed only as hashes: each
entry is its pin, the sha256 of the canonical record (which covers the instance id) and the task's kind, so
the lock reveals how many sealed tasks of each kind each test pin has and nothing of their content.

It also names, per pin, the gold its locked tasks were minted against (``golds``): a rebuild whose pin
got a new gold name with the same tables (a pin named by its file bytes moved to its content digest by
`harvest add --rebuild --rename-gold`) mints tasks that differ from the locked ones only in that name, and
the comparison says so (``renamed``) instead of calling every task of the pin changed. Such a task counts as
reproduced when its record, with the locked gold name put back, hashes to the locked sha256; the lock is
then re-keyed with `harvest corpus lock --pin PIN` (or `harvest mint PIN --write-lock`). Likewise a task whose
statement's closing was restated (``core.closing``: a task no dbt test covers no longer closes with "you may
run its dbt tests") counts as reproduced (``restated``) when its record with the earlier closing put back
hashes as locked; that is how a sealed task, which this machine cannot re-key, still checks.

The lock also names the ledger head it was made under; :func:`check_against_ledger` (run by the offline
CI checks) verifies that every locked task's pin is pinned and reserved for the split it is locked under.
Writing is explicit (`harvest mint --write-lock`); nothing rewrites the lock as a side effect.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.core.closing import as_first_written
from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.pin import list_pins
from dbt_harvest.core.task_record import KINDS, TaskRecord, read_task
from dbt_harvest.corpora.errors import CorporaError
from dbt_harvest.corpora.ledger import SplitLedger, split_of

LOCK_NAME = "_tasks.lock"
LOCK_FORMAT = 1
PUBLIC_SPLITS = ("train", "dev")


class TaskLockError(CorporaError):
    """The task lock is malformed, disagrees with the ledger, or a rebuild does not reproduce it."""


@dataclass(frozen=True)
class LockedTask:
    """One locked task: ``instance_id`` is empty for the sealed test split (hash only)."""

    split: str
    pin: str
    sha256: str
    instance_id: str = ""
    # a rebuilt task whose pin's gold is not the one the lock names, or whose statement was restated
    # (``core.closing``): the sha256 of its record as the lock may hold it, each with what was put back
    # (the earlier closing, the locked gold name): the gold name, the closing, or both (empty otherwise)
    as_locked: tuple[tuple[str, bool, bool], ...] = ()
    # a sealed task's kind (repair or completion), so the lock counts the test split per kind without its
    # ids; empty for a public task (its id says its kind) and for sealed entries locked before kinds were
    kind: str = ""


@dataclass(frozen=True)
class TaskLock:
    ledger_head: str
    tasks: tuple[LockedTask, ...]
    partial: tuple[str, ...] = ()  # pins whose mint was stopped (time budget) with model shards left to do
    golds: tuple[tuple[str, str], ...] = ()  # (pin, gold name) its locked tasks carry, sorted by pin
    # (pin, per-model cap) for pins minted under another cap than the mint's default: a rebuild mints each
    # such pin under its own cap, so its locked tasks come back with none missing and none extra
    caps: tuple[tuple[str, int], ...] = ()

    def gold_of(self, pin: str) -> str:
        return dict(self.golds).get(pin, "")

    def cap_of(self, pin: str) -> int | None:
        """The per-model cap ``pin`` was locked under, or None when it used the mint's default."""
        return dict(self.caps).get(pin)

    def count(self, split: str) -> int:
        return sum(1 for t in self.tasks if t.split == split)

    def per_pin(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tasks:
            out[t.pin] = out.get(t.pin, 0) + 1
        return dict(sorted(out.items()))

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "format": LOCK_FORMAT,
            "ledger_head": self.ledger_head,
            "counts": {s: self.count(s) for s in (*PUBLIC_SPLITS, "test")},
            "partial": sorted(self.partial),
        }
        if self.golds:  # absent from locks written before golds were recorded
            data["golds"] = dict(sorted(self.golds))
        if self.caps:  # absent while every pin is minted under the default cap
            data["caps"] = dict(sorted(self.caps))
        for split in PUBLIC_SPLITS:
            data[split] = {
                t.instance_id: {"pin": t.pin, "sha256": t.sha256}
                for t in sorted(self.tasks, key=lambda t: t.instance_id)
                if t.split == split
            }
        data["test"] = [
            {"pin": t.pin, "sha256": t.sha256, **({"kind": t.kind} if t.kind else {})}
            for t in sorted(self.tasks, key=lambda t: (t.pin, t.sha256))
            if t.split == "test"
        ]
        return json.dumps(data, indent=1, sort_keys=True) + "\n"


def record_sha256(record: TaskRecord) -> str:
    """sha256 of the canonical record: its JSON with sorted keys (a record read from an older file has
    already dropped the retired ``timings``)."""
    data = record.to_dict()
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def under_gold(record: TaskRecord, name: str) -> TaskRecord:
    """The record as it reads with its gold called ``name``: the gold name it carries (``gold_sha256``)
    and the gold file its grading spec names (``<name>.duckdb``), nothing else."""
    gold_file = record.grading.gold.replace(record.gold_sha256, name) if record.gold_sha256 else record.grading.gold
    return replace(record, gold_sha256=name, grading=replace(record.grading, gold=gold_file))


def lock_of(
    records: Iterable[TaskRecord],
    ledger_head: str,
    partial: Iterable[str] = (),
    locked_golds: Mapping[str, str] | None = None,
) -> TaskLock:
    """The lock of ``records`` (any splits; test ones are reduced to pin + hash). ``locked_golds``: the
    gold names a lock being compared with records per pin; a record whose gold differs, or whose statement's
    closing was restated, also gets the hashes it would have under the locked name, with the earlier closing,
    and with both (``LockedTask.as_locked``): a lock re-keyed after one change still recognises the other."""
    tasks = []
    golds: dict[str, str] = {}
    for r in records:
        golds.setdefault(r.pin, r.gold_sha256)
        then = (locked_golds or {}).get(r.pin, "")
        first = as_first_written(r)
        renamed = then != "" and then != r.gold_sha256
        ways = [(under_gold(r, then), False, True)] if renamed else []
        if first != r:
            ways.append((first, True, False))
            if renamed:
                ways.append((under_gold(first, then), True, True))
        as_locked = tuple((record_sha256(made), restated, gold) for made, restated, gold in ways)
        if r.split == "test":
            tasks.append(LockedTask("test", r.pin, record_sha256(r), as_locked=as_locked, kind=r.kind))
        else:
            tasks.append(LockedTask(r.split, r.pin, record_sha256(r), r.instance_id, as_locked))
    return TaskLock(
        ledger_head,
        tuple(sorted(tasks, key=lambda t: (t.split, t.pin, t.instance_id, t.sha256))),
        tuple(sorted(set(partial))),
        tuple(sorted(golds.items())),
    )


def lock_from_home(
    home: Path,
    pins: Path,
    pin_ids: Sequence[str] | None = None,
    partial: Iterable[str] = (),
    locked_golds: Mapping[str, str] | None = None,
) -> TaskLock:
    """The lock of the tasks minted under ``home`` (train/dev from the store, test from the verified
    sealed store, as hashes only), restricted to ``pin_ids`` when given (``locked_golds``: see
    :func:`lock_of`)."""
    from dbt_harvest.corpora import sealed
    from dbt_harvest.corpora.store import split_dir

    wanted = set(pin_ids) if pin_ids is not None else None
    records: list[TaskRecord] = []
    for split in PUBLIC_SPLITS:
        folder = split_dir(home, split)
        if folder.is_dir():
            records.extend(read_task(p) for p in sorted(folder.glob("*.json")))
    if wanted is None or any(_reserved_split(pin_id, pins) == "test" for pin_id in wanted):
        sealed.verify(home, pins)  # the seal must hold before its hashes are locked
        folder = sealed.sealed_dir(home)
        if folder.is_dir():
            records.extend(read_task(p) for p in sorted(folder.glob("*.json")))
    if wanted is not None:
        records = [r for r in records if r.pin in wanted]
    return lock_of(records, SplitLedger.load(pins).head, partial, locked_golds)


def _reserved_split(pin_id: str, pins: Path) -> str | None:
    try:
        return split_of(pin_id, pins)
    except (HarvestError, OSError, ValueError):  # a pin or ledger that does not read is the caller's error
        return "test"  # to report; until then assume it may be sealed, so the seal is checked


def updated_lock(
    previous: TaskLock | None,
    home: Path,
    pins: Path,
    pin_ids: Sequence[str],
    partial: Iterable[str] = (),
    caps: Mapping[str, int] | None = None,
) -> TaskLock:
    """The lock with the entries of ``pin_ids`` replaced by what ``home`` minted for them, and their caps by
    ``caps`` (a pin of ``pin_ids`` not in it was minted under the default cap, and is recorded without one).

    Every other pin's entries (its ``partial`` mark and cap too) are carried over from ``previous`` unchanged, for
    pins that are still pinned: a corpus grows by pinning and minting new repositories in a home that
    never built the old ones, and their locked tasks stay exactly as a full rebuild must reproduce them.
    With every pin named this is :func:`lock_from_home` over the whole home."""
    chosen = set(pin_ids)
    pinned = {p.id for p in list_pins(pins)}
    fresh = lock_from_home(home, pins, sorted(chosen), partial)
    kept = [t for t in (previous.tasks if previous else ()) if t.pin not in chosen and t.pin in pinned]
    kept_partial = [p for p in (previous.partial if previous else ()) if p not in chosen and p in pinned]
    kept_golds = [(p, g) for p, g in (previous.golds if previous else ()) if p not in chosen and p in pinned]
    kept_caps = [(p, c) for p, c in (previous.caps if previous else ()) if p not in chosen and p in pinned]
    fresh_caps = [(p, int(c)) for p, c in (caps or {}).items() if p in chosen]
    tasks = tuple(sorted([*kept, *fresh.tasks], key=lambda t: (t.split, t.pin, t.instance_id, t.sha256)))
    return TaskLock(
        fresh.ledger_head,
        tasks,
        tuple(sorted({*fresh.partial, *kept_partial})),
        tuple(sorted([*kept_golds, *fresh.golds])),
        tuple(sorted([*kept_caps, *fresh_caps])),
    )


def read_lock(pins: Path) -> TaskLock | None:
    """The committed lock, or None when there is none; a malformed one raises TaskLockError."""
    path = pins / LOCK_NAME
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != LOCK_FORMAT:
            raise TaskLockError(f"{path}: lock format {data.get('format')!r}, this harvester reads {LOCK_FORMAT}")
        tasks = []
        for split in PUBLIC_SPLITS:
            for iid, entry in data[split].items():
                tasks.append(LockedTask(split, str(entry["pin"]), str(entry["sha256"]), str(iid)))
        for entry in data["test"]:
            tasks.append(LockedTask("test", str(entry["pin"]), str(entry["sha256"]), kind=_kind(entry.get("kind", ""))))
        lock = TaskLock(
            str(data["ledger_head"]),
            tuple(sorted(tasks, key=lambda t: (t.split, t.pin, t.instance_id, t.sha256))),
            tuple(str(p) for p in data.get("partial", [])),
            tuple(sorted((str(p), str(g)) for p, g in data.get("golds", {}).items())),
            tuple(sorted((str(p), _cap(c)) for p, c in data.get("caps", {}).items())),
        )
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise TaskLockError(f"{path}: malformed task lock ({type(exc).__name__}: {exc}); restore it from git") from None
    counts = data.get("counts", {})
    for split in (*PUBLIC_SPLITS, "test"):
        if counts.get(split) != lock.count(split):
            raise TaskLockError(
                f"{path}: counts say {counts.get(split)} {split} task(s), the lock lists {lock.count(split)}"
            )
    if lock.to_json() != path.read_text(encoding="utf-8"):
        raise TaskLockError(
            f"{path}: not in canonical form (edited by hand?); rewrite it with `harvest mint --write-lock`"
        )
    return lock


def _kind(value: object) -> str:
    """A sealed entry's recorded kind: repair, completion, or empty (ValueError otherwise: a malformed lock)."""
    if value != "" and value not in KINDS:
        raise ValueError(f"task kind {value!r} is not one of {', '.join(KINDS)}")
    return str(value)


def _cap(value: object) -> int:
    """A recorded per-model cap: a positive integer (ValueError otherwise, reported as a malformed lock)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"per-model cap {value!r} is not a positive integer")
    return value


def write_lock(lock: TaskLock, pins: Path) -> Path:
    path = pins / LOCK_NAME
    atomic.write_text(path, lock.to_json())
    return path


@dataclass(frozen=True)
class LockDiff:
    """What a rebuild produced that the lock does not say (per split: ids or, for test, hashes)."""

    missing: tuple[str, ...]  # locked, not rebuilt
    extra: tuple[str, ...]  # rebuilt, not locked
    changed: tuple[str, ...]  # same id, other record hash
    # reproduced but for the gold name: the record with the locked gold name put back hashes as locked
    renamed: tuple[str, ...] = ()
    golds: tuple[tuple[str, str, str], ...] = ()  # (pin, locked gold, rebuilt gold) of the renamed tasks' pins
    # reproduced but for the statement's closing (``core.closing``): with the earlier closing it hashes as locked
    restated: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return not (self.missing or self.extra or self.changed)

    def summary(self) -> str:
        if self.same:
            if not (self.renamed or self.restated):
                return "the rebuild reproduces the lock task for task"
            known = []
            if self.renamed:
                moves = ", ".join(f"{p} {a[:12]} -> {b[:12]}" for p, a, b in self.golds[:3]) + (
                    ", ..." if len(self.golds) > 3 else ""
                )
                known.append(f"{len(self.renamed)} of them under a renamed gold ({moves})")
            if self.restated:
                known.append(f"{len(self.restated)} with a restated closing (no dbt test covers them)")
            return (
                f"the rebuild reproduces the lock task for task, {' and '.join(known)}: each equals its locked "
                f"record once the locked gold name and the earlier closing are put back; re-key them with "
                f"`harvest corpus lock --pin PIN`"
            )
        return (
            f"the rebuild differs from the lock: {len(self.missing)} locked task(s) missing, {len(self.extra)} "
            f"not in the lock, {len(self.changed)} changed"
        )


def _key(t: LockedTask) -> str:
    return f"{t.split}:{t.instance_id}" if t.instance_id else f"test:{t.pin}:{t.sha256[:16]}"


def compare(locked: TaskLock, rebuilt: TaskLock, pin_ids: Sequence[str] | None = None) -> LockDiff:
    """Compare a rebuild with the lock (restricted to ``pin_ids`` when only some pins were minted).

    A pin the lock marks partial (its locked mint was stopped by a time budget) may yield more tasks in a
    complete rebuild: its extra tasks are not differences, but every task the lock lists must come back
    identical. A rebuild that is itself partial must name those pins in ``rebuilt.partial``: their locked
    tasks that were not reached are then not reported missing."""
    wanted = set(pin_ids) if pin_ids is not None else None
    a = {_key(t): t for t in locked.tasks if wanted is None or t.pin in wanted}
    b: dict[str, LockedTask] = {}
    renamed: list[str] = []
    restated: list[str] = []
    for t in rebuilt.tasks:
        if wanted is not None and t.pin not in wanted:
            continue
        matched = False
        for sha256, was_restated, was_renamed in t.as_locked:  # the locked task when it hashes so as the lock made it
            under_old = replace(t, sha256=sha256, as_locked=())
            old = a.get(_key(under_old))
            if old is not None and (old.sha256, old.pin) == (under_old.sha256, under_old.pin):
                if was_restated:
                    restated.append(_key(under_old))
                if was_renamed:
                    renamed.append(_key(under_old))
                b[_key(under_old)] = under_old
                matched = True
                break
        if not matched:
            b[_key(t)] = t
    missing = tuple(sorted(k for k in a if k not in b and a[k].pin not in rebuilt.partial))
    extra = tuple(sorted(k for k in b if k not in a and b[k].pin not in locked.partial))
    changed = tuple(sorted(k for k in a.keys() & b.keys() if (a[k].sha256, a[k].pin) != (b[k].sha256, b[k].pin)))
    moved = sorted({(b[k].pin, locked.gold_of(b[k].pin), rebuilt.gold_of(b[k].pin)) for k in renamed})
    return LockDiff(missing, extra, changed, tuple(sorted(renamed)), tuple(moved), tuple(sorted(restated)))


def check_against_ledger(lock: TaskLock, pins: Path) -> list[str]:
    """Problems (empty when none): a locked task whose pin is not pinned, not reserved, or reserved for
    another split than the one it is locked under; an id that does not name its pin's repository and commit."""
    ledger = SplitLedger.load(pins)
    by_id = {p.id: p for p in list_pins(pins)}
    problems: list[str] = []
    if lock.ledger_head not in {e.commitment for e in ledger.events}:
        problems.append(
            f"the lock was made under ledger state {lock.ledger_head[:12]!r}, which is not in {ledger.path}'s history"
        )
    for t in lock.tasks:
        pin = by_id.get(t.pin)
        name = t.instance_id or f"a sealed task of {t.pin}"
        if pin is None:
            problems.append(f"{name}: pin {t.pin} is not under {pins}")
            continue
        found = ledger.assignment(pin)
        if found is None:
            problems.append(f"{name}: pin {t.pin} has no reserved split")
        elif found.split != t.split:
            problems.append(f"{name}: locked as {t.split}, the ledger reserves {t.pin} for {found.split}")
        if t.instance_id and not t.instance_id.startswith(f"{t.pin.split('@', 1)[0]}.{pin.commit[:8]}."):
            problems.append(f"{t.instance_id}: the id does not name pin {t.pin}'s repository and commit")
        if len(t.sha256) != 64 or any(c not in "0123456789abcdef" for c in t.sha256):
            problems.append(f"{name}: {t.sha256!r} is not a sha256")
    for pin_id, gold in lock.golds:
        pin = by_id.get(pin_id)
        if pin is not None and pin.gold_sha256 != gold:
            problems.append(
                f"pin {pin_id} names gold {pin.gold_sha256[:12]}, its locked tasks were minted against "
                f"{gold[:12]}: mint it again and re-key it (`harvest mint {pin_id} --only-locked --verify-lock`, "
                f"then `harvest corpus lock --pin {pin_id}`)"
            )
    return problems

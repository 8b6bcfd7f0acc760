"""The split reservation ledger: which repositories are train, dev or test, fixed before any task exists.

The ledger is an append-only JSON-lines file in the committed ``pins/`` folder (``pins/_splits.jsonl``;
not ``.toml``, so it is never read as a pin). Each line is one event: the first reservation, an extension
(repositories pinned later: they join their group's split, or train; unlicensed ones test), or a forced redraw. Every event
carries a hash commitment (sha256 over its canonical JSON: the groups, their splits, the parameters,
the time and the previous event's commitment), so the history is a hash chain: editing, dropping or
reordering a line is detected on every read. Changing a reserved assignment without ``force`` is
refused; with ``force`` a new event is appended and the old ones stay.

``harvest mint`` asks :func:`split_of` and refuses a pin whose split is None.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.core.licenses import REDISTRIBUTABLE
from dbt_harvest.core.pin import Pin, list_pins, pin_path, read_pin
from dbt_harvest.corpora.errors import LedgerError, ReservationError
from dbt_harvest.corpora.groups import Group, explain_groups
from dbt_harvest.corpora.locks import locked
from dbt_harvest.corpora.repos import repo_key

LEDGER_NAME = "_splits.jsonl"
EVAL_SPLITS = ("dev", "test")
ACTIONS = ("reserve", "extend", "force")


@dataclass(frozen=True)
class Params:
    """What a reservation was asked for; re-running `split assign` with other values needs --force."""

    test: int
    dev: int
    seed: int
    test_groups: tuple[str, ...] = ()
    dev_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class LedgerEvent:
    seq: int
    time: str
    action: str
    params: Params | None
    groups: dict[str, tuple[str, ...]]  # group id -> repository identities assigned by this event
    splits: dict[str, str]  # group id -> split
    prev: str  # commitment of the previous event ("" for the first)
    commitment: str = ""

    def body(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time,
            "action": self.action,
            "params": asdict(self.params) if self.params else None,
            "groups": {g: list(r) for g, r in sorted(self.groups.items())},
            "splits": dict(sorted(self.splits.items())),
            "prev": self.prev,
        }

    def compute_commitment(self) -> str:
        canonical = json.dumps(self.body(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def to_line(self) -> str:
        return json.dumps({**self.body(), "commitment": self.commitment}, sort_keys=True) + "\n"


@dataclass(frozen=True)
class Assignment:
    split: str
    group: str
    seq: int  # the event that made it


def _event_from_dict(data: Any, where: str) -> LedgerEvent:
    if not isinstance(data, dict):
        raise LedgerError(f"{where}: not a JSON object")
    try:
        params = (
            Params(
                **{
                    **data["params"],
                    "test_groups": tuple(data["params"]["test_groups"]),
                    "dev_groups": tuple(data["params"]["dev_groups"]),
                }
            )
            if data["params"]
            else None
        )
        event = LedgerEvent(
            seq=int(data["seq"]),
            time=str(data["time"]),
            action=str(data["action"]),
            params=params,
            groups={str(g): tuple(str(r) for r in repos) for g, repos in data["groups"].items()},
            splits={str(g): str(s) for g, s in data["splits"].items()},
            prev=str(data["prev"]),
            commitment=str(data["commitment"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LedgerError(f"{where}: malformed ledger event ({exc})") from None
    if event.action not in ACTIONS:
        raise LedgerError(f"{where}: unknown action {event.action!r}")
    if set(event.groups) != set(event.splits) or any(s not in ("train", *EVAL_SPLITS) for s in event.splits.values()):
        raise LedgerError(f"{where}: groups and splits disagree or name an unknown split")
    return event


@dataclass(frozen=True)
class SplitLedger:
    """The verified ledger: its events and the assignment they fold to."""

    path: Path
    events: tuple[LedgerEvent, ...] = ()
    state: dict[str, Assignment] = field(default_factory=dict)  # repository identity -> assignment

    @classmethod
    def load(cls, pins: Path) -> SplitLedger:
        """Read and verify the hash chain; a missing ledger is an empty one (nothing reserved yet)."""
        path = pins / LEDGER_NAME
        if not path.exists():
            return cls(path=path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise LedgerError(f"{path}: not UTF-8 text") from None
        events: list[LedgerEvent] = []
        prev = ""
        for number, line in enumerate(lines, start=1):
            where = f"{path}:{number}"
            try:
                event = _event_from_dict(json.loads(line), where)
            except json.JSONDecodeError as exc:
                raise LedgerError(f"{where}: not valid JSON ({exc})") from None
            if event.seq != number - 1 or event.prev != prev:
                raise LedgerError(f"{where}: hash chain broken (a ledger line was removed, reordered or edited)")
            if event.compute_commitment() != event.commitment:
                raise LedgerError(f"{where}: commitment does not match the event (the ledger was edited)")
            if number == 1 and event.action != "reserve":
                raise LedgerError(f"{where}: the first event must be a reservation")
            events.append(event)
            prev = event.commitment
        return cls(path=path, events=tuple(events), state=_fold(events))

    @property
    def reservation(self) -> LedgerEvent | None:
        """The reservation in force: the last reserve or force event."""
        for event in reversed(self.events):
            if event.action in ("reserve", "force"):
                return event
        return None

    @property
    def head(self) -> str:
        return self.events[-1].commitment if self.events else ""

    def assignment(self, pin: Pin) -> Assignment | None:
        return self.state.get(repo_key(pin))


def _fold(events: Sequence[LedgerEvent]) -> dict[str, Assignment]:
    state: dict[str, Assignment] = {}
    for event in events:
        if event.action in ("reserve", "force"):
            state = {}
        for gid, repos in event.groups.items():
            for repo in repos:
                state[repo] = Assignment(split=event.splits[gid], group=gid, seq=event.seq)
    return state


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _resolve(names: Sequence[str], groups: Sequence[Group], kind: str) -> list[str]:
    out = []
    for name in names:
        low = name.lower()
        match = [
            g.id for g in groups if low in {g.id.lower(), *(r.lower() for r in g.repos), *(p.lower() for p in g.pins)}
        ]
        if not match:
            raise ReservationError(
                f"--{kind}-group {name!r} names no group, repository or pin (see `harvest split show`)"
            )
        out.append(match[0])
    return out


def draw(groups: Sequence[Group], params: Params) -> dict[str, str]:
    """Seeded draw: named groups first, then ``test`` and ``dev`` more at random; the rest train."""
    ids = sorted(g.id for g in groups)
    test = _resolve(params.test_groups, groups, "test")
    dev = _resolve(params.dev_groups, groups, "dev")
    clash = sorted(set(test) & set(dev))
    if clash:
        raise ReservationError(f"group {clash[0]} is named for both test and dev")
    rest = [g for g in ids if g not in test and g not in dev]
    need = params.test + params.dev
    if need + 1 > len(rest):
        raise ReservationError(
            f"{len(ids)} split group(s) cannot hold {len(test) + params.test} test + {len(dev) + params.dev} dev "
            "and still leave a train group; pin more repositories or ask for fewer"
        )
    rng = random.Random(params.seed)
    picked = rng.sample(rest, need)
    test += sorted(picked[: params.test])
    dev += sorted(picked[params.test :])
    return {g: "test" if g in test else "dev" if g in dev else "train" for g in ids}


def plan(
    pins: Sequence[Pin],
    ledger: SplitLedger,
    params: Params | None,
    *,
    force: bool = False,
    now: str | None = None,
) -> LedgerEvent | None:
    """The event `split assign` would append, or None when every pinned repository already has a split."""
    groups = explain_groups(pins)
    if not groups:
        raise ReservationError("no pins: pin repositories with `harvest add` before reserving splits")
    time = now or _now()
    reservation = ledger.reservation
    if reservation is None or force:
        if params is None:
            raise ReservationError("the first reservation needs --test N and --dev N (and --seed)")
        splits = draw(groups, params)
        return LedgerEvent(
            seq=len(ledger.events),
            time=time,
            action="force" if reservation else "reserve",
            params=params,
            groups={g.id: g.repos for g in groups},
            splits=splits,
            prev=ledger.head,
        )
    if params is not None and params != reservation.params:
        raise ReservationError(
            f"splits were reserved at {reservation.time} with {_describe(reservation.params)}; "
            f"{_describe(params)} would change reserved assignments: pass --force to redraw (the ledger keeps history)"
        )
    new_groups: dict[str, tuple[str, ...]] = {}
    new_splits: dict[str, str] = {}
    for group in groups:
        held = {r: ledger.state[r] for r in group.repos if r in ledger.state}
        sides = sorted({a.split for a in held.values()})
        if len(sides) > 1:
            detail = ", ".join(f"{r}={a.split}" for r, a in sorted(held.items()))
            raise ReservationError(
                f"group {group.id} now joins repositories reserved to different splits ({detail}); "
                "remove the pin that links them or redraw with --force"
            )
        fresh = tuple(r for r in group.repos if r not in held)
        if not fresh:
            continue
        if held:
            first = sorted(held.values(), key=lambda a: (a.seq, a.group))[0]
            gid, split = first.group, first.split
        else:  # a new group: train, unless a license keeps it out of every published split
            gid, split = group.id, "test" if unpublishable(group, pins) else "train"
        new_groups[gid] = tuple(sorted(set(new_groups.get(gid, ())) | set(fresh)))
        new_splits[gid] = split
    if not new_groups:
        return None
    return LedgerEvent(
        seq=len(ledger.events),
        time=time,
        action="extend",
        params=None,
        groups=new_groups,
        splits=new_splits,
        prev=ledger.head,
    )


def unpublishable(group: Group, pins: Sequence[Pin]) -> bool:
    """A group holding a repository whose license does not allow redistribution: only the sealed test split
    (never published) may hold it, so an extension reserves it there rather than in train."""
    members = set(group.pins)
    return any(p.license not in REDISTRIBUTABLE for p in pins if p.id in members)


def _describe(params: Params | None) -> str:
    if params is None:
        return "no parameters"
    named = ""
    if params.test_groups or params.dev_groups:
        named = f" named test={list(params.test_groups)} dev={list(params.dev_groups)}"
    return f"test={params.test} dev={params.dev} seed={params.seed}{named}"


def assign(
    pins: Path,
    params: Params | None,
    *,
    force: bool = False,
    now: str | None = None,
) -> LedgerEvent | None:
    """Plan and append one event (atomically, under a lock); return it, or None if nothing changed."""
    with locked(pins):
        ledger = SplitLedger.load(pins)
        event = plan(list_pins(pins), ledger, params, force=force, now=now)
        if event is None:
            return None
        if event.action == "force":
            check_redraw(ledger, event, pins)
        sealed = replace(event, commitment=event.compute_commitment())
        old = ledger.path.read_text(encoding="utf-8") if ledger.path.exists() else ""
        atomic.write_text(ledger.path, old + sealed.to_line())
        return sealed


def check_redraw(ledger: SplitLedger, event: LedgerEvent, pins: Path) -> None:
    """Refuse a forced redraw the evaluation cannot take (ReservationError naming why).

    Once tasks are locked (``pins/_tasks.lock``) a redraw is allowed once: the one recorded re-draw an
    evaluation gets before any model is audited on it; after it the splits only grow. It is refused
    outright once the test split was unsealed for an audit (``pins/_unseals.jsonl``), and it may never
    move a repository out of a test split that holds sealed tasks (``pins/_sealed.json``): those tasks would
    land in a published split."""
    from dbt_harvest.corpora.sealed import UNSEALS_NAME, read_seal
    from dbt_harvest.corpora.tasklock import read_lock

    earlier = [e for e in ledger.events if e.action == "force"]
    lock = read_lock(pins)
    if earlier and lock is not None and lock.tasks:
        raise ReservationError(
            f"the splits were already re-drawn (event {earlier[-1].seq}, {earlier[-1].time}) and tasks are "
            "locked: a reservation only grows now (pin new repositories, then `harvest split assign`)"
        )
    unseals = pins / UNSEALS_NAME
    if unseals.is_file() and unseals.read_text(encoding="utf-8").strip():
        raise ReservationError(
            f"the test split was unsealed for an audit ({unseals.name}): its reservation can no longer be redrawn"
        )
    seal = read_seal(pins)
    if seal is None or not seal.count:
        return
    after = {repo: event.splits[gid] for gid, repos in event.groups.items() for repo in repos}
    leaving = sorted(r for r, a in ledger.state.items() if a.split == "test" and after.get(r, "test") != "test")
    if leaving:
        raise ReservationError(
            f"{leaving[0]} holds sealed test tasks and would leave the test split"
            f"{f' (and {len(leaving) - 1} more)' if len(leaving) > 1 else ''}: name its group with --test-group"
        )


def assignment_of(pin_id: str, pins: Path) -> Assignment | None:
    """The reserved split and group of a pin's repository (None if it has none yet)."""
    pin = read_pin(pin_path(pin_id, pins))
    return SplitLedger.load(pins).assignment(pin)


def split_of(pin_id: str, pins: Path) -> str | None:
    """The split reserved for the pin's repository; None means: not reserved, do not mint."""
    found = assignment_of(pin_id, pins)
    return found.split if found else None


def group_of(pin_id: str, pins: Path) -> str | None:
    """The split group recorded for the pin's repository (what a task's ``split_group`` must say)."""
    found = assignment_of(pin_id, pins)
    return found.group if found else None

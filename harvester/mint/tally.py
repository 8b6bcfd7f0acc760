"""How far a mint run is: per kind of task, its shards finished of those planned and its candidates decided.

The driver (:func:`harvester.mint.pipeline.mint`, given a :class:`MintTally`) counts each round's shards
before they run and each shard's result as it is applied, so the tally says at any moment how many pins have
no shard left, and per kind (repair, history, completion) how many shards finished (a shard a time budget
stopped is not finished: it is resumed by the next run) and how many candidates were screened out, rejected
at confirmation and kept. `harvest mint` prints it as its progress detail, e.g. ``1/2 pins done; repair 4/10
shards: 40 candidates, 31 screened out, 3 rejected at confirm, 6 kept; completion 0/5 shards: 0 candidates,
0 screened out, 0 rejected at confirm, 0 kept``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dbt_harvest.harvester.mint.shard import CandidateReport, ShardJob

#: the kinds a tally reports, in the order its line names them
KIND_ORDER = ("repair", "history", "completion")
#: the counts of one run's candidates, in the order `harvest mint --json` writes them (``this_run``)
COUNT_KEYS = ("candidates", "screened_out", "confirm_rejected", "kept")


def shard_kind(job: ShardJob, history_pins: frozenset[str]) -> str:
    """The kind of task ``job`` decides: ``completion`` (single or pairs shards), ``history`` (a repair shard
    of a pin mined from history) or ``repair``."""
    if job.kind != "repair":
        return "completion"
    return "history" if job.pin_id in history_pins else "repair"


def counts_line(counts: dict[str, int]) -> str:
    """``40 candidates, 31 screened out, 3 rejected at confirm, 6 kept``: counts in words."""
    return (
        f"{counts['candidates']} candidates, {counts['screened_out']} screened out, "
        f"{counts['confirm_rejected']} rejected at confirm, {counts['kept']} kept"
    )


@dataclass
class KindTally:
    """One kind's progress: shards planned, finished and stopped, and its candidates by outcome (a running count)."""

    shards: int = 0
    finished: int = 0
    stopped: int = 0  # shards a time budget stopped (their decided candidates are counted)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))

    def add(self, reports: Iterable[CandidateReport], stopped: bool = False) -> None:
        """Count one shard's decided candidates, and the shard as finished or as stopped by the budget."""
        if stopped:
            self.stopped += 1
        else:
            self.finished += 1
        for report in reports:
            self.counts["candidates"] += 1
            if report.kept:
                self.counts["kept"] += 1
            elif report.stage == "screen":
                self.counts["screened_out"] += 1
            else:
                self.counts["confirm_rejected"] += 1

    def line(self, kind: str) -> str:
        """``repair 4/10 shards: 40 candidates, …`` (``4 shards`` when none was planned through the tally;
        ``(2 stopped)`` after the shards when the budget stopped some)."""
        shards = f"{self.finished}/{self.shards}" if self.shards else str(self.finished)
        stopped = f" ({self.stopped} stopped)" if self.stopped else ""
        return f"{kind} {shards} shards{stopped}: {counts_line(self.counts)}"


@dataclass
class MintTally:
    """A mint run's progress over every kind, fed with :meth:`plan` and :meth:`add` (a running count).

    ``pins``: how many pins the run mints (0: pins are not counted); ``history_pins``: the ids of those
    mined from history, whose repair shards are counted as kind ``history``."""

    pins: int = 0
    history_pins: frozenset[str] = frozenset()
    kinds: dict[str, KindTally] = field(default_factory=dict)
    _open: dict[str, int] = field(default_factory=dict, init=False, repr=False)  # pin id -> shards left to finish

    def plan(self, jobs: Sequence[ShardJob]) -> None:
        """Count a round's shards before they run (each pin with one is not done until it finishes)."""
        for job in jobs:
            self._kind(job).shards += 1
            self._open[job.pin_id] = self._open.get(job.pin_id, 0) + 1

    def add(self, job: ShardJob, reports: Sequence[CandidateReport], stopped: bool = False) -> None:
        """Count a shard's reports, and the shard as finished (its pin has one shard less to go) or, when the
        time budget ``stopped`` it, as stopped (its pin is not done)."""
        self._kind(job).add(reports, stopped)
        if not stopped and self._open.get(job.pin_id, 0) > 0:
            self._open[job.pin_id] -= 1

    def pins_done(self) -> int:
        """Pins with no planned shard left to finish (a later round may plan more for one)."""
        return max(0, self.pins - sum(1 for left in self._open.values() if left > 0))

    def this_run(self) -> dict[str, int]:
        """This run's candidates over every kind: ``{"candidates", "screened_out", "confirm_rejected", "kept"}``."""
        return {key: sum(k.counts[key] for k in self.kinds.values()) for key in COUNT_KEYS}

    def line(self) -> str:
        """The progress detail: pins done, then each kind that has shards, in :data:`KIND_ORDER`."""
        parts = [self.kinds[kind].line(kind) for kind in KIND_ORDER if kind in self.kinds]
        if self.pins:
            parts.insert(0, f"{self.pins_done()}/{self.pins} pins done")
        return "; ".join(parts) if parts else counts_line(self.this_run())

    def _kind(self, job: ShardJob) -> KindTally:
        """The tally of ``job``'s kind (created on its first shard)."""
        return self.kinds.setdefault(shard_kind(job, self.history_pins), KindTally())


__all__ = ["COUNT_KEYS", "KIND_ORDER", "KindTally", "MintTally", "counts_line", "shard_kind"]

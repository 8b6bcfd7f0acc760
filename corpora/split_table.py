"""The splits in view: tasks per split, kind, repository and owner, the largest shares, and the sealed MDE.

An evaluation split answers only if it is large and varied enough: one repository or one owner holding most
of it makes the verdict that repository's, and too few tasks make any realistic gain invisible
(``eval.audit.power``). This module reads the committed task lock and the pins it names (no home, no task
record, nothing unsealed: the sealed split's lock entries name their pin and hash only) and states, per
split, how many tasks of each kind come from which repository and owner, the largest shares, and whether
the targets the evaluation needs are met. ``harvest corpus splits`` writes it as docs/corpus/splits.md,
splits.json and splits.png.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.pin import pin_path, read_pin
from dbt_harvest.core.task_record import kind_of_id
from dbt_harvest.corpora.errors import CorporaError
from dbt_harvest.corpora.repos import owner_of, repo_key
from dbt_harvest.corpora.tasklock import TaskLock

SPLITS = ("train", "dev", "test")
#: the kind of a sealed task locked before the lock recorded kinds (its entry: a pin and a hash, no id)
UNRECORDED = "unrecorded"
#: the sealed split's minimum detectable effect per base pass rate ("0.3" -> 0.057, None: no gain seen);
#: computed by the caller (eval.audit.power sits a layer above the corpus)
MDE = Mapping[str, float | None]


@dataclass(frozen=True)
class SplitTarget:
    """What one split must hold for the evaluation to answer (issue 58): None where nothing is asked."""

    split: str
    min_tasks: int
    min_repos: int | None = None
    max_repo_share: float | None = None
    max_owner_share: float | None = None
    both_kinds: bool = False


TARGETS = (
    SplitTarget("test", 300, 12, 0.15, 0.40, both_kinds=True),
    SplitTarget("dev", 150, 8, None, 0.50, both_kinds=True),
    SplitTarget("train", 500),
)


@dataclass(frozen=True)
class Cell:
    """The tasks of one kind one repository holds in one split."""

    split: str
    kind: str
    repo: str
    owner: str
    tasks: int


@dataclass(frozen=True)
class SplitTable:
    """Every (split, kind, repository) cell of the lock, with the sums and shares read from them."""

    cells: tuple[Cell, ...]

    def total(self, split: str) -> int:
        """The tasks of ``split``."""
        return sum(c.tasks for c in self.cells if c.split == split)

    def by(self, split: str, field: str) -> Counter[str]:
        """The tasks of ``split`` summed by ``field`` (``kind``, ``repo`` or ``owner``)."""
        counts: Counter[str] = Counter()
        for cell in self.cells:
            if cell.split == split:
                counts[str(getattr(cell, field))] += cell.tasks
        return counts

    def largest(self, split: str, field: str) -> tuple[str, float]:
        """The repository or owner holding the largest share of ``split``, and that share (0 when empty)."""
        counts, total = self.by(split, field), self.total(split)
        if not total:
            return ("", 0.0)
        name, tasks = min(counts.items(), key=lambda item: (-item[1], item[0]))
        return (name, tasks / total)

    def shortfalls(self, target: SplitTarget) -> list[str]:
        """What ``target`` asks of its split that the split does not hold, one phrase each."""
        split, out = target.split, []
        if self.total(split) < target.min_tasks:
            out.append(f"{self.total(split)} tasks, at least {target.min_tasks} wanted")
        repos = len(self.by(split, "repo"))
        if target.min_repos is not None and repos < target.min_repos:
            out.append(f"{repos} repositories, at least {target.min_repos} wanted")
        for field, cap in (("repo", target.max_repo_share), ("owner", target.max_owner_share)):
            name, share = self.largest(split, field)
            if cap is not None and share > cap:
                out.append(f"{field} {name} holds {share:.0%}, at most {cap:.0%} allowed")
        kinds = set(self.by(split, "kind"))
        if target.both_kinds and not {"repair", "completion"} <= kinds:
            shown = ", ".join(sorted(kinds)) or "none"
            out.append(f"kinds {shown}: both repair and completion wanted")
        return out

    def to_dict(self, mde: MDE) -> dict[str, Any]:
        """Everything the table says, JSON-ready: the cells, per-split sums, shares, shortfalls and the
        sealed split's ``mde``."""
        splits = {}
        for split in SPLITS:
            repo, repo_share = self.largest(split, "repo")
            owner, owner_share = self.largest(split, "owner")
            splits[split] = {
                "tasks": self.total(split),
                "kinds": dict(sorted(self.by(split, "kind").items())),
                "repositories": len(self.by(split, "repo")),
                "owners": len(self.by(split, "owner")),
                "largest_repository": {"name": repo, "share": round(repo_share, 4)},
                "largest_owner": {"name": owner, "share": round(owner_share, 4)},
            }
        return {
            "splits": splits,
            "shortfalls": {t.split: self.shortfalls(t) for t in TARGETS},
            "sealed_mde": dict(mde),
            "cells": [asdict(c) for c in self.cells],
        }


def split_table(lock: TaskLock, pins: Path) -> SplitTable:
    """The lock's tasks counted per split, kind and repository (each pin read for its repository)."""
    repos: dict[str, tuple[str, str]] = {}
    counts: Counter[tuple[str, str, str, str]] = Counter()
    for task in lock.tasks:
        if task.pin not in repos:
            path = pin_path(task.pin, pins)
            if not path.is_file():
                raise CorporaError(f"the task lock names pin {task.pin}, which {pins} does not hold; restore it")
            key = repo_key(read_pin(path))
            repos[task.pin] = (key, owner_of(key))
        repo, owner = repos[task.pin]
        kind = kind_of_id(task.instance_id) if task.instance_id else task.kind or UNRECORDED
        counts[(task.split, kind, repo, owner)] += 1
    cells = tuple(Cell(s, k, r, o, n) for (s, k, r, o), n in counts.items())
    order = {split: i for i, split in enumerate(SPLITS)}
    return SplitTable(tuple(sorted(cells, key=lambda c: (order.get(c.split, 9), c.kind, -c.tasks, c.repo))))


def markdown(table: SplitTable, mde: MDE) -> str:
    """docs/corpus/splits.md: the sums per split, the targets, the sealed MDE and every cell."""
    data = table.to_dict(mde)
    lines = [
        "# The splits",
        "",
        "Written by `harvest corpus splits --out docs/corpus` from the committed task lock and pins. The sealed",
        "split's lock entries hold a pin, a hash and the task's kind, not its id (an entry locked before kinds",
        "were recorded counts as `unrecorded`).",
        "",
        "| split | tasks | kinds | repositories | owners | largest repository | largest owner |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, row in data["splits"].items():
        kinds = ", ".join(f"{k} {n}" for k, n in row["kinds"].items()) or "-"
        repo, owner = row["largest_repository"], row["largest_owner"]
        lines.append(
            f"| {split} | {row['tasks']} | {kinds} | {row['repositories']} | {row['owners']} | "
            f"{repo['name'] or '-'} ({repo['share']:.0%}) | {owner['name'] or '-'} ({owner['share']:.0%}) |"
        )
    lines += ["", "## Targets (what the evaluation needs)", ""]
    for target in TARGETS:
        short = data["shortfalls"][target.split]
        lines.append(f"- {target.split}: " + ("met" if not short else "NOT met: " + "; ".join(short)))
    figures = ", ".join(
        f"{100 * value:.1f} points at base rate {rate}" if value is not None else f"none at base rate {rate}"
        for rate, value in mde.items()
    )
    lines += [
        "",
        "## The sealed split's minimum detectable effect",
        "",
        f"On {table.total('test')} paired tasks (exact McNemar, two-sided alpha 0.05, 80% power, churn 10%; "
        f'docs/EXPERIMENT.md, "Power"): {figures}.',
        "",
        "## Tasks per split, kind and repository",
        "",
        "| split | kind | repository | owner | tasks |",
        "|---|---|---|---|---|",
        *[f"| {c.split} | {c.kind} | {c.repo} | {c.owner} | {c.tasks} |" for c in table.cells],
        "",
    ]
    return "\n".join(lines)


def chart(table: SplitTable, mde: MDE, path: Path) -> Path:
    """splits.png: each split's tasks as one bar, stacked by owner (the five largest, then the rest)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 3.2))
    widest = max([table.total(split) for split in SPLITS] + [1])
    for row, split in enumerate(SPLITS):
        owners = table.by(split, "owner").most_common()
        shown = owners[:5] + ([("other owners", sum(n for _, n in owners[5:]))] if owners[5:] else [])
        left = 0
        for owner, tasks in shown:
            axis.barh(row, tasks, left=left, edgecolor="white")
            if tasks >= widest * 0.08:  # a label only where the segment is wide enough to hold it
                axis.text(left + tasks / 2, row, f"{owner}\n{tasks}", ha="center", va="center", fontsize=7)
            left += tasks
    axis.set_yticks(range(len(SPLITS)), [f"{s} ({table.total(s)})" for s in SPLITS])
    axis.set_xlabel("tasks (stacked by owner)")
    at = mde.get("0.3")
    axis.set_title(
        "tasks per split and owner; sealed MDE at base rate 0.3: "
        + (f"{100 * at:.1f} points" if at is not None else "none"),
        fontsize=9,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path

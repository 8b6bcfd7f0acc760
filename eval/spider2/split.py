"""The predeclared split of Spider 2.0-DBT: 16 development instances, 48 sealed, drawn once and committed.

The question this project exists to answer is whether training on harvested tasks moves the official
Spider 2.0-DBT number. Answering it on the same 64 instances we look at while developing would make the
benchmark a selection signal, so its scoreable instances were split once (``split.json`` beside this
module, drawn by :func:`draw` with the seed recorded there) and are never redrawn: dev audits are reports;
a frozen recipe audits the sealed part once (``eval.spider2.sealed``), as it does our own test split.

Scoreable: the 68 instances of ``spider2_eval.jsonl`` less the four whose gold database is not in the
benchmark's archive (docs/SCORER_SPEC.md: airbnb002, biketheft001, gitcoin001, google_ads001); those are
listed in the file and belong to neither part. An instance the committed split does not name (a checkout
made by ``harvest export spider2`` from our own train or dev tasks: the test split is never exported) is
a development instance.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from typing import Any

from dbt_harvest.core.errors import HarvestError

DEV, SEALED = "dev", "sealed"
PARTS = (DEV, SEALED)
DEV_SIZE = 16
SPLIT_FILE = "split.json"


class SplitFileError(HarvestError):
    """The committed Spider2 split file is unreadable or inconsistent (restore it from git: it is never redrawn)."""


@dataclass(frozen=True)
class Spider2Split:
    """Which Spider 2.0-DBT instance belongs to which part (the committed, predeclared split)."""

    benchmark: str
    seed: int
    drawn_on: str
    dev: tuple[str, ...]
    sealed: tuple[str, ...]
    unscoreable: dict[str, str]  # instance id -> why it is in neither part

    def part_of(self, instance_id: str) -> str | None:
        """``dev`` or ``sealed``; None for an unscoreable instance of the benchmark. Instances the split does
        not name are development instances (see the module docstring)."""
        if instance_id in self.sealed:
            return SEALED
        if instance_id in self.unscoreable:
            return None
        return DEV

    @property
    def names(self) -> frozenset[str]:
        return frozenset((*self.dev, *self.sealed, *self.unscoreable))

    def is_benchmark(self, instance_ids: set[str] | frozenset[str]) -> bool:
        """Whether a checkout holding these ids is the benchmark (not an export of our own tasks)."""
        return bool(set(instance_ids) & self.names)

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "seed": self.seed,
            "drawn_on": self.drawn_on,
            "dev_size": len(self.dev),
            "dev": list(self.dev),
            "sealed": list(self.sealed),
            "unscoreable": dict(sorted(self.unscoreable.items())),
        }


def draw(scoreable: list[str], seed: int, dev_size: int = DEV_SIZE) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(dev, sealed): ``dev_size`` ids drawn from the sorted scoreable ids by ``random.Random(seed)``, the
    rest sealed; both sorted. Pure: the same ids and seed always give the same split."""
    ids = sorted(set(scoreable))
    if not 0 < dev_size < len(ids):
        raise SplitFileError(f"cannot draw {dev_size} development instances from {len(ids)} scoreable ones")
    dev = sorted(random.Random(seed).sample(ids, dev_size))
    return tuple(dev), tuple(i for i in ids if i not in set(dev))


def parse(data: Any) -> Spider2Split:
    """The split from its JSON form, checked: the parts are disjoint, of the recorded sizes, and exactly
    what ``draw`` gives for the recorded seed (a hand-edited part is refused)."""
    try:
        split = Spider2Split(
            benchmark=str(data["benchmark"]),
            seed=int(data["seed"]),
            drawn_on=str(data["drawn_on"]),
            dev=tuple(str(i) for i in data["dev"]),
            sealed=tuple(str(i) for i in data["sealed"]),
            unscoreable={str(k): str(v) for k, v in dict(data["unscoreable"]).items()},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SplitFileError(f"the Spider2 split file is malformed ({exc}); restore it from git") from None
    scoreable = [*split.dev, *split.sealed]
    if len(set(scoreable)) != len(scoreable) or set(scoreable) & set(split.unscoreable):
        raise SplitFileError("the Spider2 split file names an instance twice; restore it from git")
    if (split.dev, split.sealed) != draw(scoreable, split.seed, len(split.dev)):
        raise SplitFileError(
            "the Spider2 split file's parts are not the recorded seed's draw (it is never redrawn "
            "or edited); restore it from git"
        )
    return split


def committed() -> Spider2Split:
    """The committed split of Spider 2.0-DBT (``split.json`` beside this module)."""
    text = resources.files(__package__).joinpath(SPLIT_FILE).read_text(encoding="utf-8")
    try:
        return parse(json.loads(text))
    except json.JSONDecodeError as exc:
        raise SplitFileError(f"the Spider2 split file is not JSON ({exc}); restore it from git") from None

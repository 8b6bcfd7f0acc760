"""Does a prompt's file order tell where the bug is? A positional classifier against chance.

A single-turn prompt shows several model files; if the broken one sits at a predictable position (first,
last, third), a model learns the position, not the skill. The probe fits the best positional rule on half
of the rows ("the broken model is the k-th model file shown", counted from the start or from the end; k
is chosen where the fitting half is most often right) and measures it on the other half, against chance
(the mean of 1/number of model files shown). Rows whose prompt shows a single model file carry no
positional choice and are left out. Pure: rows in, numbers out.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dbt_harvest.train.lineage import is_model


@dataclass(frozen=True)
class ProbeResult:
    rows: int  # rows with a positional choice (two or more model files shown)
    rule: str  # the rule fitted on the first half, e.g. "start:0" (first model file) or "end:0" (last)
    accuracy: float  # the rule's hit rate on the held-out half
    chance: float  # mean 1/(model files shown) on the held-out half
    held_out: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _position(shown: Sequence[str], broken: str) -> tuple[int, int] | None:
    models = [p for p in shown if is_model(p)]
    if len(models) < 2 or broken not in models:
        return None
    index = models.index(broken)
    return index, len(models)


def _hits(rule: str, index: int, count: int) -> bool:
    side, k = rule.split(":")
    return index == (int(k) if side == "start" else count - 1 - int(k))


def probe(rows: Sequence[tuple[str, Sequence[str], str]]) -> ProbeResult:
    """``rows``: (row id, the paths a prompt shows in order, the broken file). Halves are split by a hash
    of the row id, so the probe does not depend on the order rows come in."""
    positioned = [(rid, pos) for rid, shown, broken in rows if (pos := _position(shown, broken)) is not None]
    fit: list[tuple[int, int]] = []
    held: list[tuple[int, int]] = []
    for rid, pos in positioned:
        (fit if hashlib.sha256(rid.encode()).digest()[0] % 2 == 0 else held).append(pos)
    if not fit or not held:
        return ProbeResult(len(positioned), "", 0.0, 0.0, len(held))
    counts: Counter[str] = Counter()
    for index, count in fit:
        counts[f"start:{index}"] += 1
        counts[f"end:{count - 1 - index}"] += 1
    rule = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    accuracy = sum(_hits(rule, i, n) for i, n in held) / len(held)
    chance = sum(1 / n for _, n in held) / len(held)
    return ProbeResult(len(positioned), rule, round(accuracy, 4), round(chance, 4), len(held))

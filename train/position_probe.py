"""Does a prompt's layout tell where the bug is? Every simple rule a model could learn, against chance.

A single-turn prompt shows several model files; if the broken one is predictable from the layout alone (the
first file, the last, the longest), a model learns the layout, not the skill. The probe measures each rule
of ``RULES`` on half of the rows (split by a hash of the row id) against chance (the mean of 1/number of
model files shown):

- ``position``: "the broken model is the k-th model file shown", counted from the start or from the end;
  k is fitted on the other half (where it is most often right);
- ``first_shown`` and ``last_shown``: the first and the last model file;
- ``reported_model``: the reported table's own model (the first shown model at ref-distance 0 from a
  reported table);
- ``longest``: the longest model file shown;
- ``named_first``: the model of the table the statement names first;
- ``deepest``: the model furthest upstream of the reported tables (the first shown of the deepest).

The content rules need each row's facts (``RowFacts``); a row without them is measured by the positional
rules only. Rows whose prompt shows a single model file carry no choice and are left out. Pure: rows in,
numbers out.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dbt_harvest.train.lineage import is_model

#: every rule the probe measures (a test pins this list, so that no rule is dropped silently)
RULES = ("position", "first_shown", "last_shown", "reported_model", "longest", "named_first", "deepest")


@dataclass(frozen=True)
class RowFacts:
    """What the content rules read of one row: each shown file's length, each model's ref-distance from the
    reported tables, and the models of the tables the statement names, in the order it names them."""

    sizes: Mapping[str, int]
    depth: Mapping[str, int]
    named: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeResult:
    rows: int  # rows with a positional choice (two or more model files shown)
    rule: str  # the best rule on the held-out half, e.g. "start:0" (first model file) or "longest"
    accuracy: float  # the best rule's hit rate on the held-out half
    chance: float  # mean 1/(model files shown) on the held-out half
    held_out: int
    # rule (RULES) -> hit rate on the held-out half (the fitted position rule under "position"); rules a
    # held-out row has no facts for are measured on the rows that have them
    rules: dict[str, float] = field(default_factory=dict)
    position_rule: str = ""  # the position fitted on the first half

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


def _choice(rule: str, models: Sequence[str], facts: RowFacts | None) -> str | None:
    """The model file ``rule`` points at among ``models`` (shown order), or None when it needs facts."""
    if rule == "first_shown":
        return models[0]
    if rule == "last_shown":
        return models[-1]
    if facts is None:
        return None
    if rule == "reported_model":
        return next((m for m in models if facts.depth.get(m) == 0), None)
    if rule == "longest":
        return max(models, key=lambda m: (facts.sizes.get(m, 0), -models.index(m)))
    if rule == "named_first":
        return next((m for m in facts.named if m in models), None)
    if rule == "deepest":
        deepest = max(facts.depth.get(m, -1) for m in models)
        return next((m for m in models if facts.depth.get(m, -1) == deepest), None) if deepest >= 0 else None
    raise ValueError(f"unknown rule {rule!r}")


def probe(rows: Sequence[tuple[str, Sequence[str], str]], facts: Mapping[str, RowFacts] | None = None) -> ProbeResult:
    """``rows``: (row id, the paths a prompt shows in order, the broken file); ``facts``: row id -> what the
    content rules read. Halves are split by a hash of the row id, so the probe does not depend on the order
    rows come in."""
    facts = facts or {}
    positioned = [
        (rid, pos, [p for p in shown if is_model(p)], broken)
        for rid, shown, broken in rows
        if (pos := _position(shown, broken)) is not None
    ]
    fit: list[tuple[str, tuple[int, int], list[str], str]] = []
    held: list[tuple[str, tuple[int, int], list[str], str]] = []
    for row in positioned:
        (fit if hashlib.sha256(row[0].encode()).digest()[0] % 2 == 0 else held).append(row)
    if not fit or not held:
        return ProbeResult(len(positioned), "", 0.0, 0.0, len(held))
    counts: Counter[str] = Counter()
    for _, (index, count), _, _ in fit:
        counts[f"start:{index}"] += 1
        counts[f"end:{count - 1 - index}"] += 1
    position = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    rates = {"position": sum(_hits(position, i, n) for _, (i, n), _, _ in held) / len(held)}
    for rule in RULES[1:]:
        measured = [
            (choice == broken)
            for rid, _, models, broken in held
            if (choice := _choice(rule, models, facts.get(rid))) is not None or rid in facts
        ]
        if measured:
            rates[rule] = sum(measured) / len(measured)
    best = max(rates, key=lambda r: (rates[r], -RULES.index(r)))
    chance = sum(1 / n for _, (_, n), _, _ in held) / len(held)
    return ProbeResult(
        len(positioned),
        position if best == "position" else best,
        round(rates[best], 4),
        round(chance, 4),
        len(held),
        {r: round(v, 4) for r, v in rates.items()},
        position,
    )

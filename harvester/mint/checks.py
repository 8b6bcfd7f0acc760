"""The admission checks that read an observation, shared by screening and confirmation.

Screening observes the mutant in the in-process engine, confirmation on the tables of a real dbt build;
both hand the same ``Observation`` to the same checks, so a rule means one thing at both stages (and a
candidate from elsewhere, such as augmented data, goes through the same rules). Each check is a small
pure function returning a ``Check`` with its reason; ``Rejected`` carries a failed check through a
pipeline of rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbt_harvest.core.pin import Pin
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.harvester.mint.lineage import ModelNode, depth
from dbt_harvest.harvester.mint.observe import Observation
from dbt_harvest.harvester.sandbox.inside.harvest_names import graded_name

MAX_GRADED = 4
CATASTROPHIC_TABLE_FRACTION = 0.75
CATASTROPHIC_MIN_TABLES = 5
CATASTROPHIC_ROW_FACTOR = 10
_KEYISH = re.compile(r"(^id$|_id$|_key$|^date|_date$|_month$|^month|_day$|_week$)", re.I)


@dataclass(frozen=True)
class Check:
    ok: bool
    reason: str = ""  # rejection reason key when not ok
    detail: str = ""


class Rejected(Exception):
    """A rule of the admission pipeline said no: ``reason`` is the report's key, ``detail`` one line."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def require(check: Check) -> None:
    """Raise ``Rejected`` for a failed check."""
    if not check.ok:
        raise Rejected(check.reason, check.detail)


def check_changed(obs: Observation, pin: Pin) -> Check:
    if not obs.changed:
        return Check(False, "equivalent", "every table equals gold")
    return Check(True)


def _gradable(pin: Pin) -> dict[str, object]:
    # the scorer sees only tables captured in main (harvest_names: every model whose alias is unique)
    return {t.name: t for t in pin.gradable_tables if graded_name(t.name) is not None}


def check_gradable(obs: Observation, pin: Pin) -> Check:
    if not set(obs.changed) & set(_gradable(pin)):
        return Check(False, "ungradable", "only nondeterministic, empty or tables outside main changed")
    return Check(True)


def check_catastrophic(obs: Observation, pin: Pin) -> Check:
    if len(obs.changed) > max(CATASTROPHIC_MIN_TABLES, CATASTROPHIC_TABLE_FRACTION * obs.models):
        return Check(False, "catastrophic", f"{len(obs.changed)} of {obs.models} tables changed")
    for table, (gold, mutant) in obs.changed.items():
        if gold > 0 and mutant == 0:
            return Check(False, "catastrophic", f"{table} emptied")
        if gold > 0 and mutant > CATASTROPHIC_ROW_FACTOR * gold:
            return Check(False, "catastrophic", f"{table} rows x{mutant / gold:.0f}")
    return Check(True)


def check_effect(obs: Observation, effect: str) -> Check:
    gold, mutant = obs.root_rows
    # The tag must not be contradicted: a filter dropped inside an aggregate changes values, not rows,
    # but it can never make rows disappear.
    expected = {
        "more_rows": mutant >= gold,
        "fewer_rows": mutant <= gold,
        "changed_values": mutant == gold,
    }.get(effect, True)
    if not expected:
        return Check(False, "effect_mismatch", f"{effect} tagged, rows {gold} -> {mutant}")
    return Check(True)


def choose_grading(obs: Observation, pin: Pin, nodes: dict[str, ModelNode]) -> GradingSpec:
    """1-4 changed gradable tables, most downstream first; their stable columns that differ plus key-like
    stable columns. Unstable columns (pin: nondeterministic or naming the database) are never graded."""
    gradable = {t.name: t for t in pin.gradable_tables if graded_name(t.name) is not None}
    by_table = {n.table: n for n in nodes.values()}
    chosen = sorted(
        (t for t in obs.changed if t in gradable),
        key=lambda t: (-depth(nodes, by_table[t].unique_id) if t in by_table else 0, t),
    )[:MAX_GRADED]
    cols: list[tuple[int, ...]] = []
    for table in chosen:
        record = gradable[table]
        stable = set(record.stable_positions)
        names = [c.name for c in record.columns]
        picked = set(obs.differing_columns.get(table, ())) & stable
        keys = [i for i, n in enumerate(names) if _KEYISH.search(n) and i in stable]
        picked.update(keys[:2] if keys else [min(stable)])
        cols.append(tuple(sorted(picked)))
    return GradingSpec(
        gold=f"{pin.gold_sha256}.duckdb",
        condition_tabs=tuple(str(graded_name(t)) for t in chosen),
        condition_cols=tuple(cols),
        ignore_orders=tuple(True for _ in chosen),
    )


#: The checks over an observation, in the order both stages run them.
OBSERVATION_CHECKS = ("changed", "gradable", "catastrophic", "effect")


def check_observation(obs: Observation, pin: Pin, effect: str) -> Check:
    """Every observation check in order (``OBSERVATION_CHECKS``); the first failure, else ok."""
    for check in (
        check_changed(obs, pin),
        check_gradable(obs, pin),
        check_catastrophic(obs, pin),
        check_effect(obs, effect),
    ):
        if not check.ok:
            return check
    return Check(True)


__all__ = [
    "Check",
    "OBSERVATION_CHECKS",
    "Rejected",
    "check_catastrophic",
    "check_changed",
    "check_effect",
    "check_gradable",
    "check_observation",
    "choose_grading",
    "require",
]

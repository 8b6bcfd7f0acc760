"""A problem statement's claims, and their check against the built tables.

The template states, per graded table, one thing a data consumer sees: the table has more rows than it should,
or is missing rows, or named columns came out higher / lower / true more often / empty more often / wrong, or
are missing from it altogether (a fix mined from history that added them, undone). ``claims_of`` lists exactly
those claims from the symptoms the statement is written from; ``check_claims`` tests each one on the captured
tables of gold and of the broken build with SQL of its own and the official check (not with the code that
measured the symptoms), so a statement that says "missing rows" when the build adds one, or "wrong values" in
a column that did not move, is caught before the task is kept. The verifier (``harvest tasks verify``) re-runs
the same check on fresh builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.core.pin import Pin
from dbt_harvest.core.scorer import official
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import Claim
from dbt_harvest.harvester.mint.lineage import ModelNode
from dbt_harvest.harvester.mint.observe import Observation, captures, column_names, relation
from dbt_harvest.harvester.mint.statement import Symptom
from dbt_harvest.harvester.sandbox.inside.harvest_names import full_graded_name

#: Claims about a table's rows; every other kind names a column.
ROW_CLAIMS = ("more_rows", "fewer_rows")
#: At most this many columns are named per table (the template's limit).
MAX_COLUMNS = 3


def symptoms_of(spec: GradingSpec, obs: Observation, pin: Pin, nodes: dict[str, ModelNode]) -> list[Symptom]:
    """One symptom per graded table, in the spec's order, from a build's observation: its rows, and
    when the row count held, the graded columns that moved and how (``visible_symptoms`` keeps at most
    ``MAX_COLUMNS`` of those the official check can see). With
    rows missing or added every column differs as a whole: the rows are the symptom then."""
    by_table = {n.table: n for n in nodes.values()}
    tables = {t.name: t for t in pin.tables}
    found = []
    for name, positions in zip(spec.condition_tabs, spec.condition_cols):
        full = full_graded_name(name)
        node = by_table.get(full)
        gold_rows, mutant_rows = obs.changed.get(full, (0, 0))
        columns = []
        if gold_rows == mutant_rows:
            differing = set(obs.differing_columns.get(full, ()))
            moved = obs.directions.get(full, {})
            for pos in positions:
                if pos in differing:
                    column = tables[full].columns[pos].name
                    columns.append((column, node.columns.get(column, "") if node else "", moved.get(pos, "different")))
        found.append(
            Symptom(
                node.name if node else name, node.description if node else "", gold_rows, mutant_rows, tuple(columns)
            )
        )
    return found


@dataclass(frozen=True)
class ClaimCheck:
    claim: Claim
    holds: bool
    detail: str


def claims_of(spec: GradingSpec, symptoms: Sequence[Symptom]) -> tuple[Claim, ...]:
    """What a statement written from ``symptoms`` (one per graded table, in the spec's order) claims."""
    out: list[Claim] = []
    for table, symptom in zip(spec.condition_tabs, symptoms):
        if symptom.mutant_rows > symptom.gold_rows:
            out.append(Claim(table, "more_rows"))
        elif symptom.mutant_rows < symptom.gold_rows:
            out.append(Claim(table, "fewer_rows"))
        for column, _description, direction in symptom.columns:
            out.append(Claim(table, direction, column))
    return tuple(out)


def visible_symptoms(
    pin: Pin, spec: GradingSpec, symptoms: Sequence[Symptom], gold: Path, broken: Path
) -> list[Symptom]:
    """``symptoms`` without the columns the official check cannot tell from gold (a total that moved in
    its last digits, within the 0.01 tolerance): a statement must not send anyone after them."""
    out = []
    for table, symptom in zip(spec.condition_tabs, symptoms):
        columns = tuple(
            c
            for c in symptom.columns
            if (pos := _column_position(pin, table, c[0])) is not None
            and _visible(gold, broken, table, pos, f"{pin.gold_sha256}.duckdb")
        )[:MAX_COLUMNS]
        out.append(Symptom(symptom.table, symptom.description, symptom.gold_rows, symptom.mutant_rows, columns))
    return out


def _column_position(pin: Pin, table: str, column: str) -> int | None:
    record = next((t for t in pin.tables if t.name == full_graded_name(table)), None)
    if record is None:
        return None
    return next((i for i, c in enumerate(record.columns) if c.name.lower() == column.lower()), None)


def _visible(gold: Path, broken: Path, table: str, position: int, spec_gold: str) -> bool:
    """The official check, on this one column, tells the broken build from gold."""
    one = GradingSpec(gold=spec_gold, condition_tabs=(table,), condition_cols=((position,),), ignore_orders=(True,))
    return not official(gold, broken, one).passed


def check_claims(pin: Pin, claims: Sequence[Claim], gold: Path, broken: Path) -> tuple[ClaimCheck, ...]:
    """Each claim, tested on gold's and the broken build's captured tables."""
    results: list[ClaimCheck] = []
    with captures(gold=gold, broken=broken) as con:
        for claim in claims:
            name = full_graded_name(claim.table)
            g, b = relation("gold", name), relation("broken", name)
            try:
                rows_g = int(con.execute(f"SELECT count(*) FROM {g}").fetchone()[0])  # type: ignore[index]
                rows_b = int(con.execute(f"SELECT count(*) FROM {b}").fetchone()[0])  # type: ignore[index]
            except Exception as exc:
                results.append(ClaimCheck(claim, False, f"`{claim.table}` cannot be read: {exc}"))
                continue
            if claim.kind in ROW_CLAIMS:
                holds = rows_b > rows_g if claim.kind == "more_rows" else rows_b < rows_g
                results.append(ClaimCheck(claim, holds, f"rows {rows_g} -> {rows_b}"))
                continue
            position = _column_position(pin, claim.table, claim.column)
            if position is None:
                results.append(ClaimCheck(claim, False, f"no column `{claim.column}` in gold's `{claim.table}`"))
                continue
            if not _visible(gold, broken, claim.table, position, f"{pin.gold_sha256}.duckdb"):
                results.append(
                    ClaimCheck(claim, False, f"`{claim.column}` is the same as gold's under the official check")
                )
                continue
            holds, detail = _direction_holds(con, claim, g, b, rows_g == rows_b)
            results.append(ClaimCheck(claim, holds, detail))
    return tuple(results)


def _direction_holds(con, claim: Claim, g: str, b: str, same_rows: bool) -> tuple[bool, str]:
    col = '"' + claim.column.replace('"', '""') + '"'
    if not same_rows:  # with rows added or missing every column differs as a whole: the rows are the symptom
        return False, f"`{claim.column}` is claimed to move ({claim.kind}) but the row count changed"
    if claim.kind == "different":
        return True, "the column's values differ"
    if claim.kind == "missing":
        return (
            claim.column.lower() not in column_names(con, b) and claim.column.lower() in column_names(con, g),
            f"`{claim.column}` in gold's table, not in the broken build's",
        )
    if claim.kind in ("nulls_more", "nulls_less"):
        sql = f"SELECT count(*) - count({col}) FROM {{}}"
    elif claim.kind in ("true_more", "true_less"):
        sql = f"SELECT count(*) FILTER (WHERE {col}) FROM {{}}"
    elif claim.kind in ("higher", "lower"):
        sql = f"SELECT sum({col})::DOUBLE FROM {{}}"
    else:
        return False, f"unknown claim {claim.kind!r}"
    before = con.execute(sql.format(g)).fetchone()[0]
    after = con.execute(sql.format(b)).fetchone()[0]
    if before is None or after is None:
        return False, f"`{claim.column}`: no total to compare ({before} -> {after})"
    up = claim.kind in ("nulls_more", "true_more", "higher")
    holds = after > before if up else after < before
    return holds, f"`{claim.column}`: {before} -> {after}"


__all__ = ["ClaimCheck", "MAX_COLUMNS", "ROW_CLAIMS", "check_claims", "claims_of", "symptoms_of", "visible_symptoms"]

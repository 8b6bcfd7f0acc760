"""What a built variant of a pin shows, measured on its captured tables against gold.

Confirmation builds every variant for real (dbt, hooks included) and captures every model relation.
This module reads two such captures, gold and a variant, and says what a data consumer would see:
which tables changed (rows, and which stable columns), how each changed column moved (more empty
values, a higher total, true more often…), the broken build's signature (two mutations with the same
signature are one bug), and, for a wrong repair, which of the broken build's symptoms it fixes and
which it leaves. Columns the pin marks unstable (they differed between the builds of ``harvest add``:
nondeterministic, or naming the database) are never looked at: no grade, no statement rests on them.

Captures are plain DuckDB files of base tables; they are opened read-only with external access off.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from dbt_harvest.core.pin import Pin, TableRecord
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.harvester.mint.statement import DIRECTIONS  # how a column moved: the statement's vocabulary
from dbt_harvest.harvester.sandbox.inside.harvest_names import full_graded_name

_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U\w*INT|FLOAT|DOUBLE|REAL|DECIMAL.*)$", re.I)


@dataclass(frozen=True)
class Observation:
    """What re-running or rebuilding the mutated chain showed, table by table."""

    changed: dict[str, tuple[int, int]]  # table -> (gold rows, variant rows), only changed tables
    differing_columns: dict[str, tuple[int, ...]]  # table -> gold positions of stable columns that moved
    root_table: str
    root_rows: tuple[int, int]
    models: int
    # table -> position -> how the column moved (DIRECTIONS), for tables whose row count held
    directions: dict[str, dict[int, str]] = field(default_factory=dict)

    @property
    def effect(self) -> str:
        """The effect on the mutated model's rows, as built: more_rows, fewer_rows or changed_values."""
        gold, variant = self.root_rows
        return "more_rows" if variant > gold else "fewer_rows" if variant < gold else "changed_values"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def relation(alias: str, table: str) -> str:
    schema, _, name = table.partition(".")
    return f"{_quote(alias)}.{_quote(schema)}.{_quote(name)}"


@contextmanager
def captures(**files: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One in-memory connection with each capture attached read-only under its keyword (``gold=…``)."""
    con = duckdb.connect(":memory:")
    try:
        for alias, path in files.items():
            con.execute(f"ATTACH '{str(Path(path).resolve())}' AS {_quote(alias)} (READ_ONLY)")
        con.execute("SET enable_external_access=false")
        con.execute("SET enable_progress_bar=false")
        con.execute("SET lock_configuration=true")
        yield con
    finally:
        con.close()


def signatures(con: duckdb.DuckDBPyConnection, rel: str) -> dict[str, tuple[str, int, int]]:
    """Per column (lower-case name): (type, non-null count, sum of value hashes): an order-independent
    multiset signature, all columns in one query."""
    described = con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()
    if not described:
        return {}
    parts = ", ".join(f"count({_quote(str(d[0]))}), sum(hash({_quote(str(d[0]))}))::HUGEINT" for d in described)
    row = con.execute(f"SELECT {parts} FROM {rel}").fetchone() or ()
    return {
        str(d[0]).lower(): (str(d[1]), int(row[2 * i] or 0), int(row[2 * i + 1] or 0)) for i, d in enumerate(described)
    }


def column_names(con: duckdb.DuckDBPyConnection, rel: str) -> frozenset[str]:
    """The lower-case column names of ``rel``."""
    return frozenset(str(d[0]).lower() for d in con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall())


def row_count(con: duckdb.DuckDBPyConnection, rel: str) -> int:
    return int(con.execute(f"SELECT count(*) FROM {rel}").fetchone()[0])  # type: ignore[index]


def moved_columns(con: duckdb.DuckDBPyConnection, record: TableRecord, left: str, right: str) -> tuple[int, ...]:
    """Positions (in gold's column order) of the table's stable columns whose multiset differs."""
    a, b = signatures(con, relation(left, record.name)), signatures(con, relation(right, record.name))
    return tuple(
        i
        for i in record.stable_positions
        if a.get(record.columns[i].name.lower()) != b.get(record.columns[i].name.lower())
    )


def directions(
    con: duckdb.DuckDBPyConnection,
    record: TableRecord,
    positions: tuple[int, ...],
    gold: str = "gold",
    variant: str = "variant",
) -> dict[int, str]:
    """How each column at ``positions`` moved from ``gold`` to ``variant`` (same row count): more or fewer
    empty values first, then a numeric total higher or lower, a boolean true more or less often, else
    'different'; 'missing' where ``variant`` has no such column."""
    out: dict[int, str] = {}
    present = column_names(con, relation(variant, record.name))
    for i in positions:
        column = record.columns[i]
        if column.name.lower() not in present:
            out[i] = "missing"
            continue
        name, kind = _quote(column.name), column.type.upper()
        if _NUMERIC.match(kind):
            value = f"sum({name})::DOUBLE"
        elif kind == "BOOLEAN":
            value = f"count(*) FILTER (WHERE {name})"
        else:
            value = "NULL"
        sql = "SELECT count(*) - count({c}), {v} FROM {r}"
        try:
            before = con.execute(sql.format(c=name, v=value, r=relation(gold, record.name))).fetchone() or (None, None)
            after = con.execute(sql.format(c=name, v=value, r=relation(variant, record.name))).fetchone() or (
                None,
                None,
            )
        except duckdb.Error:
            out[i] = "different"
            continue
        if before[0] != after[0]:
            out[i] = "nulls_more" if after[0] > before[0] else "nulls_less"
        elif before[1] is not None and after[1] is not None and before[1] != after[1]:
            if kind == "BOOLEAN":
                out[i] = "true_more" if after[1] > before[1] else "true_less"
            else:
                out[i] = "higher" if after[1] > before[1] else "lower"
        else:
            out[i] = "different"
    return out


def observe_build(
    pin: Pin, root_table: str, models: int, gold: Path, variant: Path, captured: dict[str, tuple[int, str]]
) -> Observation:
    """Compare a variant's capture with gold: ``captured`` maps each captured table to (rows, fingerprint).

    A table counts as changed when its row count moved or a stable column's values did; a table whose
    fingerprint moved only in unstable columns is unchanged (nothing gradable moved).
    """
    records = {t.name: t for t in pin.tables}
    changed: dict[str, tuple[int, int]] = {}
    differing: dict[str, tuple[int, ...]] = {}
    moved: dict[str, dict[int, str]] = {}
    root_rows = (records[root_table].rows, captured.get(root_table, (0, ""))[0]) if root_table in records else (0, 0)
    with captures(gold=gold, variant=variant) as con:
        for name, (rows, fingerprint) in sorted(captured.items()):
            record = records.get(name)
            if record is None:
                changed[name] = (-1, rows)
                continue
            if fingerprint == record.fingerprint:
                continue
            positions = moved_columns(con, record, "gold", "variant")
            if rows == record.rows and not positions:
                continue
            changed[name] = (record.rows, rows)
            differing[name] = positions
            if rows == record.rows and positions:
                moved[name] = directions(con, record, positions)
    return Observation(changed, differing, root_table, root_rows, models, moved)


def broken_signature(pin: Pin, variant: Path, obs: Observation) -> str:
    """A digest of the broken build's gradable outputs: the changed gradable tables, their rows and the
    multisets of their stable columns. Two mutations of one pin with the same signature break the same
    thing the same way: one task."""
    records = {t.name: t for t in pin.tables}
    parts: list[str] = []
    with captures(variant=variant) as con:
        for name in sorted(obs.changed):
            record = records.get(name)
            if record is None or not record.gradable:
                continue
            sig = signatures(con, relation("variant", name))
            stable = [record.columns[i].name.lower() for i in record.stable_positions]
            parts.append(f"{name}:{obs.changed[name][1]}:" + ",".join(f"{c}={sig.get(c)}" for c in stable))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RepairEffect:
    """What a wrong repair does to the broken build's symptoms, measured per graded table."""

    fixes: tuple[str, ...]
    leaves: tuple[str, ...]


def repair_effect(pin: Pin, spec: GradingSpec, gold: Path, broken: Path, repaired: Path) -> RepairEffect:
    """Which symptoms of ``broken`` a (wrong) repair's build ``repaired`` fixes and which it leaves: the
    row count of each graded table, then each graded column, compared by multiset with gold."""
    records = {t.name: t for t in pin.tables}
    fixes: list[str] = []
    leaves: list[str] = []
    with captures(gold=gold, broken=broken, repaired=repaired) as con:
        for bare, positions in zip(spec.condition_tabs, spec.condition_cols):
            name = full_graded_name(bare)
            record = records.get(name)
            if record is None:
                continue
            rows = {side: row_count(con, relation(side, name)) for side in ("gold", "broken", "repaired")}
            if rows["broken"] != rows["gold"]:
                (fixes if rows["repaired"] == rows["gold"] else leaves).append(f"row count of `{bare}`")
            elif rows["repaired"] != rows["gold"]:
                leaves.append(f"row count of `{bare}` (now wrong)")
            sig = {side: signatures(con, relation(side, name)) for side in ("gold", "broken", "repaired")}
            for i in positions:
                column = record.columns[i].name.lower()
                was_wrong = sig["broken"].get(column) != sig["gold"].get(column)
                is_wrong = sig["repaired"].get(column) != sig["gold"].get(column)
                label = f"`{record.columns[i].name}` of `{bare}`"
                if was_wrong and not is_wrong:
                    fixes.append(label)
                elif is_wrong:
                    leaves.append(label if was_wrong else f"{label} (now wrong)")
    return RepairEffect(tuple(fixes), tuple(leaves))


__all__ = [
    "DIRECTIONS",
    "Observation",
    "RepairEffect",
    "broken_signature",
    "captures",
    "column_names",
    "directions",
    "moved_columns",
    "observe_build",
    "relation",
    "repair_effect",
    "signatures",
]

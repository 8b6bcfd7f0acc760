"""Reading a completion's statement facts from its gold, and the tables a check compares with them.

``core.statement_facts`` holds the record, its words and the pure check; this module reads DuckDB: the
expected table in the pin's gold (row count, grain, column types and nulls, boundary example rows), and
any other build's table of the same name as ``Observed`` rows (a wrong completion's build in the mint,
a fresh build in ``harvest tasks verify``).

Example rows are chosen from the gold alone, never from the SQL and never from the wrong completions, so
that the statement is what a colleague who looked at the expected table would say. In this order, up to
``MAX_EXAMPLES``, without repeats: a row holding a null in a graded column; a row holding zero in a
numeric one (a group with no children); a row whose text holds a separator (a string's format); the rows
with the smallest and the largest value of each numeric, date or timestamp column (the edges a filter or
a window decides); the first row.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from dbt_harvest.core.locked_duckdb import connect_locked
from dbt_harvest.core.scorer.source import SCORER_LOCK
from dbt_harvest.core.statement_facts import ColumnFact, Observed, TableFacts, cell, type_family
from dbt_harvest.harvester.mint.contract import Contract

MAX_EXAMPLES = 6
#: the grain is searched among combinations of up to this many graded columns
MAX_GRAIN = 3
#: ... and at most this many combinations are tried
MAX_GRAIN_TRIES = 200
_SEPARATORS = (" ", "-", "_", ",", "/", ":", "@", ".")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_table(con: duckdb.DuckDBPyConnection, table: str) -> Observed | None:
    """Every row of ``table`` (in schema ``main``) with its column types; None when it is absent."""
    described = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ? "
        "ORDER BY column_index",
        [table],
    ).fetchall()
    if not described:
        return None
    names = tuple(str(row[0]) for row in described)
    rows = con.execute(f"SELECT {', '.join(_quote(n) for n in names)} FROM main.{_quote(table)}").fetchall()
    return Observed(
        types={n.lower(): str(t) for n, t in described},
        names=tuple(n.lower() for n in names),
        rows=[tuple(r) for r in rows],
    )


def read_file_table(database: Path, table: str) -> Observed | None:
    """``read_table`` over a DuckDB file opened read-only, locked as the scorer opens one."""
    con = connect_locked(str(database), SCORER_LOCK, read_only=True)
    try:
        return read_table(con, table)
    finally:
        con.close()


def accepted_values(contract: Contract, names: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The ``accepted_values`` tests the contract documents on the columns ``names``."""
    wanted = {n.lower(): n for n in names}
    out: list[tuple[str, tuple[str, ...]]] = []
    for column in contract.columns:
        for test in column.tests:
            if test.startswith("accepted_values: ") and column.name.lower() in wanted:
                values = tuple(v.strip() for v in test.split(": ", 1)[1].split(", "))
                out.append((wanted[column.name.lower()], values))
    return tuple(out)


def grain_of(rows: Sequence[tuple[Any, ...]], positions: Sequence[int], names: Sequence[str]) -> tuple[str, ...]:
    """The first combination (fewest columns, then table order) of the columns at ``positions`` whose values
    are unique together over ``rows`` and never null; () when none of up to ``MAX_GRAIN`` columns is."""
    tries = 0
    for size in range(1, MAX_GRAIN + 1):
        for combo in itertools.combinations(positions, size):
            tries += 1
            if tries > MAX_GRAIN_TRIES:
                return ()
            keys = [tuple(row[i] for i in combo) for row in rows]
            if all(v is not None for key in keys for v in key) and len(set(keys)) == len(keys):
                return tuple(names[i] for i in combo)
    return ()


def _sort_key(row: tuple[str | None, ...]) -> tuple[tuple[int, str], ...]:
    return tuple((0, "") if v is None else (1, v) for v in row)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def examples_of(rows: Sequence[tuple[Any, ...]], types: Sequence[str]) -> tuple[tuple[str | None, ...], ...]:
    """Boundary example rows (module docstring) of ``rows`` over the graded columns, whose type families
    are ``types``; values as ``cell`` writes them."""
    raw = sorted(range(len(rows)), key=lambda i: _sort_key(tuple(cell(v) for v in rows[i])))
    picked: list[int] = []

    def pick(index: int | None) -> None:
        if index is not None and index not in picked and len(picked) < MAX_EXAMPLES:
            picked.append(index)

    width = len(types)
    for col in range(width):
        pick(next((i for i in raw if rows[i][col] is None), None))
    for col in range(width):
        if types[col] in ("integer", "number"):
            pick(next((i for i in raw if _number(rows[i][col]) == 0), None))
    for col in range(width):
        if types[col] == "text":
            pick(next((i for i in raw if any(s in str(rows[i][col] or "").strip() for s in _SEPARATORS)), None))
    for col in range(width):
        if types[col] in ("integer", "number", "date", "timestamp"):
            present = [i for i in raw if rows[i][col] is not None]
            if present:
                pick(min(present, key=lambda i: rows[i][col]))
                pick(max(present, key=lambda i: rows[i][col]))
    if raw:
        pick(raw[0])
    chosen = [tuple(cell(v) for v in rows[i]) for i in picked]
    return tuple(sorted(chosen, key=_sort_key))


def facts_of(
    gold: Observed, table: str, model: str, graded: Sequence[str], contract: Contract | None = None
) -> TableFacts:
    """The facts a statement states about the expected table ``gold`` (graded columns ``graded``, by name)."""
    index = {name: i for i, name in enumerate(gold.names)}
    at = [index[g.lower()] for g in graded]
    columns = tuple(
        ColumnFact(g, type_family(gold.types[g.lower()]), any(row[i] is None for row in gold.rows))
        for g, i in zip(graded, at)
    )
    projected = [tuple(row[i] for i in at) for row in gold.rows]
    grain = grain_of(projected, range(len(at)), list(graded))
    examples = examples_of(projected, [c.type for c in columns])
    accepted = accepted_values(contract, graded) if contract is not None else ()
    return TableFacts(table, model, len(gold.rows), grain, columns, examples, accepted)


__all__ = [
    "MAX_EXAMPLES",
    "MAX_GRAIN",
    "accepted_values",
    "examples_of",
    "facts_of",
    "grain_of",
    "read_file_table",
    "read_table",
]

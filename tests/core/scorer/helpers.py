"""Small helpers shared by the scorer tests: build gold/submission tables in in-memory DuckDB."""

from __future__ import annotations

import duckdb

from dbt_harvest.core.scorer import GradingSpec, score

from .reference import instance_verdict


def connections(gold_sql: str, pred_sql: str) -> tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection]:
    gold = duckdb.connect()
    pred = duckdb.connect()
    gold.execute(gold_sql)
    pred.execute(pred_sql)
    return gold, pred


def both_verdicts(
    gold_sql: str, pred_sql: str, cols: tuple[int, ...] = (), ignore_order: bool = True, table: str = "t"
) -> tuple[int, int, int]:
    """(fast official, reference official, strict) for one table ``table``."""
    gold, pred = connections(gold_sql, pred_sql)
    spec = GradingSpec("gold.duckdb", (table,), (cols,), (ignore_order,))
    result = score(gold, pred, spec)
    ref = instance_verdict(gold, pred, [table], [list(cols)], [ignore_order])
    return result.official.score, ref, result.strict.score


def values_table(name: str, typ: str, values: list[str]) -> str:
    """CREATE TABLE name (c typ) with the given SQL literals, one row each (no rows if empty)."""
    if not values:
        return f"CREATE TABLE {name} (c {typ})"
    rows = ", ".join(f"(CAST({v} AS {typ}))" for v in values)
    return f"CREATE TABLE {name} AS SELECT * FROM (VALUES {rows}) v(c)"

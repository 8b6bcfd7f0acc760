"""The oracle: Spider 2.0-DBT's comparison written literally from docs/SCORER_SPEC.md, over pandas.

Deliberately naive (one Python step per value, fetchdf + transpose as the official code does), so that
the fast scorer can be checked against it. Never import this from the product.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pandas as pd

from dbt_harvest.core.scorer.source import fetch_frame  # fetchdf without duckdb's own pandas deprecation warning


def _key(x: Any) -> tuple[bool, str, bool]:
    return (x is None, str(x), isinstance(x, (int, float)))


def match(g: list[Any], p: list[Any], ignore_order: bool) -> bool:
    try:
        if ignore_order:
            g = sorted(g, key=_key)
            p = sorted(p, key=_key)
        if len(g) != len(p):
            return False
        for a, b in zip(g, p):
            if pd.isna(a) and pd.isna(b):
                continue
            elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
                if not math.isclose(float(a), float(b), abs_tol=0.01):
                    return False
            elif a != b:
                return False
        return True
    except Exception:
        return False


def compare_frames(gold: pd.DataFrame, pred: pd.DataFrame, cols: list[int], ignore_order: bool) -> bool:
    gold_part = gold.iloc[:, cols] if cols else gold
    gold_vectors = gold_part.transpose().values.tolist()
    pred_vectors = pred.transpose().values.tolist()
    return all(any(match(g, p, ignore_order) for p in pred_vectors) for g in gold_vectors)


def table_verdict(
    gold: duckdb.DuckDBPyConnection, pred: duckdb.DuckDBPyConnection, table: str, cols: list[int], ignore_order: bool
) -> bool:
    gold_frame = fetch_frame(gold, f"SELECT * FROM {table}")
    try:
        pred_frame = fetch_frame(pred, f"SELECT * FROM {table}")
    except Exception:
        return False
    return compare_frames(gold_frame, pred_frame, cols, ignore_order)


def instance_verdict(
    gold: duckdb.DuckDBPyConnection,
    pred: duckdb.DuckDBPyConnection,
    tables: list[str],
    cols: list[list[int]],
    orders: list[bool],
) -> int:
    return int(all(table_verdict(gold, pred, t, c, o) for t, c, o in zip(tables, cols, orders)))

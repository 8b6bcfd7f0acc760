"""The official comparison over Python values, value by value: the fallback for exotic columns.

Columns whose values are not plain numbers, strings or timestamps (LIST, STRUCT, UUID, BLOB, TIME,
INTERVAL, TIMESTAMP_NS, non-UTC TIMESTAMPTZ, ...) behave in ways only the per-value walk reproduces
(a LIST value is an ndarray, so ``pd.isna`` returns an array and the truth test raises: no match). Tables
with such columns are rare and small, so they take this exact but slow path.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from dbt_harvest.core.scorer.source import sort_key

ABS_TOL = 0.01


def _is_na(value: Any) -> Any:
    import pandas as pd

    return pd.isna(value)


def values_equal(a: Any, b: Any) -> bool:
    """One pair of the official walk; raises where the official code raises."""
    if _is_na(a) and _is_na(b):
        return True
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), abs_tol=ABS_TOL)
    # the official code's shape, kept: `if a != b` raises on an ambiguous truth value (pd.NA, an array)
    if a != b:  # noqa: SIM103
        return False
    return True


def vectors_match(gold: list[Any], pred: list[Any], ignore_order: bool) -> bool:
    """The official per-column test; any exception means no match."""
    try:
        if ignore_order:
            gold = sorted(gold, key=sort_key)
            pred = sorted(pred, key=sort_key)
        if len(gold) != len(pred):
            return False
        for a, b in zip(gold, pred):  # noqa: SIM110 (the official walk, one pair at a time)
            if not values_equal(a, b):
                return False
        return True
    except Exception:
        return False


def mismatch_positions(gold: list[Any], pred: list[Any], ignore_order: bool) -> tuple[list[Any], list[Any], list[int]]:
    """Aligned vectors and the positions whose pair fails (an exception counts as a failure)."""
    try:
        if ignore_order:
            gold = sorted(gold, key=sort_key)
            pred = sorted(pred, key=sort_key)
    except Exception:
        return gold, pred, list(range(min(len(gold), len(pred))))
    bad = []
    for i, (a, b) in enumerate(zip(gold, pred)):
        try:
            ok = values_equal(a, b)
        except Exception:
            ok = False
        if not ok:
            bad.append(i)
    return gold, pred, bad


def rows_match(gold_cols: list[list[Any]], pred_cols: list[list[Any]], ignore_order: bool) -> bool:
    """Strict, value by value: row tuples as multisets (sorted by the official keys), then compared."""
    try:
        g_rows = list(zip(*gold_cols))
        p_rows = list(zip(*pred_cols))
        if len(g_rows) != len(p_rows):
            return False
        if ignore_order:
            g_rows.sort(key=lambda r: tuple(sort_key(v) for v in r))
            p_rows.sort(key=lambda r: tuple(sort_key(v) for v in r))
        return all(values_equal(a, b) for gr, pr in zip(g_rows, p_rows) for a, b in zip(gr, pr))
    except Exception:
        return False


def candidate_mappings(candidates: list[list[int]], limit: int = 64) -> list[tuple[int, ...]]:
    """Up to ``limit`` ways to pick one matching submitted column per gold column."""
    return list(itertools.islice(itertools.product(*candidates), limit))

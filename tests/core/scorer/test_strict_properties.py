"""Property tests for the strict verdict against brute-force oracles on tiny tables.

For every choice of officially matching submitted columns, the oracles search all row bijections:
- exact oracle: some bijection pairs rows whose values have identical official sort keys (or both NA);
- tolerant oracle: some bijection pairs rows whose values pass the official value test.
Strict must sit between them: exact oracle => strict passes => tolerant oracle.
"""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt_harvest.core.scorer import GradingSpec, score

from .reference import _key, match
from .test_properties import GOLD, PRED, _sql_table, table_case


def _pair_ok(a: Any, b: Any, exact: bool) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    if exact:
        return _key(a) == _key(b)
    return match([a], [b], False)


def _bijection(g_rows: list[tuple[Any, ...]], p_rows: list[tuple[Any, ...]], exact: bool) -> bool:
    return any(
        all(all(_pair_ok(a, b, exact) for a, b in zip(gr, p_rows[k])) for gr, k in zip(g_rows, perm))
        for perm in itertools.permutations(range(len(p_rows)))
    )


def oracle(table: str, cols: list[int], exact: bool) -> bool:
    gold = GOLD.execute(f"SELECT * FROM {table}").fetchdf()
    pred = PRED.execute(f"SELECT * FROM {table}").fetchdf()
    g_vecs = (gold.iloc[:, cols] if cols else gold).transpose().values.tolist()
    p_vecs = pred.transpose().values.tolist()
    if len(gold) != len(pred):
        return False
    candidates = [[j for j, p in enumerate(p_vecs) if match(g, p, True)] for g in g_vecs]
    g_rows = list(zip(*g_vecs)) if len(gold) else []
    for mapping in itertools.product(*candidates):
        p_rows = list(zip(*[p_vecs[j] for j in mapping])) if len(pred) else []
        if _bijection(g_rows, p_rows, exact):
            return True
    return False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(table_case(), min_size=4, max_size=4))
def test_strict_between_exact_and_tolerant_oracles(cases: list) -> None:  # type: ignore[type-arg]
    cases = [c for c in cases if c[5]]  # strict equals official when row order matters
    if not cases:
        return
    names = [f"t{i}" for i in range(len(cases))]
    for name, (gt, gr, pt, pr, _, _) in zip(names, cases):
        GOLD.execute(_sql_table(name, gt, gr))
        PRED.execute(_sql_table(name, pt, pr))
    spec = GradingSpec("gold.duckdb", tuple(names), tuple(c[4] for c in cases), tuple(True for _ in cases))
    result = score(GOLD, PRED, spec)
    for name, case, verdict in zip(names, cases, result.strict.tables):
        cols = list(case[4])
        if oracle(name, cols, exact=True):
            assert verdict.passed, (case, verdict)
        if verdict.passed:
            assert oracle(name, cols, exact=False), (case, verdict)

"""Grading one submission against one gold file: the official verdict, the strict one, and the raw
material of an explanation, computed over one load of each table.

Official (SCORER_SPEC.md): for each graded table, every graded gold column must be satisfied by some
submitted column (not consumed), each compared after sorting both on their own by the official key.
Strict: the same candidates, then the graded gold rows must equal the submitted rows under one choice
of matching columns (row-aligned multiset equality, same tolerance, NA equal only to NA). When
``ignore_order`` is false the official check is already row-aligned, so strict equals official.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from dbt_harvest.core.scorer import literal
from dbt_harvest.core.scorer.errors import GoldTableError
from dbt_harvest.core.scorer.source import LoadedTable, Source, SubmissionFailure, fetch_frame, load_table, open_source
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.scorer.vectors import Scratch, Side, TablePair, strict_rows_match
from dbt_harvest.core.scorer.verdict import TableVerdict, Verdict

MAX_STRICT_MAPPINGS = 64


@dataclass
class TableWork:
    """Everything known about one graded table after grading (kept for explanations)."""

    name: str
    graded: list[int]
    ignore_order: bool
    gold: LoadedTable
    pred: LoadedTable | None = None
    failure: str = ""  # submission-side failure reason (missing/unreadable table)
    official: TableVerdict | None = None
    strict: TableVerdict | None = None
    candidates: list[list[int]] = field(default_factory=list)
    gold_side: Side | None = None
    pred_side: Side | None = None
    pair: TablePair | None = None
    literal: bool = False
    gold_literal: list[list[Any]] | None = None
    pred_literal: list[list[Any]] | None = None


@dataclass
class Graded:
    official: Verdict
    strict: Verdict
    tables: list[TableWork]
    #: the scratch connection, still open only when all candidates were asked for (explanations)
    scratch: Scratch | None = None


def _graded_positions(table: LoadedTable, cols: tuple[int, ...]) -> list[int]:
    width = len(table.columns)
    for c in cols:
        if c >= width:
            raise GoldTableError(
                f"condition_cols position {c} is out of range for gold table {table.name} "
                f"({width} columns): fix the grading spec"
            )
    return list(cols) if cols else list(range(width))


def _literal_values(con: duckdb.DuckDBPyConnection, table: LoadedTable) -> list[list[Any]]:
    if table.literal_values is None:
        frame = fetch_frame(con, f"SELECT * FROM {table.name}")
        table.literal_values = frame.transpose().values.tolist() if table.n_rows else [[] for _ in table.columns]
    return table.literal_values


def grade(gold: Source, pred: Source, spec: GradingSpec, *, want_strict: bool, all_candidates: bool = False) -> Graded:
    """Grade ``pred`` against ``gold``; gold-side problems raise GoldTableError, submission ones score 0."""
    with open_source(gold, gold=True) as gcon:
        works = []
        for name, cols, order in zip(spec.condition_tabs, spec.condition_cols, spec.ignore_orders):
            table = load_table(gcon, name, gold=True)
            works.append(TableWork(name, _graded_positions(table, cols), bool(order), table))
        file_failure = ""
        scratch = Scratch()
        try:
            try:
                with open_source(pred, gold=False) as pcon:
                    for i, work in enumerate(works):
                        try:
                            work.pred = load_table(pcon, work.name, gold=False)
                        except SubmissionFailure as failure:
                            work.failure = failure.reason
                            continue
                        _grade_table(i, work, gcon, pcon, scratch, want_strict or all_candidates, all_candidates)
            except SubmissionFailure as failure:
                file_failure = failure.reason
            official_tables: list[TableVerdict] = []
            strict_tables: list[TableVerdict] = []
            for work in works:
                reason = file_failure or work.failure
                if reason or work.official is None:
                    verdict = TableVerdict(work.name, False, reason or "not graded", work.gold.n_rows)
                    work.official = work.strict = verdict
                official_tables.append(work.official)
                strict_tables.append(work.strict if work.strict is not None else work.official)
        finally:
            if not all_candidates:
                scratch.close()
    return Graded(
        Verdict.from_tables(tuple(official_tables)),
        Verdict.from_tables(tuple(strict_tables)),
        works,
        scratch if all_candidates else None,
    )


def _grade_table(
    i: int,
    work: TableWork,
    gcon: duckdb.DuckDBPyConnection,
    pcon: duckdb.DuckDBPyConnection,
    scratch: Scratch,
    want_strict: bool,
    all_candidates: bool,
) -> None:
    gold, pred = work.gold, work.pred
    assert pred is not None
    name = work.name
    if gold.n_rows != pred.n_rows:
        reason = f"row count {pred.n_rows} != {gold.n_rows} in table {name}"
        work.official = work.strict = TableVerdict(name, False, reason, gold.n_rows, pred.n_rows)
        return
    exotic = any(gold.columns[j].kind == "exotic" for j in work.graded) or any(c.kind == "exotic" for c in pred.columns)
    width = len(pred.columns)
    matched: list[tuple[int, int | None]] = []
    unmatched: int | None = None
    if exotic:
        work.literal = True
        gvals = _literal_values(gcon, gold)
        pvals = _literal_values(pcon, pred)
        work.gold_literal, work.pred_literal = gvals, pvals

        def test(gj: int, pj: int) -> bool:
            return literal.vectors_match(gvals[gj], pvals[pj], work.ignore_order)

    else:
        g = Side(scratch, f"g{i}", gold)
        p = Side(scratch, f"p{i}", pred)
        work.gold_side, work.pred_side = g, p
        pair = work.pair = TablePair(g, p)

        def test(gj: int, pj: int) -> bool:
            return pair.match(gj, pj, work.ignore_order)

    for gj in work.graded:
        found: list[int] = []
        for pj in range(width):
            if test(gj, pj):
                found.append(pj)
                if not (want_strict or all_candidates):
                    break
        work.candidates.append(found)
        matched.append((gj, found[0] if found else None))
        if not found:
            unmatched = gj
            if not all_candidates:
                break
    if unmatched is not None:
        reason = f"unmatched column {unmatched} of table {name}"
        work.official = work.strict = TableVerdict(name, False, reason, gold.n_rows, pred.n_rows, tuple(matched))
        return
    work.official = TableVerdict(name, True, "", gold.n_rows, pred.n_rows, tuple(matched))
    if not want_strict:
        return
    if not work.ignore_order:
        work.strict = work.official
        return
    for mapping in literal.candidate_mappings(work.candidates, MAX_STRICT_MAPPINGS):
        if exotic:
            ok = literal.rows_match([gvals[j] for j in work.graded], [pvals[j] for j in mapping], work.ignore_order)
        else:
            ok = pair.rows_agree(work.graded, list(mapping)) or strict_rows_match(g, work.graded, p, list(mapping))
        if ok:
            pairs = tuple(zip(work.graded, mapping))
            work.strict = TableVerdict(name, True, "", gold.n_rows, pred.n_rows, pairs)
            return
    reason = f"rows differ in table {name} (every graded column matches on its own)"
    work.strict = TableVerdict(name, False, reason, gold.n_rows, pred.n_rows, tuple(matched))

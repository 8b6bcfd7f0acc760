"""Why a submission scored what it did, for people and logs only.

Never call this from the agent-facing environment: it reveals which gold columns failed and shows gold
values. Per graded table it says whether the table was found (and where it was looked for), both row
counts, and for every graded gold column the submitted column that satisfied it, or the closest
candidate with its number of differing values and up to three example differences.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb

from dbt_harvest.core.scorer import literal
from dbt_harvest.core.scorer.grading import TableWork, grade
from dbt_harvest.core.scorer.source import Source
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.scorer.vectors import mismatches, render
from dbt_harvest.core.scorer.verdict import Verdict

MAX_EXAMPLES = 3


@dataclass(frozen=True)
class ColumnExplanation:
    gold_position: int
    gold_name: str
    matched: str | None
    closest: str | None = None
    differing: int | None = None
    examples: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TableExplanation:
    table: str
    found: bool
    looked_in: str
    passed: bool
    strict_passed: bool
    reason: str
    gold_rows: int | None
    pred_rows: int | None
    columns: tuple[ColumnExplanation, ...] = ()


@dataclass(frozen=True)
class Explanation:
    official: Verdict
    strict: Verdict
    tables: tuple[TableExplanation, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "official": self.official.to_dict(),
            "strict": self.strict.to_dict(),
            "tables": [asdict(t) for t in self.tables],
        }

    def to_text(self) -> str:
        lines = [
            f"official {self.official.score}" + (f" ({self.official.reason})" if self.official.reason else ""),
            f"strict   {self.strict.score}" + (f" ({self.strict.reason})" if self.strict.reason else ""),
        ]
        for t in self.tables:
            status = "pass" if t.passed else "FAIL"
            lines.append(f"table {t.table}: {status}; looked in {t.looked_in}")
            if not t.found:
                lines.append(f"  not found: {t.reason}")
                continue
            lines.append(f"  rows: submitted {t.pred_rows}, gold {t.gold_rows}")
            if t.passed and not t.strict_passed:
                lines.append(f"  strict: {t.reason or 'rows differ'}")
            for c in t.columns:
                if c.matched is not None:
                    lines.append(f"  gold column {c.gold_position} ({c.gold_name}) <- {c.matched}")
                elif c.closest is None:
                    lines.append(f"  gold column {c.gold_position} ({c.gold_name}): no comparable column")
                else:
                    lines.append(
                        f"  gold column {c.gold_position} ({c.gold_name}): UNMATCHED; closest {c.closest} "
                        f"with {c.differing} differing values"
                    )
                    for gv, pv in c.examples:
                        lines.append(f"      gold {gv}  vs  submitted {pv}")
        return "\n".join(lines)


def _where(pred: Source, table: str) -> str:
    place = "the given connection" if isinstance(pred, duckdb.DuckDBPyConnection) else str(Path(pred))
    return f"{place}, schema main, name {table} (case-insensitive)"


def _explain_columns(work: TableWork) -> tuple[ColumnExplanation, ...]:
    gold, pred = work.gold, work.pred
    assert pred is not None
    out = []
    for gj, found in zip(work.graded, work.candidates):
        gname = gold.columns[gj].name
        if found:
            out.append(ColumnExplanation(gj, gname, pred.columns[found[0]].name))
            continue
        best: tuple[int, int, list[tuple[str, str]]] | None = None
        for pj in range(len(pred.columns)):
            if work.literal:
                assert work.gold_literal is not None and work.pred_literal is not None
                ga, pa_, bad = literal.mismatch_positions(
                    work.gold_literal[gj], work.pred_literal[pj], work.ignore_order
                )
                examples = [(repr(ga[i]), repr(pa_[i])) for i in bad[:MAX_EXAMPLES]]
                count = len(bad)
            else:
                g, p = work.gold_side, work.pred_side
                assert g is not None and p is not None
                gv, pv = g.vec(gj, work.ignore_order), p.vec(pj, work.ignore_order)
                mask = mismatches(gv, pv)
                idx = mask.nonzero()[0]
                count = int(idx.size)
                examples = [
                    (render(gv, gold.columns[gj], int(i)), render(pv, pred.columns[pj], int(i)))
                    for i in idx[:MAX_EXAMPLES]
                ]
            if best is None or count < best[1]:
                best = (pj, count, examples)
        if best is None:
            out.append(ColumnExplanation(gj, gname, None))
        else:
            out.append(ColumnExplanation(gj, gname, None, pred.columns[best[0]].name, best[1], tuple(best[2])))
    return tuple(out)


def explain(gold: Source, pred: Source, spec: GradingSpec) -> Explanation:
    """A human-readable account of both verdicts (see the module docstring: people and logs only)."""
    graded = grade(gold, pred, spec, want_strict=True, all_candidates=True)
    try:
        tables = []
        for work in graded.tables:
            official, strict = work.official, work.strict
            assert official is not None and strict is not None
            found = work.pred is not None
            rows_equal = found and work.pred is not None and work.pred.n_rows == work.gold.n_rows
            columns = _explain_columns(work) if rows_equal and work.candidates else ()
            tables.append(
                TableExplanation(
                    table=work.name,
                    found=found,
                    looked_in=_where(pred, work.name),
                    passed=official.passed,
                    strict_passed=strict.passed,
                    reason=official.reason or strict.reason,
                    gold_rows=work.gold.n_rows,
                    pred_rows=work.pred.n_rows if work.pred is not None else None,
                    columns=columns,
                )
            )
        return Explanation(graded.official, graded.strict, tuple(tables))
    finally:
        if graded.scratch is not None:
            graded.scratch.close()

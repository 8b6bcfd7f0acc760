"""Verdict records: what a scorer answers, with the reason a score is 0 (for humans and logs).

``Verdict.reason`` is "" when passed, otherwise the first failing table's reason, in one of the
forms "missing file", "unreadable file: ...", "missing table T", "unreadable table T: ...",
"row count P != G in table T" (submitted first, gold second), "unmatched column N of table T"
(N = the 0-based gold column position, as in ``condition_cols``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TableVerdict:
    """One graded table: passed or not, why, and which submitted column satisfied each gold column."""

    table: str
    passed: bool
    reason: str = ""
    gold_rows: int | None = None
    pred_rows: int | None = None
    #: per graded gold column position: the index of a submitted column that matched it, or None
    matched: tuple[tuple[int, int | None], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "passed": self.passed,
            "reason": self.reason,
            "gold_rows": self.gold_rows,
            "pred_rows": self.pred_rows,
            "matched": {str(g): p for g, p in self.matched},
        }


@dataclass(frozen=True)
class Verdict:
    """An instance verdict: 1 iff every graded table passed."""

    passed: bool
    reason: str = ""
    tables: tuple[TableVerdict, ...] = field(default_factory=tuple)

    @property
    def score(self) -> int:
        return 1 if self.passed else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "score": self.score,
            "reason": self.reason,
            "tables": [t.to_dict() for t in self.tables],
        }

    @classmethod
    def from_tables(cls, tables: tuple[TableVerdict, ...]) -> Verdict:
        for table in tables:
            if not table.passed:
                return cls(False, table.reason, tables)
        return cls(True, "", tables)


@dataclass(frozen=True)
class Score:
    """Both verdicts of one submission; ``official`` is what the project calls "the score"."""

    official: Verdict
    strict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {"official": self.official.to_dict(), "strict": self.strict.to_dict()}

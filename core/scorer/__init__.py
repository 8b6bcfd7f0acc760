"""The scorer: an exact mirror of Spider 2.0-DBT's ``duckdb_match`` (``official``), a row-aligned
``strict`` verdict beside it, and ``explain`` for people.

Every number the project produces is a verdict of this package. ``official`` is "the score";
``strict`` is reported next to it. Semantics: docs/SCORER_SPEC.md. Verified against pandas
``VERIFIED_PANDAS`` and duckdb ``VERIFIED_DUCKDB`` (see ``versions``).

    official(gold, pred, spec) -> Verdict     # gold/pred: str | Path | duckdb.DuckDBPyConnection
    strict(gold, pred, spec) -> Verdict
    score(gold, pred, spec) -> Score          # both, over one load of the data
    explain(gold, pred, spec) -> Explanation  # people and logs only

Gold-side failures raise GoldTableError (a HarvestError); submission-side failures are a 0 with a reason.
"""

from __future__ import annotations

from dbt_harvest.core.scorer.errors import GoldFileError, GoldTableError
from dbt_harvest.core.scorer.explain import Explanation, explain
from dbt_harvest.core.scorer.grading import grade
from dbt_harvest.core.scorer.source import Source
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.scorer.verdict import Score, TableVerdict, Verdict
from dbt_harvest.core.scorer.versions import VERIFIED_DUCKDB, VERIFIED_PANDAS, versions_verified


def official(gold: Source, pred: Source, spec: GradingSpec) -> Verdict:
    """The official Spider 2.0-DBT verdict (exact mirror, laxness included)."""
    return grade(gold, pred, spec, want_strict=False).official


def strict(gold: Source, pred: Source, spec: GradingSpec) -> Verdict:
    """Row-aligned multiset equality of the graded columns (names ignored, same tolerance)."""
    return grade(gold, pred, spec, want_strict=True).strict


def score(gold: Source, pred: Source, spec: GradingSpec) -> Score:
    """Both verdicts, sharing one load of each table."""
    graded = grade(gold, pred, spec, want_strict=True)
    return Score(graded.official, graded.strict)


__all__ = [
    "Explanation",
    "GoldFileError",
    "GoldTableError",
    "GradingSpec",
    "Score",
    "TableVerdict",
    "VERIFIED_DUCKDB",
    "VERIFIED_PANDAS",
    "Verdict",
    "explain",
    "official",
    "score",
    "strict",
    "versions_verified",
]

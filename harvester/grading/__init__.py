"""Grading an edited task, in one place: ``grade(task, edits, mode)`` -> ``Graded``.

The GRPO reward, the eval environment's ``validate``/``submit`` and the audit (through the environment)
call ``edited.grade``; its strategies are the fast compiled-SQL path (``fast.py``: edited models re-run
in a locked-down DuckDB) and the sandboxed dbt builds (incremental ``dbt``, full ``naive``), chosen in
that one function. ``verdict.Graded`` is the one verdict type on an edited task. The mint's confirmation
builds its candidates' variants in a warm sandbox of its own (``harvester.mint.confirm``) and scores
them with the same scorer; see docs/DESIGN.md "Grading an edited task".
"""

from dbt_harvest.harvester.grading.edited import (
    MODES,
    RewardBuildError,
    build_and_score,
    build_and_score_dbt,
    grade,
    release,
)
from dbt_harvest.harvester.grading.fast import Unsupported
from dbt_harvest.harvester.grading.verdict import Graded

__all__ = [
    "MODES",
    "Graded",
    "RewardBuildError",
    "Unsupported",
    "build_and_score",
    "build_and_score_dbt",
    "grade",
    "release",
]

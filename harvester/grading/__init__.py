"""Grading an edited task, in one place: the GRPO reward and the eval environment both call it.

``edited.fast_grade`` re-runs edited models as compiled SQL in a locked-down DuckDB (``fast.py``) and
raises ``Unsupported`` when only dbt can answer; ``edited.build_and_score_with`` adds the sandboxed dbt
strategies (incremental, naive) behind it. The mint's confirmation still builds its own variants
(``harvester.mint.confirm``); see docs/DESIGN.md "Grading an edited task".
"""

from harvester.grading.edited import (
    Graded,
    RewardBuildError,
    build_and_score,
    build_and_score_dbt,
    build_and_score_with,
    fast_grade,
    release,
)
from harvester.grading.fast import Unsupported

__all__ = ["Graded", "RewardBuildError", "Unsupported", "build_and_score", "build_and_score_dbt",
           "build_and_score_with", "fast_grade", "release"]

"""validate and submit without a dbt build, when the agent's edits allow it.

Each ``validate`` and ``submit`` used to be a full sandboxed ``dbt seed`` + ``dbt build`` (about 10 s);
agentic RL and every audit episode pay it on each call. When every file the agent wrote is a plain SQL
model edited outside Jinja, the same answer comes from the grading fast path
(``harvester.grading.fast_grade``): the edited models and their descendants re-run as compiled SQL over
the pin's built state (with the rebuilt relations dropped first, so the answer cannot be read from
state), the project's dbt tests run over the result as dbt runs them, and the scorer grades it against
gold. Anything else (a macro, YAML, seed or new file written; Jinja written; unit tests, hooks or
snapshots in the project; a failing test after which dbt would skip models; a pin without built state
on this machine) returns None and the caller builds with dbt, as before.

The edits are what the agent wrote through ``write_file`` (the workspace guard undoes every other change
to the project), so nothing here reads the workspace the sandboxed child has written to.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from core.errors import HarvestError
from core.task_record import TaskRecord
from eval.env.grading import Submission
from eval.env.tools import validate_answer


def _graded(task: TaskRecord, edits: Mapping[str, str], capture_to: Path | None):  # type: ignore[no-untyped-def]
    from harvester.grading import Unsupported, fast_grade

    try:
        return fast_grade(task, edits, tests=True, capture_to=capture_to)
    except (Unsupported, HarvestError, OSError):
        return None


def validate_fast(task: TaskRecord, edits: Mapping[str, str]) -> str | None:
    """The ``validate`` observation from the fast path, or None when only a dbt build can answer."""
    graded = _graded(task, edits, None)
    if graded is None:
        return None
    return validate_answer(graded.built, graded.first_error, graded.tests_total, graded.failed_tests)


def submit_fast(task: TaskRecord, edits: Mapping[str, str], capture_to: Path) -> Submission | None:
    """The graded submission from the fast path (graded tables written to ``capture_to`` for the audit's
    explainer), or None when only a dbt build can answer."""
    started = time.perf_counter()
    graded = _graded(task, edits, capture_to)
    if graded is None:
        return None
    return Submission(
        built=graded.built, first_error=graded.first_error, tests_total=graded.tests_total,
        tests_failed=graded.tests_failed, failed_tests=tuple(sorted(graded.failed_tests)),
        official=graded.official if graded.built else 0, strict=graded.strict if graded.built else 0,
        capture=graded.capture if graded.built else None, wall_s=time.perf_counter() - started,
    )


__all__ = ["submit_fast", "validate_fast"]

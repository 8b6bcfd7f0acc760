"""validate and submit through the one grading path (``harvester.grading.grade``), from the agent's edits.

Each ``validate`` and ``submit`` used to be a full sandboxed ``dbt seed`` + ``dbt build`` of the agent's
workspace (about 10 s); agentic RL and every audit episode pay it on each call. The environment now
grades what the agent wrote the way the reward and the mint's checks do: ``grade(task, edits, "fast",
fallback="naive", tests=True)``. When every file the agent wrote is a plain SQL model edited outside
Jinja, the fast path answers (the edited models and their descendants re-run as compiled SQL over the
pin's built state with the rebuilt relations dropped first, the project's dbt tests run over the result
as dbt runs them, the scorer grades it against gold); anything else (a macro, YAML, seed or new file
written; Jinja written; unit tests, hooks or snapshots in the project; a failing test after which dbt
would skip models) is a fresh sandboxed seed + build of the pin with the edits — the full build, so that
every dbt test of the project is reported, as the workspace build reported them; the environment runs
those builds in its warm sandboxed child (``harvester.grading.warm``) instead of a cold one each. Only a pin without
built state on this machine returns None: the caller then builds the agent's workspace itself.

The edits are what the agent wrote through ``write_file`` (the workspace guard undoes every other change
to the project), so nothing here reads the workspace the sandboxed child has written to.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env.tools import validate_answer
from dbt_harvest.harvester.grading import Graded, Unsupported, grade
from dbt_harvest.harvester.grading.warm import WarmBuilds
from dbt_harvest.harvester.sandbox import Limits

#: the strategy that answers when the fast path cannot (None: report that only dbt can answer)
FALLBACK = "naive"


def graded_edits(
    task: TaskRecord,
    edits: Mapping[str, str],
    *,
    capture_to: Path | None = None,
    limits: Limits | None = None,
    fallback: str | None = FALLBACK,
    warm: WarmBuilds | None = None,
) -> Graded | None:
    """The edits graded with the project's dbt tests, or None when this machine cannot grade them here (no
    built state of the pin) or, with ``fallback=None``, when only a dbt build can answer. ``warm``: the
    environment's warm sandboxed child, where the fallback builds run (None: a cold child per build)."""
    try:
        return grade(
            task, edits, "fast", fallback=fallback, tests=True, capture_to=capture_to, limits=limits, warm=warm
        )
    except (Unsupported, HarvestError, OSError):
        return None


def validate_edits(
    task: TaskRecord,
    edits: Mapping[str, str],
    *,
    limits: Limits | None = None,
    fallback: str | None = FALLBACK,
    warm: WarmBuilds | None = None,
) -> str | None:
    """The ``validate`` observation, or None (see ``graded_edits``)."""
    graded = graded_edits(task, edits, limits=limits, fallback=fallback, warm=warm)
    if graded is None:
        return None
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import pin_path, read_pin

    known = read_pin(pin_path(task.pin, pins_dir())).excluded_tests  # the grade above read it: it is there
    return validate_answer(graded.built, graded.first_error, graded.tests_total, graded.failed_tests, known=known)


def submit_edits(
    task: TaskRecord,
    edits: Mapping[str, str],
    capture_to: Path,
    *,
    limits: Limits | None = None,
    warm: WarmBuilds | None = None,
) -> Graded | None:
    """The graded submission (graded tables written to ``capture_to`` for the audit's explainer), or None
    (see ``graded_edits``)."""
    return graded_edits(task, edits, capture_to=capture_to, limits=limits, warm=warm)


__all__ = ["FALLBACK", "graded_edits", "submit_edits", "validate_edits"]

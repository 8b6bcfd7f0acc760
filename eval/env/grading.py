"""The grade at submit: one more clean sandboxed build of the workspace, scored against the task's gold.

The agent's own build database and target folder are removed first (through ``safe_fs``: beneath the
workspace, no link followed, so a project folder swapped for a link cannot make this delete a host
folder), so nothing the agent left there (an incremental model's state, a stale relation) can reach
the graded build. The scorer's verdicts
(official and strict) become bits; their reasons stay out of this module's output on purpose: the
explainer is for people and is run by the audit, never by the environment the agent talks to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from eval.env.tools import DUCKDB_SCOPE, LOG_NAME, RunSettings
from eval.env.workspace import TaskWorkspace
from core.task_record import TaskRecord
from harvester.sandbox import safe_fs


@dataclass(frozen=True)
class Submission:
    """What the final build and the scorer said about a submitted workspace."""

    built: bool
    first_error: str
    tests_total: int
    tests_failed: int
    failed_tests: tuple[str, ...]
    official: int
    strict: int
    capture: Path | None  # the captured tables of the submission (the host's copy) for the audit
    wall_s: float

    @property
    def local_checks_pass(self) -> bool:
        return self.built and self.tests_failed == 0

    def to_dict(self) -> dict[str, object]:
        return {
            "built": self.built, "first_error": self.first_error, "tests_total": self.tests_total,
            "tests_failed": self.tests_failed, "failed_tests": list(self.failed_tests),
            "local_checks_pass": self.local_checks_pass, "official": self.official, "strict": self.strict,
            "wall_s": round(self.wall_s, 3),
        }


def _clean_build_state(ws: TaskWorkspace) -> None:
    """Remove the agent's database, capture and target folder, never following a link on the way."""
    target = "target" if ws.project_dir in ("", ".") else f"{ws.project_dir}/target"
    for name in (ws.db_file, ws.db_file + ".wal", "gold.duckdb", "gold.duckdb.wal", target):
        safe_fs.remove(ws.root, name)


def grade(task: TaskRecord, ws: TaskWorkspace, settings: RunSettings) -> Submission:
    """Build the workspace once more (seed, build, capture) and score it; a failed build scores 0 and 0."""
    from core.scorer import score
    from harvester.build import build_workspace
    from harvester.gold import gold_path

    started = time.perf_counter()
    _clean_build_state(ws)
    result = build_workspace(
        ws.root, ws.project_dir, ws.profile, ws.schema, ws.clock, sandboxed=settings.sandboxed,
        limits=settings.limits, log_path=ws.root / LOG_NAME, capture=True, duckdb_scope=DUCKDB_SCOPE,
    )
    official = strict = 0
    if result.models_ok and result.gold_file is not None:
        verdicts = score(gold_path(task.gold_sha256), result.gold_file, task.grading)
        official, strict = verdicts.official.score, verdicts.strict.score
    return Submission(
        built=result.models_ok, first_error=result.first_error, tests_total=result.tests_total,
        tests_failed=result.tests_failed, failed_tests=result.failed_tests, official=official, strict=strict,
        capture=result.gold_file if result.models_ok else None, wall_s=time.perf_counter() - started,
    )

"""The grade at submit when the pin's built state is not on this machine: one more clean sandboxed build
of the agent's workspace, scored against the task's gold (otherwise ``graded_edits`` grades the edits
through ``harvester.grading.grade``, the path the reward and the audit share).

The agent's own build database and target folder are removed first (through ``safe_fs``: beneath the
workspace, no link followed, so a project folder swapped for a link cannot make this delete a host
folder), so nothing the agent left there (an incremental model's state, a stale relation) can reach
the graded build. The scorer's verdicts (official and strict) become bits (``Graded``, the one verdict
type); their reasons never reach the agent (``Graded.to_dict`` leaves them out): the explainer is for
people and is run by the audit, never by the environment the agent talks to.
"""

from __future__ import annotations

import time

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env.tools import DUCKDB_SCOPE, LOG_NAME, RunSettings
from dbt_harvest.eval.env.workspace import TaskWorkspace
from dbt_harvest.harvester.grading.verdict import Graded, grade_build
from dbt_harvest.harvester.sandbox import safe_fs


def _clean_build_state(ws: TaskWorkspace) -> None:
    """Remove the agent's database, capture and target folder, never following a link on the way."""
    target = "target" if ws.project_dir in ("", ".") else f"{ws.project_dir}/target"
    for name in (ws.db_file, ws.db_file + ".wal", "gold.duckdb", "gold.duckdb.wal", target):
        safe_fs.remove(ws.root, name)


def grade(task: TaskRecord, ws: TaskWorkspace, settings: RunSettings) -> Graded:
    """Build the workspace once more (seed, build, capture) and score it; a failed build scores 0 and 0."""
    from dbt_harvest.harvester.build import build_workspace
    from dbt_harvest.harvester.gold import gold_path

    started = time.perf_counter()
    _clean_build_state(ws)
    result = build_workspace(
        ws.root,
        ws.project_dir,
        ws.profile,
        ws.schema,
        ws.clock,
        sandboxed=settings.sandboxed,
        limits=settings.limits,
        log_path=ws.root / LOG_NAME,
        capture=True,
        db_file=ws.db_file,
        duckdb_scope=DUCKDB_SCOPE,
        exclude_tests=ws.exclude_tests,
        toolchain=ws.toolchain,
    )
    return grade_build(
        gold_path(task.gold_sha256),
        result.gold_file,
        task.grading,
        built_ok=result.models_ok,
        first_error=result.first_error,
        tests_total=result.tests_total,
        failed_tests=result.failed_tests,
        capture=result.gold_file if result.models_ok else None,
        path="workspace",
        seconds=time.perf_counter() - started,
    )

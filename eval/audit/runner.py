"""Running a driver over a task set: one episode per task, in parallel, resumable, each verdict saved.

An episode that raises is recorded as ``crashed`` (with the error) and scores 0; a task with no verdict
at report time is ``missing`` and scores 0. After an episode the audit, and only the audit, runs the
scorer's explainer on the submission (for people reading the run folder), then discards the workspace.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.audit.rundir import RunDir, task_entry, task_set_sha256
from dbt_harvest.eval.drivers.base import Driver
from dbt_harvest.eval.env.benchmark import BenchmarkTasks
from dbt_harvest.eval.env.environment import EnvSettings, RepairEnvironment
from dbt_harvest.eval.env.episode import EpisodeLimits, EpisodeOutcome
from dbt_harvest.eval.env.tools import RunSettings
from dbt_harvest.eval.ladder import classify

CRASHED = "crashed"


@dataclass(frozen=True)
class AuditOptions:
    workers: int = 2
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    run: RunSettings = field(default_factory=RunSettings)
    scratch: Path | None = None
    retry_crashed: bool = True
    #: another benchmark's tasks (their workspaces and grading: ``eval/env/benchmark.py``); None: the corpus's
    benchmark: BenchmarkTasks | None = None
    #: the task kinds the audit was restricted to (``harvest audit --kind``, train and dev only); (): every kind
    kinds: tuple[str, ...] = ()


def _explain(task: TaskRecord, outcome: EpisodeOutcome, benchmark: BenchmarkTasks | None = None) -> str:
    """Why the submission scored what it did, for people (the scorer's explainer), else the episode's end."""
    submission = outcome.submission
    if submission is None:
        return f"no submission ({outcome.status})"
    if not submission.built:
        return f"the final build fails: {submission.first_error}"
    from dbt_harvest.core.scorer import explain
    from dbt_harvest.harvester.gold import gold_path

    try:
        assert submission.capture is not None
        gold = benchmark.gold(task) if benchmark is not None else gold_path(task.gold_sha256)
        return explain(gold, submission.capture, task.grading).to_text()
    except Exception as exc:
        return f"(explainer failed: {type(exc).__name__}: {exc})"


def verdict_record(task: TaskRecord, outcome: EpisodeOutcome, reason: str, wall_s: float) -> dict[str, Any]:
    ladder = classify(outcome)
    return {
        **task_entry(task),
        **outcome.to_dict(),
        "rung": ladder.rung,
        "rung_label": ladder.label,
        "reason": reason,
        "wall_s": round(wall_s, 3),
    }


def play_one(
    task: TaskRecord, driver: Driver, settings: EnvSettings, benchmark: BenchmarkTasks | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Play one episode; never raises (a crash is a verdict with status 'crashed')."""
    started = time.perf_counter()
    env = RepairEnvironment(benchmark if benchmark is not None else {task.instance_id: task}, settings)
    transcript: list[dict[str, Any]] = []
    try:
        with env:
            observation = env.reset(instance_id=task.instance_id)
            try:
                driver.play(env, task, observation)
                if not env.episode.done:
                    env.episode.abandon("the driver returned without submitting")
                outcome = env.outcome
                reason = _explain(task, outcome, benchmark)
            finally:
                transcript = list(env.episode.transcript)
        return verdict_record(task, outcome, reason, time.perf_counter() - started), transcript
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        transcript.append({"kind": "crash", "error": error, "traceback": traceback.format_exc()[-4000:]})
        return {
            **task_entry(task),
            "status": CRASHED,
            "error": " ".join(error.split())[:600],
            "official": 0,
            "strict": 0,
            "rung": 0,
            "rung_label": "missing or crashed",
            "turns": 0,
            "invalid_actions": 0,
            "submission": None,
            "reason": "the episode crashed",
            "wall_s": round(time.perf_counter() - started, 3),
        }, transcript


def describe_run(
    split: str, tasks: list[TaskRecord], driver: Driver, options: AuditOptions, sealed: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "split": split,
        "driver": driver.describe(),
        "task_set_sha256": task_set_sha256(tasks),
        "tasks": [task_entry(t) for t in sorted(tasks, key=lambda t: t.instance_id)],
        "limits": {"max_turns": options.limits.max_turns, "repeat_limit": options.limits.repeat_limit},
        "sandboxed": options.run.sandboxed,
        **(
            {"benchmark": options.benchmark.name, "clock": getattr(options.benchmark, "clock", "")}
            if options.benchmark is not None
            else {}
        ),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sealed": sealed,
        # None: every kind of the split (also what a run folder written before the filter existed means)
        "kinds": sorted(options.kinds) or None,
    }


def pending(run: RunDir, tasks: list[TaskRecord], retry_crashed: bool) -> list[TaskRecord]:
    """The tasks still to play: no verdict yet, or (by default) a crashed one."""
    todo = []
    for task in tasks:
        verdict = run.read_episode(task.instance_id)
        if verdict is None or (retry_crashed and verdict.get("status") == CRASHED):
            todo.append(task)
    return todo


def kept_verdicts(run: RunDir, tasks: list[TaskRecord], todo: list[TaskRecord]) -> list[dict[str, Any]]:
    """The verdicts the run folder holds for the tasks that are not played again (a resumed run)."""
    playing = {task.instance_id for task in todo}
    verdicts = (run.read_episode(task.instance_id) for task in tasks if task.instance_id not in playing)
    return [verdict for verdict in verdicts if verdict is not None]


def run_audit(
    run: RunDir,
    split: str,
    tasks: list[TaskRecord],
    driver: Driver,
    options: AuditOptions,
    *,
    pins: Path,
    sealed: dict[str, Any] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    kept: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[TaskRecord]:
    """Play every pending task of the run; return the tasks that were played this time. ``progress`` gets
    each new verdict as its episode ends; ``kept``, once before any episode, the verdicts a resumed run
    folder already holds and that are not played again.

    The driver is prepared first (model loaded, endpoint checked): a driver that cannot play raises
    DriverError here, before the run folder is started or any episode is played.
    """
    driver.prepare()
    run.start(describe_run(split, tasks, driver, options, sealed))
    todo = pending(run, sorted(tasks, key=lambda t: t.instance_id), options.retry_crashed)
    if kept is not None:
        kept(kept_verdicts(run, tasks, todo))
    settings = EnvSettings(pins=pins, scratch=options.scratch, run=options.run, limits=options.limits)
    workers = max(1, options.workers if driver.parallel_safe else 1)

    def one(task: TaskRecord) -> dict[str, Any]:
        verdict, transcript = play_one(task, driver, settings, options.benchmark)
        run.write_episode(verdict, transcript)
        return verdict

    if workers == 1:
        for task in todo:
            verdict = one(task)
            if progress:
                progress(verdict)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in as_completed([pool.submit(one, task) for task in todo]):
                verdict = future.result()
                if progress:
                    progress(verdict)
    return todo

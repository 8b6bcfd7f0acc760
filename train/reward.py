"""The single-turn reward: apply a completion to a task's broken project, build, score against gold.

What GRPO climbs must be what evaluation measures, so the reward IS the official verdict of a real
build (1 or 0), with the strict row-aligned verdict logged beside it; no shaping unless a config asks
for it by name (recorded in the manifest). The pieces:

- ``RewardResult`` / ``RewardBackend``: the contract every backend meets (score one completion).
- ``BuildAndScore``: the HARVESTER-side dependency of the real backend. Given a task and the edited
  files (repo-relative path -> full new text), it materialises the task workspace (pinned repo at the
  task's commit + broken_patch + vendored packages), overlays the edits, builds the affected models
  sandboxed, and scores the result against the task's gold (core.scorer). It returns the one verdict
  type on an edited task, ``harvester.grading.Graded``.
- ``EditingBackend``: the real single-turn backend: parses the completion (train/completion.py), turns
  malformed answers and no-op answers into 0 without building, hands the rest to a BuildAndScore.
- ``make_reward_func``: the trl reward function (list in, list out) over a scorer of many rollouts
  (a RewardPool), with per-run counters for the manifest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.harvester.grading.verdict import Graded
from dbt_harvest.train.completion import MalformedCompletion, completion_text, missing_files, parse_completion
from dbt_harvest.train.project import ProjectSource


@dataclass(frozen=True)
class RewardResult:
    """One rollout's reward: the official bit, the strict bit, wall seconds, and why (for humans)."""

    official: int
    strict: int
    seconds: float
    reason: str = ""


class RewardBackend(Protocol):
    def score_completion(self, task: TaskRecord, completion: str) -> RewardResult:
        """Score one completion for one task; never raise for a bad completion (score 0 instead)."""
        ...


class BuildAndScore(Protocol):
    def __call__(self, task: TaskRecord, edits: Mapping[str, str]) -> Graded:
        """Harvester side: build the task's broken project with ``edits`` applied, score against gold."""
        ...


class EditingBackend:
    """The real single-turn backend: completion -> edits -> BuildAndScore -> RewardResult."""

    def __init__(self, project: ProjectSource, build_and_score: BuildAndScore) -> None:
        self.project = project
        self.build_and_score = build_and_score

    def score_completion(self, task: TaskRecord, completion: str) -> RewardResult:
        start = time.perf_counter()
        files = self.project.broken_files(task)
        try:
            edits = parse_completion(completion, files, creatable=missing_files(task))
        except MalformedCompletion as exc:
            return RewardResult(0, 0, time.perf_counter() - start, f"malformed: {exc}")
        if all(files.get(path) == text for path, text in edits.items()):
            return RewardResult(0, 0, time.perf_counter() - start, "no change: the broken project scores 0")
        try:
            verdict = self.build_and_score(task, edits)
        except Exception as exc:  # a failed build is a 0 with its reason, never a crashed training step
            return RewardResult(0, 0, time.perf_counter() - start, f"build or score failed: {_one_line(exc)}")
        return RewardResult(int(verdict.official), int(verdict.strict), time.perf_counter() - start, verdict.reason)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def shaped(result: RewardResult, shaping: str) -> float:
    """The scalar GRPO sees. ``none``: the official bit. ``strict_bonus``: 1 if both, 0.5 if official only."""
    if shaping == "none":
        return float(result.official)
    if shaping == "strict_bonus":
        return 0.5 * result.official + 0.5 * (result.official and result.strict)
    raise ValueError(f"unknown reward shaping {shaping!r}")


@dataclass
class RewardTally:
    """Counters over a run's rollouts, for logs and the manifest's final metrics."""

    rollouts: int = 0
    official: int = 0
    strict: int = 0
    timeouts: int = 0
    malformed: int = 0
    seconds: list[float] = field(default_factory=list)

    def add(self, result: RewardResult) -> None:
        self.rollouts += 1
        self.official += result.official
        self.strict += result.strict
        self.timeouts += result.reason.startswith("timeout")
        self.malformed += result.reason.startswith("malformed")
        self.seconds.append(result.seconds)

    def merge(self, other: RewardTally) -> None:
        """Add another tally's counts (another process's rollouts) to this one."""
        self.rollouts += other.rollouts
        self.official += other.official
        self.strict += other.strict
        self.timeouts += other.timeouts
        self.malformed += other.malformed
        self.seconds.extend(other.seconds)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.seconds)
        n = len(ordered)
        return {
            "reward_rollouts": self.rollouts,
            "reward_official_mean": self.official / n if n else 0.0,
            "reward_strict_mean": self.strict / n if n else 0.0,
            "reward_timeouts": self.timeouts,
            "reward_malformed": self.malformed,
            "reward_seconds_median": ordered[n // 2] if n else 0.0,
            "reward_seconds_p95": ordered[min(n - 1, int(0.95 * n))] if n else 0.0,
        }


def gather_tally(tally: RewardTally) -> RewardTally:
    """The tally of every process of a torchrun/accelerate run (each scored its own rollouts), on every rank.

    A collective call: every rank must make it. Without an initialised process group, ``tally`` itself.
    """
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is part of the train extra
        return tally
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tally
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, tally)
    total = RewardTally()
    for part in parts:
        total.merge(part)
    return total


def tallied_environment(environment: type[Any], tally: RewardTally) -> type:
    """A subclass of a multi-turn environment class whose ``get_reward`` also counts the rollout in ``tally``.

    trl calls ``get_reward()`` once per rollout when the environment owns its reward, and never passes
    the reward through a reward function, so this is where multi-turn rollouts are counted: the official
    bit is the reward, the strict bit comes from the episode's outcome where the environment has one
    (``RepairEnvironment.outcome``), and the seconds run from ``reset`` to ``get_reward``.
    """

    def reset(self: Any, **row: Any) -> Any:
        self._tally_started = time.perf_counter()
        return environment.reset(self, **row)

    def get_reward(self: Any) -> float:
        reward = environment.get_reward(self)
        official = int(float(reward) >= 1.0)
        try:
            strict = int(self.outcome.strict)
        except Exception:
            strict = official
        reason = "" if getattr(self, "_tally_started", None) is not None else "no reset"
        seconds = time.perf_counter() - getattr(self, "_tally_started", time.perf_counter())
        tally.add(RewardResult(official, strict, seconds, reason))
        return reward

    reset.__doc__ = environment.reset.__doc__
    get_reward.__doc__ = environment.get_reward.__doc__
    return type(
        environment.__name__,
        (environment,),
        {
            "reset": reset,
            "get_reward": get_reward,
            "__module__": environment.__module__,
            "__doc__": environment.__doc__,
        },
    )


ScoreMany = Callable[[Sequence[tuple[TaskRecord, str]]], list[RewardResult]]


def make_reward_func(
    score_many: ScoreMany, tasks: Mapping[str, TaskRecord], shaping: str = "none", tally: RewardTally | None = None
) -> Callable[..., list[float]]:
    """A trl reward function: rows carry ``instance_id``; rewards come from ``score_many`` (a pool)."""
    counts = tally if tally is not None else RewardTally()

    def dbt_official_reward(
        prompts: list[Any], completions: list[Any], instance_id: list[str], **kwargs: Any
    ) -> list[float]:
        items = [(tasks[i], completion_text(c)) for i, c in zip(instance_id, completions, strict=True)]
        results = score_many(items)
        for result in results:
            counts.add(result)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and results:
            log_metric("reward/strict", sum(r.strict for r in results) / len(results))
            log_metric("reward/seconds", max(r.seconds for r in results))
        return [shaped(r, shaping) for r in results]

    # a function attribute: trl names the reward's logged metrics after the function's __name__, so it stays one
    dbt_official_reward.tally = counts  # type: ignore[attr-defined]
    return dbt_official_reward

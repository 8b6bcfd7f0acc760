"""`harvest train grpo`: LoRA GRPO with trl's GRPOTrainer, rewarded by the official score of a build.

Two modes ([grpo] mode):

- ``single_turn``: the prompt is the repair prompt of SFT; each completion is scored by a
  RewardBackend running in a RewardPool (warm worker processes, a per-rollout timeout counting as 0).
  Backends ([reward] backend): ``harvester`` — EditingBackend over the harvester's sandboxed
  build+score (``harvester.grading.edited.build_and_score``, see train/reward.py); ``duckdb_sql`` —
  DuckDBSqlBackend for plain-SQL projects (train/sql_backend.py).
- ``multi_turn``: trl's ``environment_factory`` with the eval tool environment ([grpo] environment,
  ``module:Class``, constructed as ``Class(tasks)`` with the run's train tasks by id): the environment's
  public methods are the tools, ``reset(**row)`` starts the episode of the row's task, ``get_reward()``
  returns the official score of what was submitted.

No reward shaping unless [reward] shaping names one; the manifest records the shaping, the reward
tally (official and strict means, timeouts, malformed answers, seconds per rollout) over the rollouts of
every process (multi-turn rollouts are counted where trl asks the environment for its reward).
"""

from __future__ import annotations

import functools
import importlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal, overload

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.train.configs import RunConfig
from dbt_harvest.train.errors import TrainDataError, TrainError
from dbt_harvest.train.gate import GateReport, planned_steps, run_gate
from dbt_harvest.train.pool import BackendFactory, RewardPool
from dbt_harvest.train.project import ProjectSource
from dbt_harvest.train.reward import EditingBackend, RewardTally, gather_tally, make_reward_func, tallied_environment
from dbt_harvest.train.runner import (
    CHECKPOINTS_DIR,
    RunResult,
    finish_run,
    latest_checkpoint,
    logs_to_stderr,
    prepare_run_dir,
    trl_arguments,
)
from dbt_harvest.train.sft import default_project
from dbt_harvest.train.sft_data import dataset_sha256, grpo_prompt_rows, load_train_tasks


def backend_factory(config: RunConfig, project: ProjectSource) -> BackendFactory:
    """A picklable factory of the configured RewardBackend (workers call it once each)."""
    assert config.reward is not None
    if config.reward.backend == "duckdb_sql":
        from dbt_harvest.train.sql_backend import DuckDBSqlBackend

        return functools.partial(DuckDBSqlBackend, project, Path(config.reward.inputs))
    from dbt_harvest.harvester.grading.edited import build_and_score

    return functools.partial(EditingBackend, project, build_and_score)


def load_environment_class(spec: str) -> type:
    module_name, _, class_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise TrainError(
            f"[grpo] environment = {spec!r} cannot be imported ({exc}); is the eval environment installed?"
        ) from None


@overload
def run_grpo(
    config: RunConfig,
    project: ProjectSource | None = None,
    factory: BackendFactory | None = None,
    gate: Literal[False] = False,
) -> RunResult: ...
@overload
def run_grpo(
    config: RunConfig,
    project: ProjectSource | None = None,
    factory: BackendFactory | None = None,
    *,
    gate: Literal[True],
) -> GateReport: ...
@overload
def run_grpo(
    config: RunConfig,
    project: ProjectSource | None = None,
    factory: BackendFactory | None = None,
    gate: bool = False,
) -> RunResult | GateReport: ...


def run_grpo(
    config: RunConfig,
    project: ProjectSource | None = None,
    factory: BackendFactory | None = None,
    gate: bool = False,
) -> RunResult | GateReport:
    """Train (or, with ``gate``, measure one step of) the GRPO run the config describes."""
    from trl import GRPOConfig, GRPOTrainer

    from dbt_harvest.train.base_model import load_base, trainable_model

    assert config.grpo is not None and config.reward is not None
    started = time.perf_counter()
    project = project or default_project(config)
    tasks = load_train_tasks(config.data.tasks, config.data.max_rows)
    by_id = {t.instance_id: t for t in tasks}
    rows, tasks, left_out = _prompt_rows(config, tasks, project)
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    run_dir = prepare_run_dir(config, gate)
    base = load_base(config)
    scratch = tempfile.TemporaryDirectory(prefix="gate-") if gate else None
    output_dir = Path(scratch.name) if scratch else run_dir / CHECKPOINTS_DIR
    args = _grpo_arguments(GRPOConfig, config, output_dir, gate)
    tally = RewardTally()
    pool = _reward_pool(config, project, factory)
    trainer_kwargs = _reward_arguments(config, pool, by_id, tally)
    try:
        if pool is not None:
            pool.start()
        model, peft_config = trainable_model(config, base)
        trainer = logs_to_stderr(
            GRPOTrainer(
                model=model,
                args=args,
                train_dataset=dataset,
                processing_class=base.tokenizer,
                peft_config=peft_config,
                **trainer_kwargs,
            )
        )
        if gate:
            return _gate_step(trainer, config, len(rows))
        return _train(trainer, config, base, tasks, run_dir, started, left_out, tally)
    finally:
        if pool is not None:
            pool.close()
        if scratch:
            scratch.cleanup()


def _prompt_rows(
    config: RunConfig, tasks: list[TaskRecord], project: ProjectSource
) -> tuple[list[dict[str, Any]], list[TaskRecord], list[tuple[str, str]]]:
    """The GRPO dataset's rows, the tasks they come from and the tasks left out (id, why). Multi-turn: the
    task's report as the prompt, train tasks only (the firewall); single-turn: the SFT repair prompt, a task
    whose prompt cannot show its broken file left out (one stderr line each)."""
    left_out: list[tuple[str, str]] = []
    if config.grpo is not None and config.grpo.mode == "multi_turn":
        from dbt_harvest.corpora.firewall import require_train

        rows = [
            {"prompt": [{"role": "user", "content": t.problem_statement}], "instance_id": t.instance_id}
            for t in require_train(tasks)
        ]
        return rows, tasks, left_out
    rows = grpo_prompt_rows(tasks, project, config.data.max_file_chars, left_out=left_out)
    for _, why in left_out:
        print(f"left out (prompt) {why}", file=sys.stderr)
    if not rows:
        raise TrainDataError(
            f"no train task's prompt shows its broken file within [data] max_file_chars = "
            f"{config.data.max_file_chars}; raise it"
        )
    kept = {row["instance_id"] for row in rows}
    return rows, [t for t in tasks if t.instance_id in kept], left_out


def _grpo_arguments(cls: type, config: RunConfig, output_dir: Path, gate: bool) -> Any:
    """trl's GRPOConfig for the run: the common arguments and the [grpo] section's own."""
    assert config.grpo is not None
    g = config.grpo
    return trl_arguments(
        cls,
        config,
        output_dir,
        gate,
        num_generations=g.num_generations,
        max_completion_length=g.max_completion_length,
        temperature=g.temperature,
        beta=g.beta,
        max_tool_calling_iterations=g.max_tool_calling_iterations,
        log_completions=False,
    )


def _reward_pool(config: RunConfig, project: ProjectSource, factory: BackendFactory | None) -> RewardPool | None:
    """Single-turn: the (not yet started) pool of reward workers; multi-turn: None (the environment rewards)."""
    assert config.grpo is not None and config.reward is not None
    if config.grpo.mode == "multi_turn":
        return None
    return RewardPool(factory or backend_factory(config, project), config.reward.workers, config.reward.timeout_s)


def _reward_arguments(
    config: RunConfig, pool: RewardPool | None, by_id: dict[str, TaskRecord], tally: RewardTally
) -> dict[str, Any]:
    """GRPOTrainer's reward arguments: multi-turn, an environment factory; single-turn, a reward function
    scoring on the pool. Either way the rollouts are counted in ``tally``."""
    assert config.grpo is not None and config.reward is not None
    if pool is None:
        # trl calls the factory with no arguments; bind the run's own (firewalled, train-only) tasks so each
        # episode is reset on exactly the records the dataset was built from
        environment = tallied_environment(load_environment_class(config.grpo.environment), tally)
        return {"environment_factory": functools.partial(environment, by_id)}
    return {"reward_funcs": [make_reward_func(pool.score_many, by_id, config.reward.shaping, tally)]}


def _gate_step(trainer: Any, config: RunConfig, rows: int) -> GateReport:
    """One measured optimizer step, projected over the steps the full run would take."""
    assert config.grpo is not None
    t, g = config.train, config.grpo
    per_step = t.per_device_train_batch_size * t.gradient_accumulation_steps * trainer.args.world_size
    steps = planned_steps(t.max_steps, t.num_train_epochs, rows, g.num_generations, per_step)
    return run_gate(trainer, "grpo", steps, g.max_completion_length * per_step)


def _train(
    trainer: Any,
    config: RunConfig,
    base: Any,
    tasks: list[TaskRecord],
    run_dir: Path,
    started: float,
    left_out: list[tuple[str, str]],
    tally: RewardTally,
) -> RunResult:
    """Train (resuming from the newest checkpoint when asked) and finish the run: adapter, signed manifest
    with the timings, the rows left out and the reward tally over every process."""
    from dbt_harvest.train.base_model import init_adapter_record

    assert config.grpo is not None and config.reward is not None
    g = config.grpo
    train_start = time.perf_counter()
    resume = latest_checkpoint(run_dir) if config.train.resume else None
    trainer.train(resume_from_checkpoint=resume)
    tally = gather_tally(tally)  # every rank scored its own rollouts; the manifest counts them all
    timings = {
        "train_seconds": round(time.perf_counter() - train_start, 3),
        "total_seconds": round(time.perf_counter() - started, 3),
    }
    extra = {
        "resumed_from": resume,
        "init_adapter": init_adapter_record(config),
        "rows_left_out": [{"instance_id": i, "tokens": None, "reason": why} for i, why in left_out],
        "reward": {
            "mode": g.mode,
            "backend": config.reward.backend if g.mode != "multi_turn" else g.environment,
            "shaping": config.reward.shaping,
            "timeout_s": config.reward.timeout_s,
            "workers": config.reward.workers,
            **tally.summary(),
        },
    }
    return finish_run(trainer, config, base, tasks, dataset_sha256(tasks), timings, extra)

"""`harvest train sft`: LoRA supervised fine-tuning on train-split repair tasks with trl's SFTTrainer.

Single-turn rows train on the completion only (the corrected files); agentic rows train on assistant
turns only (the chat template's generation markers; trl swaps in its training template for known
model families). LoRA from [lora] (defaults r=8, alpha=16). Checkpoints go to RUN/checkpoints and a
rerun with the same config resumes from the newest one; the adapter is saved to RUN/adapter
(loadable with ``peft.PeftModel.from_pretrained(base, RUN/adapter)``) and the manifest beside it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, overload

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.train.budget import fit
from dbt_harvest.train.configs import RunConfig
from dbt_harvest.train.errors import TrainDataError
from dbt_harvest.train.gate import GateReport, planned_steps, run_gate
from dbt_harvest.train.project import GitProjectSource, PinnedProjectSource, ProjectSource
from dbt_harvest.train.runner import (
    CHECKPOINTS_DIR,
    RunResult,
    finish_run,
    latest_checkpoint,
    logs_to_stderr,
    prepare_run_dir,
    trl_arguments,
)
from dbt_harvest.train.sft_data import agentic_rows, dataset_sha256, load_train_tasks, single_turn_rows, to_dataset


def default_project(config: RunConfig) -> ProjectSource:
    """``[data] repos`` when set (a folder of git repositories by name), else each task's own pin."""
    from dbt_harvest.core.home import mirrors_dir, pins_dir

    if config.data.repos:
        return GitProjectSource(Path(config.data.repos))
    return PinnedProjectSource(pins_dir(), fallback=GitProjectSource(mirrors_dir()))


def training_rows(
    config: RunConfig, tasks: Sequence[TaskRecord], project: ProjectSource
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The run's SFT rows and the tasks left out before rendering (id, why): single-turn prompts (a task
    whose prompt cannot show its bug is left out, one stderr line each), or ``[data] variants``
    investigations per task, played in the environment or scripted (``[data] episodes``)."""
    d = config.data
    if d.format == "agentic":
        if d.episodes == "environment":
            from dbt_harvest.core.home import pins_dir
            from dbt_harvest.train.env_episodes import EnvironmentOracle

            oracle = EnvironmentOracle(pins=pins_dir())
            return agentic_rows(tasks, project, d.max_file_chars, episode=oracle, variants=d.variants), []
        return agentic_rows(tasks, project, d.max_file_chars, variants=d.variants), []
    left_out: list[tuple[str, str]] = []
    rows = single_turn_rows(tasks, project, d.max_file_chars, left_out=left_out)
    for _, why in left_out:
        print(f"left out (prompt) {why}", file=sys.stderr)
    if not rows:
        raise TrainDataError(
            f"no train task's prompt shows its broken file within [data] max_file_chars = {d.max_file_chars}; raise it"
        )
    return rows, left_out


@overload
def run_sft(config: RunConfig, project: ProjectSource | None = None, gate: Literal[False] = False) -> RunResult: ...
@overload
def run_sft(config: RunConfig, project: ProjectSource | None = None, *, gate: Literal[True]) -> GateReport: ...
@overload
def run_sft(config: RunConfig, project: ProjectSource | None = None, gate: bool = False) -> RunResult | GateReport: ...


def run_sft(config: RunConfig, project: ProjectSource | None = None, gate: bool = False) -> RunResult | GateReport:
    """Train (or, with ``gate``, measure one step of) the SFT run the config describes."""
    from trl import SFTConfig, SFTTrainer

    from dbt_harvest.train.base_model import init_adapter_record, load_base, trainable_model

    started = time.perf_counter()
    project = project or default_project(config)
    tasks = load_train_tasks(config.data.tasks, config.data.max_rows)
    rows, unrendered = training_rows(config, tasks, project)
    base = load_base(config)
    rows, cuts = fit(rows, base.tokenizer, config.train.max_length)  # before anything is written
    for item in cuts:
        print(f"left out (over the token budget) {item.line()}", file=sys.stderr)
    if cuts:
        print(
            f"{len(cuts)} of {len(rows) + len(cuts)} rows left out by [train] max_length = "
            f"{config.train.max_length}; {len(rows)} train",
            file=sys.stderr,
        )
    kept_ids = {row["instance_id"] for row in rows}
    tasks = [task for task in tasks if task.instance_id in kept_ids]
    dataset = to_dataset(rows)
    run_dir = prepare_run_dir(config, gate)
    data_seconds = time.perf_counter() - started
    scratch = tempfile.TemporaryDirectory(prefix="gate-") if gate else None
    output_dir = Path(scratch.name) if scratch else run_dir / CHECKPOINTS_DIR
    agentic = config.data.format == "agentic"
    args = trl_arguments(
        SFTConfig,
        config,
        output_dir,
        gate,
        max_length=config.train.max_length,
        assistant_only_loss=agentic,
        completion_only_loss=None if agentic else True,
    )
    model, peft_config = trainable_model(config, base)
    trainer = logs_to_stderr(
        SFTTrainer(
            model=model, args=args, train_dataset=dataset, processing_class=base.tokenizer, peft_config=peft_config
        )
    )
    try:
        if gate:
            t = config.train
            per_step = t.per_device_train_batch_size * t.gradient_accumulation_steps * trainer.args.world_size
            steps = planned_steps(t.max_steps, t.num_train_epochs, len(rows), 1, per_step)
            longest = max(len(r["input_ids"]) for r in trainer.train_dataset)
            return run_gate(trainer, "sft", steps, min(longest, t.max_length) * per_step)
        train_start = time.perf_counter()
        resume = latest_checkpoint(run_dir) if config.train.resume else None
        trainer.train(resume_from_checkpoint=resume)
        timings = {
            "data_seconds": round(data_seconds, 3),
            "train_seconds": round(time.perf_counter() - train_start, 3),
            "total_seconds": round(time.perf_counter() - started, 3),
        }
        return finish_run(
            trainer,
            config,
            base,
            tasks,
            dataset_sha256(tasks),
            timings,
            {
                "resumed_from": resume,
                "rows": len(rows),
                "init_adapter": init_adapter_record(config),
                "rows_left_out": [{"instance_id": i, "tokens": None, "reason": why} for i, why in unrendered]
                + [{"instance_id": c.instance_id, "tokens": c.total_tokens, "reason": c.reason} for c in cuts],
            },
        )
    finally:
        if scratch:
            scratch.cleanup()

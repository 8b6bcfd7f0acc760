"""The lifecycle every training run shares: run folder, trainer arguments, resume, adapter, manifest.

SFT and GRPO differ in data and trainer; everything around them is here once: the run folder
(``<output_dir>/<name>``) with a copy of the config, the trl arguments both trainers take from
``[train]``, resuming from the newest checkpoint, saving the LoRA adapter, and writing the signed
manifest. Under torchrun/accelerate only the main process writes the adapter and the manifest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from dbt_harvest.core import atomic
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.corpora.recipe import ADAPTER_DIR, CONFIG_NAME, MANIFEST_NAME, folder_sha256
from dbt_harvest.train.base_model import BaseModel
from dbt_harvest.train.configs import RunConfig
from dbt_harvest.train.errors import TrainError
from dbt_harvest.train.manifest import build_manifest, write_manifest

CHECKPOINTS_DIR = "checkpoints"


@dataclass(frozen=True)
class RunResult:
    """A finished run: its folder, its adapter, and its signed manifest as written ({} on other ranks)."""

    run_dir: Path
    adapter_dir: Path
    manifest: dict[str, Any]


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def prepare_run_dir(config: RunConfig, gate: bool = False) -> Path:
    """Create the run folder and store the config (not for a gate); refuse to overwrite a finished run."""
    _no_hub_telemetry()
    run_dir = config.run_dir
    if (run_dir / MANIFEST_NAME).exists():
        raise TrainError(f"run {run_dir} already finished (it has a manifest); choose a new [run] name")
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_main_process() and not gate:
        atomic.write_text(run_dir / CONFIG_NAME, tomli_w.dumps(config.raw))
    return run_dir


def _no_hub_telemetry() -> None:
    """trl reports every trainer it builds to the Hub (``HEAD /api/telemetry/trl/SFTTrainer``); a run sends
    nothing it was not asked to, unless the user set ``HF_HUB_DISABLE_TELEMETRY`` themselves. huggingface_hub
    reads the variable once at import, so its constant is set too."""
    if "HF_HUB_DISABLE_TELEMETRY" in os.environ:
        return
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_TELEMETRY = True


def latest_checkpoint(run_dir: Path) -> str | None:
    folder = run_dir / CHECKPOINTS_DIR
    found = sorted(
        folder.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1
    )
    return str(found[-1]) if found else None


def trainer_arguments(config: RunConfig, output_dir: Path, gate: bool = False) -> dict[str, Any]:
    """The trl/transformers arguments both trainers take from [run] and our [train] keys (the pass-through
    trl keys are added by :func:`trl_arguments`). ``report_to`` and the progress bar are not set here: they
    are trl's defaults unless the config's [train] sets them."""
    t = config.train
    args: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": t.max_steps,
        "num_train_epochs": t.num_train_epochs,
        "learning_rate": t.learning_rate,
        "per_device_train_batch_size": t.per_device_train_batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "warmup_steps": t.warmup_steps,
        "logging_steps": t.logging_steps,
        "save_strategy": "steps",
        "save_steps": t.save_steps,
        "save_total_limit": 3,
        "use_cpu": t.use_cpu,
        "bf16": t.bf16,
        "gradient_checkpointing": t.gradient_checkpointing,
        "seed": config.run.seed,
        "data_seed": config.run.seed,
        "ddp_find_unused_parameters": False,
    }
    if gate:  # one optimizer step, nothing saved
        args.update(max_steps=1, save_strategy="no")
    return args


def trl_arguments(cls: type, config: RunConfig, output_dir: Path, gate: bool = False, **kind_specific: Any) -> Any:
    """trl's config (``SFTConfig`` / ``GRPOConfig``) built by trl's own parser, HfArgumentParser.parse_dict,
    from our arguments, the kind's own (``kind_specific``) and last the [train] keys passed through to trl,
    which may override both (``save_total_limit``, ``completion_only_loss``…); --gate still means one step,
    nothing saved. trl's and transformers' own checks (an unknown ``report_to`` integration, bf16 without a
    GPU, a bad scheduler name) become one-line TrainConfigErrors."""
    import dataclasses

    from transformers import HfArgumentParser
    from transformers.hf_argparser import DataClassType

    from dbt_harvest.train.errors import TrainConfigError

    arguments = {**trainer_arguments(config, output_dir, gate), **kind_specific, **dict(config.train.trl)}
    names = {field.name for field in dataclasses.fields(cls)}
    if "activation_checkpointing" in names and "activation_checkpointing" not in arguments:
        # transformers 5.x renamed it (the old name still works, with a FutureWarning each run); our
        # [train] key keeps the name trl's docs use, and goes in under the new one where it exists
        arguments["activation_checkpointing"] = arguments.pop("gradient_checkpointing")
    if gate:
        arguments.update(max_steps=1, save_strategy="no")
    where = config.source or "config"
    try:
        (parsed,) = HfArgumentParser(DataClassType(cls)).parse_dict(arguments, allow_extra_keys=False)
    except (ValueError, TypeError, KeyError) as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise TrainConfigError(f"{where}: trl refused the [train] arguments: {message}") from None
    return parsed


def logs_to_stderr(trainer: Any) -> Any:
    """Send the trainer's per-step log lines to stderr, so stdout holds only the command's report.

    transformers prints each log dict to stdout: PrinterCallback (with ``disable_tqdm``) with print, and
    ProgressCallback (the default tqdm bar) with tqdm.write; a caller reading `harvest train … --json` must
    find one JSON object there, and nothing else. The bar itself already draws on stderr.
    """
    import sys

    from transformers import PrinterCallback, ProgressCallback, TrainerCallback

    def shown(logs: dict[str, Any]) -> dict[str, Any]:
        return {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in logs.items() if k != "total_flos"}

    class StderrPrinter(TrainerCallback):
        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if state.is_local_process_zero and logs is not None:
                print(shown(logs), file=sys.stderr, flush=True)

    class StderrProgress(ProgressCallback):
        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if state.is_world_process_zero and self.training_bar is not None and logs is not None:
                self.training_bar.write(str(shown(logs)), file=sys.stderr)

    callbacks = {type(c) for c in trainer.callback_handler.callbacks}
    if PrinterCallback in callbacks:
        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(StderrPrinter())
    if ProgressCallback in callbacks:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(StderrProgress())
    return trainer


def final_metrics(trainer: Any) -> dict[str, Any]:
    history = list(trainer.state.log_history)
    metrics: dict[str, Any] = {"global_step": trainer.state.global_step}
    for entry in history:
        for key, value in entry.items():
            if isinstance(value, (int, float)) and key not in ("step", "epoch"):
                metrics[key] = value  # last value wins: the final metrics of the run
    return metrics


def base_model_record(base: BaseModel, run_dir: Path) -> dict[str, str]:
    """What the manifest says about the base model: its id, the revision used, and where it was loaded from
    (relative to the run folder when it lives there, as tiny:// does), so an audit can load the same one."""
    local = Path(base.local_path)
    try:
        path = local.resolve().relative_to(run_dir.resolve()).as_posix() if local.is_dir() else base.local_path
    except ValueError:
        path = base.local_path
    return {"id": base.model_id, "revision": base.revision, "path": path}


def finish_run(
    trainer: Any,
    config: RunConfig,
    base: BaseModel,
    tasks: Sequence[TaskRecord],
    dataset_sha256: str,
    timings: dict[str, float],
    extra: dict[str, Any] | None = None,
) -> RunResult:
    """Save the adapter and write the signed manifest (main process only; others return the paths)."""
    run_dir = config.run_dir
    adapter_dir = run_dir / ADAPTER_DIR
    start = time.perf_counter()
    trainer.save_model(str(adapter_dir))
    if not is_main_process():
        return RunResult(run_dir, adapter_dir, {})
    timings = {**timings, "save_seconds": round(time.perf_counter() - start, 3)}
    body = build_manifest(
        run=config.run.name,
        kind=config.run.kind,
        status="completed",
        claim_under_test=config.run.claim_under_test,
        dataset={
            "sha256": dataset_sha256,
            "split": config.data.split,
            "tasks": len(tasks),
            "format": config.data.format,
        },
        config=config.raw,
        config_source=config.source,
        base_model=base_model_record(base, run_dir),
        adapter_sha256=folder_sha256(adapter_dir),
        seed=config.run.seed,
        timings=timings,
        metrics=final_metrics(trainer),
        **(extra or {}),
    )
    return RunResult(run_dir, adapter_dir, write_manifest(run_dir, body))

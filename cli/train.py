"""`harvest train sft|grpo --config FILE [--gate]` and `harvest train freeze RUN`.

Thin wrappers over train/ (and corpora.recipe for freezing): parse the TOML config (validated; keys that are
neither ours nor trl config fields refused), run or gate the trainer, print the run folder and the signed manifest's facts (or the gate
report), one line per fact. Torch, trl
and transformers are imported only when a command runs. Works unchanged under `torchrun` and
`accelerate launch` (only rank 0 prints and writes).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say, shown

if TYPE_CHECKING:  # the train modules import torch-side code only when a command runs
    from dbt_harvest.train.gate import GateReport
    from dbt_harvest.train.runner import RunResult

config_option = click.option(
    "--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Run config (TOML)."
)
gate_option = click.option(
    "--gate",
    is_flag=True,
    help="One optimizer step with the full config; report memory, step time, projected wall time; stop.",
)


def _epilog(kind: str) -> str:
    from dbt_harvest.train.configs import config_keys_help

    keys = "\n".join(f"  {line}" for line in config_keys_help(kind).splitlines())
    return (
        f"\b\nConfig keys (TOML sections):\n{keys}\n\n"
        f"\b\nExample configs: train/configs/{kind}-qwen-4b.toml in the repository (copy one and edit it; "
        f'[model] base = "tiny://" with [train] use_cpu = true, bf16 = false runs on a CPU). '
        "report_to and the progress bar are trl's defaults unless [train] sets them."
    )


@click.group(name="train")
def command() -> None:
    """LoRA SFT and GRPO on the train split, run manifests, frozen recipes."""


def _report(result: RunResult | GateReport, as_json: bool) -> None:
    """Print a finished run's folder, adapter and manifest facts, or a gate's report (rank 0 only)."""
    from dbt_harvest.train.gate import GateReport
    from dbt_harvest.train.runner import is_main_process

    if not is_main_process():
        return
    if isinstance(result, GateReport):
        if as_json:
            echo_json({"gate": result.to_dict()})
        else:
            for line in result.lines():
                say(line)
        return
    manifest = result.manifest
    if as_json:
        echo_json({"run_dir": str(result.run_dir), "adapter": str(result.adapter_dir), "manifest": manifest})
        return
    say(f"run: {shown(result.run_dir)}")
    say(f"adapter: {shown(result.adapter_dir)} (sha256 {manifest['adapter_sha256'][:12]})")
    say(f"manifest: {manifest['signature']['kind']} signed; steps {manifest['metrics'].get('global_step')}")


@command.command(name="sft", epilog=_epilog("sft"))
@config_option
@gate_option
@json_option
@fails_cleanly
def sft(config_path: Path, gate: bool, as_json: bool) -> None:
    """Supervised LoRA fine-tuning (single-turn or agentic rows) from a TOML config."""
    from dbt_harvest.train.configs import load_config
    from dbt_harvest.train.errors import TrainConfigError
    from dbt_harvest.train.sft import run_sft

    config = load_config(config_path)
    if config.run.kind != "sft":
        raise TrainConfigError(
            f"{config_path}: [run] kind = {config.run.kind!r}; use `harvest train {config.run.kind}`"
        )
    _report(run_sft(config, gate=gate), as_json)


@command.command(name="grpo", epilog=_epilog("grpo"))
@config_option
@gate_option
@json_option
@fails_cleanly
def grpo(config_path: Path, gate: bool, as_json: bool) -> None:
    """GRPO with the official score of a real build as reward, from a TOML config."""
    from dbt_harvest.train.configs import load_config
    from dbt_harvest.train.errors import TrainConfigError
    from dbt_harvest.train.grpo import run_grpo

    config = load_config(config_path)
    if config.run.kind != "grpo":
        raise TrainConfigError(
            f"{config_path}: [run] kind = {config.run.kind!r}; use `harvest train {config.run.kind}`"
        )
    _report(run_grpo(config, gate=gate), as_json)


@command.command(name="freeze")
@click.argument("run_dir", type=click.Path(exists=True, path_type=Path))
@click.option("--require-hmac", is_flag=True, help="Refuse a manifest that is not HMAC-signed.")
@json_option
@fails_cleanly
def freeze(run_dir: Path, require_hmac: bool, as_json: bool) -> None:
    """Freeze a finished run (RUN_DIR: runs/<name>, or its manifest.json): verify its signed manifest,
    adapter and config, and write RUN_DIR/FROZEN.json, what `harvest audit --split test --recipe RUN_DIR`
    requires. Once per run."""
    from dbt_harvest.corpora.recipe import freeze as freeze_run
    from dbt_harvest.corpora.recipe import resolve_run_dir

    recipe = freeze_run(resolve_run_dir(run_dir), require_hmac=require_hmac)
    if as_json:
        echo_json(recipe.to_dict())
    else:
        say(f"frozen: {recipe.run_dir} as recipe {recipe.recipe} ({recipe.kind}, adapter {recipe.adapter_sha256[:12]})")
        say(f"next: harvest audit --split test --recipe {recipe.run_dir}")

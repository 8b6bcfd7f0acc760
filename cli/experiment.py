"""`harvest experiment RECIPE.toml`: base vs trained on the sealed split, every step in order, resumable.

A thin wrapper over train/experiment.py: the recipe names the SFT (and optional GRPO) run configs and the
audit settings; the command runs what is not finished yet and prints where the report is. Progress and
each step's start go to stderr; with --json, stdout holds the report as one JSON object.
"""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say, shown

EPILOG = """\b
Recipe (TOML; paths relative to the recipe file):
  [experiment] name, claim, output_dir = "runs", gate = true, dev = true
  [train]      sft = "sft.toml", grpo = "" (optional: GRPO continues the SFT adapter)
  [audit]      driver = "hf", workers = 1, max_turns = 30, repeat_limit = 3, max_new_tokens = 512

\b
Steps: dev-base, power, gate-sft, sft, gate-grpo, grpo, dev-trained, freeze, sealed-trained, sealed-base,
compare, report. The sealed split is audited once per arm (trained, base) of the frozen recipe; the
power step stops the experiment before training when the split cannot detect a 10-point gain.
Examples: train/configs/experiment-qwen-4b.toml (one GPU), tests/e2e/experiment-e2e.toml (CPU, tiny)."""


@click.command("experiment", epilog=EPILOG)
@click.argument("recipe", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--allow-underpowered",
    is_flag=True,
    help="Run the sealed audits even when the split's minimum detectable effect is above 10 points; "
    "the report then says the result is underpowered.",
)
@json_option
@fails_cleanly
def command(recipe: Path, allow_underpowered: bool, as_json: bool) -> None:
    """Run (or continue) the experiment RECIPE describes: audit the base on dev, train, freeze, audit
    the sealed split once for the trained recipe and once for its base, compare them task by task, and
    write report.md, report.json and report.png in the experiment folder."""
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.train.experiment import run_experiment

    report = run_experiment(
        recipe,
        say=lambda line: click.echo(f"experiment: {shown(line)}", err=True),
        progress=progress,
        allow_underpowered=allow_underpowered,
    )
    if as_json:
        echo_json(report)
        return
    sealed = report["sealed"]
    if report.get("power") and report["power"]["underpowered"]:
        say("power: UNDERPOWERED: the sealed split cannot detect a 10-point gain (report.md says by how much)")
    say(
        f"sealed: base {sealed['base']['official']}/{sealed['base']['n']}, "
        f"trained {sealed['trained']['official']}/{sealed['trained']['n']}"
    )
    if sealed["summary"]:
        say(shown(sealed["summary"]))
    say(f"report: {Path(report['folder']) / 'report.md'}")

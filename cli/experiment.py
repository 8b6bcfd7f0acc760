"""`harvest experiment RECIPE.toml`: base vs trained on the sealed split, every step in order, resumable.

A thin wrapper over train/experiment.py: the recipe names the SFT (and optional GRPO) run configs and the
audit settings; the command runs what is not finished yet and prints where the report is. Progress and
each step's start go to stderr; with --json, stdout holds the report as one JSON object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say, shown

EPILOG = """\b
Recipe (TOML; paths relative to the recipe file):
  [experiment] name, claim, output_dir = "runs", gate = true, dev = true
  [train]      sft = "sft.toml", grpo = "" (optional: GRPO continues the SFT adapter)
  [audit]      driver = "hf", workers = 1, max_turns = 30, repeat_limit = 3, max_new_tokens = 512,
               spider2 = "Spider2/spider2-dbt" (optional: a Spider 2.0-DBT checkout, checked at load)

\b
Steps: dev-base, power, gate-sft, sft, gate-grpo, grpo, dev-trained, freeze, sealed-trained, sealed-base,
spider2-trained, spider2-base (with [audit] spider2), compare, report. The sealed split, and Spider2's
sealed part when named, are audited once per arm (trained, base) of the frozen recipe, under their
once-only ledgers; a Spider2 instance that cannot be played counts 0 and is named. The power step stops
the experiment before training when the split cannot detect a 10-point gain.
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
    the sealed split (and Spider 2.0-DBT's sealed part, when the recipe names a checkout) once for the
    trained recipe and once for its base, compare them task by task, and write report.md, report.json and
    report.png in the experiment folder."""
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
    for line in spider2_lines(report.get("spider2")):
        say(shown(line))
    say(f"report: {Path(report['folder']) / 'report.md'}")


def spider2_lines(part: dict[str, Any] | None) -> list[str]:
    """The human lines of Spider2's sealed part: both arms' k/N with evaluate.py's line, the comparison, and
    the instances that could not be played (counted 0); none when the recipe names no checkout."""
    if not part:
        return []
    lines = [
        f"spider2 sealed: {arm} {part[arm]['official']}/{part[arm]['n']} ({part[arm]['evaluate_py']['says']})"
        for arm in ("base", "trained")
    ]
    if part["summary"]:
        lines.append(f"spider2 sealed: {part['summary']}")
    if part["unplayable"]:
        named = ", ".join(u["instance_id"] for u in part["unplayable"][:5])
        more = f" and {len(part['unplayable']) - 5} more" if len(part["unplayable"]) > 5 else ""
        lines.append(
            f"spider2 sealed: {len(part['unplayable'])} instance(s) could not be played and count 0: {named}{more} "
            "(report.md names them all)"
        )
    return lines

"""`harvest export`: hand a split's tasks to another benchmark's own tools, in that benchmark's layout.

    harvest export spider2 --split dev OUT [--check-clock YYYY-MM-DD] [--statement full|documentation] [--json]

The test split is never exported (it is sealed; only the audit reads it).
"""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say, statement_option


@click.group(name="export")
def command() -> None:
    """Write tasks in another benchmark's own layout (Spider 2.0-DBT)."""


@command.command(name="spider2")
@click.option(
    "--split",
    type=click.Choice(["train", "dev", "test"]),
    required=True,
    help="Which split to export (test is sealed and refused).",
)
@click.option(
    "--check-clock",
    default="",
    metavar="YYYY-MM-DD",
    help="Date at which each true repair is built to check Spider2 can grade it (default: today, UTC).",
)
@statement_option
@click.argument("out", type=click.Path(path_type=Path))
@json_option
@fails_cleanly
def spider2(split: str, check_clock: str, statement: str, out: Path, as_json: bool) -> None:
    """Write SPLIT's tasks to OUT as Spider 2.0-DBT examples, task list and evaluation suite.

    OUT/examples/<id>/ is the broken project with its profiles.yml and build.duckdb (the source data);
    OUT/examples/spider2-dbt.jsonl (and OUT/spider2-dbt.jsonl) the instructions;
    OUT/evaluation_suite/gold/ the duckdb_match metadata and gold files. Tasks whose true repair Spider2
    could not grade (graded tables outside main, outputs that depend on the build date) are skipped with
    the reason.
    """
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.eval.export.spider2 import export_spider2, preflight

    preflight(split, out)  # refusals come before any progress bar
    with progress("export spider2", None, "tasks") as tracker:  # stderr only: stdout stays the report
        report = export_spider2(
            split,
            out,
            home=harvest_home(),
            pins=pins_dir(),
            check_clock=check_clock,
            progress=lambda _iid: tracker.advance(),
            statement=statement,
        )
    if as_json:
        echo_json(report.to_dict())
        return
    for task in report.exported:
        say(f"exported {task.instance_id}  answer_or_path {task.answer_or_path}")
    for skipped in report.skipped:
        say(f"skipped  {skipped.instance_id}  {skipped.reason}")
    say(
        f"{len(report.exported)} task(s) of the {split} split in {report.out} "
        f"({len(report.skipped)} skipped); run a Spider2 agent on {report.out}/examples/spider2-dbt.jsonl "
        f"and score with `harvest score --spider2 --results DIR --gold {report.out}/evaluation_suite/gold`"
    )

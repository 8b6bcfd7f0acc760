"""`harvest dataset build`: a Hub-ready dataset folder from the train/dev tasks, all or nothing."""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say, statement_option


@click.group("dataset")
def command() -> None:
    """Build Hugging Face datasets from tasks."""


@command.command("build")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder to create.")
@click.option(
    "--split",
    "splits",
    multiple=True,
    type=click.Choice(["train", "dev", "test"]),
    help="Split(s) to build (default: train and dev). test is refused: it is sealed.",
)
@click.option(
    "--private", is_flag=True, help="Keep repositories without a redistributable license (never publish publicly)."
)
@click.option("--overwrite", is_flag=True, help="Replace an existing folder (swapped in only when the build succeeds).")
@click.option(
    "--since",
    help="Only history tasks (real fixes, `harvest mine`) whose fix was made on or after this date "
    "(YYYY-MM-DD): the tasks newer than a model's training cut-off.",
)
@click.option(
    "--min-local-tests",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Keep only tasks whose broken lineage this many dbt tests cover (local_tests; 0 keeps tasks whose "
    "local checks only prove that the project builds).",
)
@click.option(
    "--data-origin",
    type=click.Choice(["repository", "augmented", "synthesized"]),
    help="Keep only tasks whose data has this origin: the repository's own seeds, those seeds plus "
    "distinguishing rows, or data synthesized from the project's contract (default: every origin).",
)
@statement_option
@json_option
@fails_cleanly
def build_cmd(
    out: Path,
    splits: tuple[str, ...],
    private: bool,
    overwrite: bool,
    since: str | None,
    min_local_tests: int,
    data_origin: str | None,
    statement: str,
    as_json: bool,
) -> None:
    """Lint, then write parquet shards, gold files, the DatasetDict and the card to --out."""
    import re

    from rich.console import Console

    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.build import BUILDABLE, build_dataset

    if since is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", since):
        raise click.BadParameter(f"{since!r} is not a date YYYY-MM-DD", param_hint="--since")
    with Console(stderr=True).status("building dataset…"):
        result = build_dataset(
            out.resolve(),
            home=harvest_home(),
            pins=pins_dir(),
            splits=splits or BUILDABLE,
            public=not private,
            overwrite=overwrite,
            since=since,
            min_local_tests=min_local_tests,
            statement=statement,
            data_origin=data_origin or "",
        )
    if as_json:
        echo_json(
            {
                "out": str(result.out),
                "splits": result.splits,
                "gold_files": list(result.gold_files),
                "left_out_repos": result.left_out_repos,
                "left_out_tasks": result.left_out_tasks,
            }
        )
        return
    rows = ", ".join(f"{s} {n}" for s, n in result.splits.items())
    say(
        f"built {result.out}: {rows} row(s), {len(result.gold_files)} gold file(s), "
        f"{result.left_out_repos} repo(s) left out for license"
    )

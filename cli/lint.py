"""`harvest lint`: contamination and disjointness; each violation with its evidence, non-zero on any."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say


@click.command("lint")
@click.option(
    "--exclusions",
    "exclusions_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Another exclusion list (default: the shipped Spider 2.0-DBT list).",
)
@click.option(
    "--without-sealed",
    is_flag=True,
    help="This home never minted the test split (it grew train/dev pins): lint everything else and "
    "say that train was not checked against the sealed test tasks.",
)
@json_option
@fails_cleanly
def command(exclusions_path: Path | None, without_sealed: bool, as_json: bool) -> None:
    """Check pins, the reservation and tasks for benchmark overlap and leaks across splits."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.exclusions import load_exclusions
    from dbt_harvest.corpora.lint import lint_project

    violations = lint_project(pins_dir(), harvest_home(), load_exclusions(exclusions_path), sealed=not without_sealed)
    unchecked = "train tasks NOT checked against the sealed test split (--without-sealed)" if without_sealed else ""
    if as_json:
        echo_json({"violations": [v.__dict__ for v in violations], "sealed_checked": not without_sealed})
    else:
        for v in violations:
            say(v.line())
        click.echo(f"{len(violations)} violation(s)" + (f"; {unchecked}" if unchecked else ""), err=bool(violations))
    if violations:
        sys.exit(1)

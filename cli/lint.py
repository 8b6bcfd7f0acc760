"""`harvest lint`: contamination and disjointness; each violation with its evidence, non-zero on any."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli._common import echo_json, fails_cleanly, json_option, say


@click.command("lint")
@click.option("--exclusions", "exclusions_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Another exclusion list (default: the shipped Spider 2.0-DBT list).")
@json_option
@fails_cleanly
def command(exclusions_path: Path | None, as_json: bool) -> None:
    """Check pins, the reservation and tasks for benchmark overlap and leaks across splits."""
    from corpora.exclusions import load_exclusions
    from corpora.lint import lint_project
    from core.home import harvest_home, pins_dir

    violations = lint_project(pins_dir(), harvest_home(), load_exclusions(exclusions_path))
    if as_json:
        echo_json({"violations": [v.__dict__ for v in violations]})
    else:
        for v in violations:
            say(v.line())
        click.echo(f"{len(violations)} violation(s)", err=bool(violations))
    if violations:
        sys.exit(1)

"""`harvest spider2`: Spider 2.0-DBT as an audit target (read a local checkout; show the predeclared split).

    harvest spider2 import SPIDER2_DIR [--gold-alias ID=FILE ...] [--json]
    harvest spider2 split [--json]

Auditing it is `harvest audit --benchmark spider2-dbt --split dev|sealed` (eval/spider2/audit.py).
"""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup, parse_aliases, say


@click.group(name="spider2")
def command() -> None:
    """Spider 2.0-DBT as an audit target: read a local checkout, show the predeclared split."""


@command.command(name="import")
@click.argument("spider2_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--gold-alias",
    "gold_alias",
    multiple=True,
    metavar="ID=FILE",
    help="Use a gold file shipped under another name than the metadata says. Repeatable.",
)
@click.option(
    "--package-mirror",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Offline dbt package mirror for examples that ship no dbt_packages: DIR/<org>/<package> git "
    "repos (or $HARVEST_PACKAGE_MIRROR); default: the dbt hub and git.",
)
@json_option
@fails_cleanly
def import_command(spider2_dir: Path, gold_alias: tuple[str, ...], package_mirror: Path | None, as_json: bool) -> None:
    """Read a Spider 2.0-DBT checkout (SPIDER2_DIR: its spider2-dbt folder, or the repository root) and record it.

    Reports every instance: its part of the committed split (dev, sealed, or unscoreable), whether it can be
    played, and why not (a database not unpacked, a gold file missing). Examples whose dbt packages are not
    installed get them resolved (dbt hub and git, or --package-mirror) and vendored into every workspace, as
    `dbt deps` would. Nothing of the checkout is copied; later audits (`harvest audit --benchmark
    spider2-dbt`) use the recorded folder when --spider2 is not given.
    """
    from rich.console import Console

    from dbt_harvest.cli._tables import id_table, print_table
    from dbt_harvest.core.home import harvest_home
    from dbt_harvest.eval.spider2.imported import import_checkout

    report = import_checkout(spider2_dir, harvest_home(), parse_aliases(gold_alias), package_mirror=package_mirror)
    data = report.to_dict()
    if as_json:
        echo_json(data)
        return
    rows = data["rows"]
    table = id_table("instance", "part", "playable", "problems", ids=tuple(r["instance_id"] for r in rows))
    for row in rows:
        table.add_row(
            markup(row["instance_id"]),
            str(row["part"] or "unscoreable"),
            "yes" if row["playable"] else "no",
            markup("; ".join(row["problems"]) or row["unscoreable"]),
        )
    print_table(table, Console())
    parts = ", ".join(f"{name} {c['playable']}/{c['instances']} playable" for name, c in data["parts"].items())
    kind = "Spider 2.0-DBT" if data["benchmark"] else "not the benchmark (an export: every instance is dev)"
    say(f"{data['instances']} instances in {data['folder']} ({kind}): {parts}")


@command.command(name="split")
@json_option
@fails_cleanly
def split_command(as_json: bool) -> None:
    """Show the committed dev/sealed split of Spider 2.0-DBT (drawn once, never redrawn)."""
    from dbt_harvest.eval.spider2.split import committed

    split = committed()
    if as_json:
        echo_json(split.to_dict())
        return
    say(
        f"Spider 2.0-DBT split (seed {split.seed}, drawn {split.drawn_on}): {len(split.dev)} dev, "
        f"{len(split.sealed)} sealed, {len(split.unscoreable)} unscoreable"
    )
    say("dev: " + " ".join(split.dev))
    say("sealed: " + " ".join(split.sealed))
    for iid, why in split.unscoreable.items():
        say(f"unscoreable: {iid} ({why})")

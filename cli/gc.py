"""`harvest gc`: list (default) or remove (``--yes``) what killed runs left under HARVEST_HOME.

Dry run by default, like `git clean -n`: it prints each leftover (unfinished `harvest add` builds,
``templates/*.old``, hidden ``.<name>.building-*`` / ``.old-*`` / ``.partial-*`` staging folders,
``tmp/`` scratch) with its size, and removes nothing. ``--yes`` removes them. Only entries untouched for
``--older-than`` hours (default 2) are considered, so a run still working is left alone.
"""

from __future__ import annotations

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


@click.command("gc")
@click.option("--yes", "-y", "confirmed", is_flag=True, help="Remove the leftovers (default: only list them).")
@click.option(
    "--older-than",
    type=click.FloatRange(0),
    default=2.0,
    show_default=True,
    metavar="HOURS",
    help="Only leftovers untouched for this many hours (a running command's staging stays).",
)
@json_option
@fails_cleanly
def command(confirmed: bool, older_than: float, as_json: bool) -> None:
    """List what killed runs left under HARVEST_HOME; --yes removes it (dry run by default)."""
    from dbt_harvest.cli._tables import id_table, print_table
    from dbt_harvest.core.home import harvest_home
    from dbt_harvest.harvester.gc import find_leftovers, remove

    home = harvest_home()
    leftovers = find_leftovers(home, min_age_s=older_than * 3600) if home.is_dir() else []
    total = sum(item.bytes for item in leftovers)
    freed = remove(leftovers) if confirmed else 0
    if as_json:
        echo_json(
            {
                "home": str(home),
                "removed": confirmed,
                "bytes": total,
                "leftovers": [item.to_dict() for item in leftovers],
            }
        )
        return
    if not leftovers:
        click.echo(f"nothing to collect under {home}")
        return
    table = id_table("path", "what", "size", ids=("path",))
    for item in leftovers:
        table.add_row(str(item.path.relative_to(home)), item.kind, _mb(item.bytes))
    print_table(table)
    if confirmed:
        click.echo(f"removed {len(leftovers)} leftover(s), {_mb(freed)} freed")
    else:
        click.echo(
            f"{len(leftovers)} leftover(s), {_mb(total)}; nothing removed (dry run): `harvest gc --yes` removes them"
        )

"""`harvest list`: every pin under pins/, one row each."""

from __future__ import annotations

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup, say


@click.command("list")
@json_option
@fails_cleanly
def command(as_json: bool) -> None:
    """List pinned repositories (pins/*.toml)."""
    from dbt_harvest.cli._tables import id_table, print_table
    from dbt_harvest.cli.pin_view import pin_json
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import list_pins, pin_path

    pins = list_pins(pins_dir())
    if as_json:
        echo_json({"pins": [pin_json(p, pin_path(p.id, pins_dir())) for p in pins]})
        return
    if not pins:
        say(f"no pins under {pins_dir()}")
        return
    table = id_table("pin", "commit", "tables", "gradable", "packages", "clock", "license", ids=("pin", "commit"))
    for p in pins:
        table.add_row(
            markup(p.id),
            markup(p.commit[:12]),
            str(len(p.tables)),
            str(len(p.gradable_tables)),
            str(len(p.packages)),
            markup(p.clock),
            markup(p.license),
        )
    print_table(table)

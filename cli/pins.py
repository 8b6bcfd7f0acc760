"""`harvest list`: every pin under pins/, one row each."""

from __future__ import annotations

import click

from cli._common import echo_json, fails_cleanly, json_option, markup


@click.command("list")
@json_option
@fails_cleanly
def command(as_json: bool) -> None:
    """List pinned repositories (pins/*.toml)."""
    from rich.console import Console
    from rich.table import Table

    from cli.pin_view import pin_json
    from core.home import pins_dir
    from core.pin import list_pins, pin_path

    pins = list_pins(pins_dir())
    if as_json:
        echo_json({"pins": [pin_json(p, pin_path(p.id, pins_dir())) for p in pins]})
        return
    table = Table("pin", "commit", "tables", "gradable", "packages", "clock", "license")
    for p in pins:
        table.add_row(markup(p.id), markup(p.commit[:12]), str(len(p.tables)), str(len(p.gradable_tables)),
                      str(len(p.packages)), markup(p.clock), markup(p.license))
    Console().print(table if pins else markup(f"no pins under {pins_dir()}"))

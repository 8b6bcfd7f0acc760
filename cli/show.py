"""`harvest show PIN`: one pin in full."""

from __future__ import annotations

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option


@click.command("show")
@click.argument("pin_id")
@json_option
@fails_cleanly
def command(pin_id: str, as_json: bool) -> None:
    """Show PIN_ID (e.g. acme__analytics@1a2b3c4d5e6f): tables, rows, determinism, packages, clock."""
    from pathlib import Path

    from dbt_harvest.cli.pin_view import pin_json, print_pin
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import pin_path, read_pin

    path = Path(pin_id) if pin_id.endswith(".toml") else pin_path(pin_id, pins_dir())
    pin = read_pin(path)
    if as_json:
        echo_json(pin_json(pin, path))
    else:
        print_pin(pin, path)

"""`harvest demo`: the README's main command — harvest the embedded example offline, end to end.

It writes the example project and its two packages as local git repositories under
HARVEST_HOME/example, then runs exactly what a user would: `harvest add <repo>@<sha> --package-mirror`,
`harvest split assign` and `harvest mint`. It does so in a workspace of its own, HARVEST_HOME/demo
(its pins in HARVEST_HOME/demo/pins), so the demo leaves the user's pins folder, split reservation and
tasks untouched: the user's first `harvest split assign` after the demo is a first reservation, not a
redraw that needs --force.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup, say

if TYPE_CHECKING:
    from rich.console import Console

    from dbt_harvest.core.pin import Pin


def demo_home(home: Path) -> Path:
    """Where the demo keeps its own HARVEST_HOME (and, in ``pins/``, its own pins)."""
    return home / "demo"


@contextlib.contextmanager
def _workspace(home: Path) -> Iterator[None]:
    """HARVEST_HOME and HARVEST_PINS pointed at the demo's own folder for the duration of the block."""
    saved = {k: os.environ.get(k) for k in ("HARVEST_HOME", "HARVEST_PINS")}
    os.environ["HARVEST_HOME"] = str(home)
    os.environ["HARVEST_PINS"] = str(home / "pins")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@click.command("demo")
@click.option("--no-sandbox", is_flag=True, help="Build without bubblewrap (the example is our own code).")
@click.option(
    "--mint/--no-mint",
    "do_mint",
    default=True,
    show_default=True,
    help="Also reserve splits and mint repair tasks from the example (one per model).",
)
@json_option
@fails_cleanly
def command(no_sandbox: bool, do_mint: bool, as_json: bool) -> None:
    """Harvest the embedded example project (offline, through a local package mirror) in HARVEST_HOME/demo."""
    from rich.console import Console

    from dbt_harvest.cli._progress import working
    from dbt_harvest.cli.pin_view import pin_json, print_pin
    from dbt_harvest.core.home import harvest_home
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.example import materialize_example

    console = Console(stderr=True)
    example = materialize_example(harvest_home() / "example", reuse=True)
    home = demo_home(harvest_home())
    say(
        f"example repository: {example.project_repo}\npackage mirror: {example.mirror}\n"
        f"the demo works in {home} (its own pins and tasks; your pins folder is not touched)",
        err=True,
    )
    with _workspace(home):
        console.print(markup(f"$ harvest add {example.spec} --package-mirror {example.mirror}"))
        with working("two sandboxed builds of the example…"):
            result = add(example.spec, AddOptions(package_mirror=example.mirror, sandboxed=not no_sandbox))
        summary = {**pin_json(result.pin, result.path), "status": result.status, "demo_home": str(home)}
        if not as_json:
            print_pin(result.pin, result.path)
            Console().print(markup(f"{result.status}: {result.path}"))
        if do_mint:
            summary["mint"] = _mint(result.pin, not no_sandbox, console)
    if as_json:
        echo_json(summary)
        return
    # plain echo, not rich: commands to paste must not be wrapped at the terminal's width
    if do_mint:
        kept = summary["mint"]["tasks_per_pin"].get(result.pin.id, 0)
        click.echo(
            f"minted {kept} task(s) (silent {summary['mint']['silent']}, loud {summary['mint']['loud']}); see them with:"
        )
        click.echo(f"  HARVEST_HOME={home} HARVEST_PINS={home / 'pins'} harvest tasks list")
    click.echo("to harvest the example into your own pins:")
    click.echo(f"  harvest add {example.spec} --package-mirror {example.mirror} --name harvestlabs/shop_analytics")


def _mint(pin: Pin, sandboxed: bool, console: Console) -> dict[str, Any]:
    """Reserve the demo's splits when none are (the example alone goes to train), then mint one task per model."""
    from dbt_harvest.cli._progress import working
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.ledger import Params, SplitLedger, assign, split_of
    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, mint, yield_report

    if split_of(pin.id, pins_dir()) is None:
        first = SplitLedger.load(pins_dir()).reservation is None
        console.print("$ harvest split assign" + (" --test 0 --dev 0 --seed 0" if first else ""))
        assign(pins_dir(), Params(test=0, dev=0, seed=0) if first else None)
    console.print(markup(f"$ harvest mint {pin.id} --max-per-model 1"))
    with working("minting: screening in DuckDB, confirming with sandboxed builds…"):
        mint([pin], MintOptions(max_per_model=1, sandboxed=sandboxed), mint_target(harvest_home(), pins_dir()))
    return yield_report([pin.id])

"""`harvest demo`: the README's main command — harvest the embedded example offline, end to end.

It writes the example project and its two packages as local git repositories under
HARVEST_HOME/example, then runs exactly what a user would: `harvest add <repo>@<sha> --package-mirror`.
"""

from __future__ import annotations

import click

from cli._common import echo_json, fails_cleanly, json_option, markup


@click.command("demo")
@click.option("--no-sandbox", is_flag=True, help="Build without bubblewrap (the example is our own code).")
@click.option("--mint/--no-mint", "do_mint", default=True, show_default=True,
              help="Also reserve splits and mint repair tasks from the example (one per model).")
@json_option
@fails_cleanly
def command(no_sandbox: bool, do_mint: bool, as_json: bool) -> None:
    """Harvest the embedded example project (offline, through a local package mirror)."""
    from rich.console import Console

    from cli._progress import working
    from harvester.add import AddOptions, add
    from cli.pin_view import pin_json, print_pin
    from harvester.example import materialize_example
    from core.home import harvest_home

    console = Console(stderr=True)
    example = materialize_example(harvest_home() / "example", reuse=True)
    console.print(markup(f"example repository: {example.project_repo}") + "\n" + markup(f"package mirror: {example.mirror}"))
    console.print(markup(f"$ harvest add {example.spec} --package-mirror {example.mirror}"))
    with working("two sandboxed builds of the example…"):
        result = add(example.spec, AddOptions(package_mirror=example.mirror, sandboxed=not no_sandbox))
    summary = {**pin_json(result.pin, result.path), "status": result.status}
    if not as_json:
        print_pin(result.pin, result.path)
        Console().print(markup(f"{result.status}: {result.path}"))
    if do_mint:
        summary["mint"] = _mint(result.pin, not no_sandbox, console)
        if not as_json:
            kept = summary["mint"]["tasks_per_pin"].get(result.pin.id, 0)
            Console().print(f"minted {kept} task(s) (silent {summary['mint']['silent']}, loud {summary['mint']['loud']}); "
                            "see `harvest tasks list`")
    if as_json:
        echo_json(summary)


def _mint(pin, sandboxed: bool, console) -> dict:  # type: ignore[no-untyped-def]
    """Reserve splits when none are (the example alone goes to train), then mint one task per model."""
    from corpora.ledger import Params, SplitLedger, assign, split_of
    from core.home import harvest_home, pins_dir
    from corpora.store import mint_target
    from harvester.mint.pipeline import MintOptions, mint, yield_report
    from cli._progress import working

    if split_of(pin.id, pins_dir()) is None:
        first = SplitLedger.load(pins_dir()).reservation is None
        console.print("$ harvest split assign" + (" --test 0 --dev 0 --seed 0" if first else ""))
        assign(pins_dir(), Params(test=0, dev=0, seed=0) if first else None)
    console.print(markup(f"$ harvest mint {pin.id} --max-per-model 1"))
    with working("minting: screening in DuckDB, confirming with sandboxed builds…"):
        mint([pin], MintOptions(max_per_model=1, sandboxed=sandboxed), mint_target(harvest_home(), pins_dir()))
    return yield_report([pin.id])

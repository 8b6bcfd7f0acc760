"""`harvest split assign|show`: reserve repository-disjoint splits before minting, and show them."""

from __future__ import annotations

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup


@click.group("split")
def command() -> None:
    """Reserve and show repository-disjoint splits (pins/_splits.jsonl)."""


@command.command("assign")
@click.option(
    "--test", "test", type=click.IntRange(min=0), default=None, help="How many split groups to draw for test."
)
@click.option("--dev", "dev", type=click.IntRange(min=0), default=None, help="How many split groups to draw for dev.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the draw.")
@click.option("--test-group", "test_groups", multiple=True, help="Name a group (id, repo or pin) for test; repeatable.")
@click.option("--dev-group", "dev_groups", multiple=True, help="Name a group (id, repo or pin) for dev; repeatable.")
@click.option("--force", is_flag=True, help="Redraw even though splits are reserved (the ledger keeps the history).")
@json_option
@fails_cleanly
def assign_cmd(
    test: int | None,
    dev: int | None,
    seed: int,
    test_groups: tuple[str, ...],
    dev_groups: tuple[str, ...],
    force: bool,
    as_json: bool,
) -> None:
    """Reserve test/dev groups (seeded draw or named); new repositories later join their group or train.

    With no --test/--dev after a reservation, only repositories pinned since are assigned.
    """
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.corpora.ledger import Params, assign

    given = test is not None or dev is not None or test_groups or dev_groups
    params = Params(test or 0, dev or 0, seed, tuple(test_groups), tuple(dev_groups)) if given else None
    event = assign(pins_dir(), params, force=force)
    if as_json:
        echo_json({"event": None if event is None else {**event.body(), "commitment": event.commitment}})
        return
    if event is None:
        click.echo("every pinned repository already has a split; nothing to do")
        return
    counts = {s: sum(1 for g, sp in event.splits.items() if sp == s) for s in ("train", "dev", "test")}
    click.echo(
        f"{event.action}: {counts['test']} test, {counts['dev']} dev, {counts['train']} train group(s) "
        f"at {event.time}; commitment {event.commitment[:16]}"
    )


@command.command("show")
@json_option
@fails_cleanly
def show_cmd(as_json: bool) -> None:
    """Show split groups, their members, why they are grouped, and the reserved split of each."""
    from rich.console import Console

    from dbt_harvest.cli._tables import id_table, print_table
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import list_pins
    from dbt_harvest.corpora.groups import explain_groups
    from dbt_harvest.corpora.ledger import SplitLedger

    pins = list_pins(pins_dir())
    ledger = SplitLedger.load(pins_dir())
    groups = explain_groups(pins)
    by_id = {p.id: p for p in pins}

    def split_of_group(pin_ids: tuple[str, ...]) -> str:
        found = {a.split for p in pin_ids if (a := ledger.assignment(by_id[p])) is not None}
        return "/".join(sorted(found)) if found else "-"

    rows = [
        {
            "group": g.id,
            "split": split_of_group(g.pins),
            "pins": list(g.pins),
            "repos": list(g.repos),
            "reasons": list(g.reasons),
        }
        for g in groups
    ]
    history = [{"seq": e.seq, "time": e.time, "action": e.action, "commitment": e.commitment} for e in ledger.events]
    if as_json:
        echo_json({"groups": rows, "history": history})
        return
    console = Console()
    if not rows:
        console.print("no pins yet")
        return
    table = id_table("group", "split", "pins", "why grouped", ids=("group", "pins"))
    for row in rows:
        table.add_row(
            markup(row["group"]),
            markup(row["split"]),
            "\n".join(markup(p) for p in row["pins"]),
            "\n".join(markup(r) for r in row["reasons"]) or "-",
        )
    print_table(table, console)
    for e in ledger.events:
        console.print(markup(f"#{e.seq} {e.time} {e.action} commitment {e.commitment[:16]}"))
    if not history:
        console.print("no reservation yet: run `harvest split assign --test N --dev N --seed S`")

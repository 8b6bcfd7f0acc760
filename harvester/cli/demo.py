"""`harvest demo`: the README's main command — harvest the embedded example offline, end to end.

It writes the example project and its two packages as local git repositories under
HARVEST_HOME/example, then runs exactly what a user would: `harvest add <repo>@<sha> --package-mirror`.
"""

from __future__ import annotations

import click

from harvester.cli._common import echo_json, fails_cleanly, json_option


@click.command("demo")
@click.option("--no-sandbox", is_flag=True, help="Build without bubblewrap (the example is our own code).")
@json_option
@fails_cleanly
def command(no_sandbox: bool, as_json: bool) -> None:
    """Harvest the embedded example project (offline, through a local package mirror)."""
    from rich.console import Console

    from harvester.add import AddOptions, add
    from harvester.cli.pin_view import pin_json, print_pin
    from harvester.example import materialize_example
    from harvester.home import harvest_home

    console = Console(stderr=True)
    example = materialize_example(harvest_home() / "example", reuse=True)
    console.print(f"example repository: {example.project_repo}\npackage mirror: {example.mirror}")
    console.print(f"$ harvest add {example.spec} --package-mirror {example.mirror}")
    with console.status("two sandboxed builds of the example…", spinner="dots"):
        result = add(example.spec, AddOptions(package_mirror=example.mirror, sandboxed=not no_sandbox))
    if as_json:
        echo_json({**pin_json(result.pin, result.path), "status": result.status})
    else:
        print_pin(result.pin, result.path)
        Console().print(f"{result.status}: {result.path}")

"""`harvest toolchain`: the dbt releases a pin may build under, and their virtualenvs in this home.

Why it exists: a pin on an older dbt builds in a toolchain of its own (issue 61, ``harvester.toolchain``).
``list`` shows the supported releases and the toolchains made here, ``make`` makes one ahead of a build
(a first build of its pin would), ``wheels`` downloads a release's packages into a folder so that its
toolchain can be made offline (``PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup

if TYPE_CHECKING:
    from dbt_harvest.harvester.toolchain import Release


@click.group("toolchain", context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """The dbt releases a pin may build under, and the toolchains made in this home."""


def _toolchain_release(version: str) -> Release:
    """The release VERSION names, if it is one a toolchain is made for; a usage error otherwise."""
    from dbt_harvest.core.errors import ToolchainError
    from dbt_harvest.harvester.toolchain import release_named

    try:
        release = release_named(version)
    except ToolchainError as exc:
        raise click.BadParameter(str(exc), param_hint="VERSION") from None
    if release.installed:
        raise click.BadParameter(
            f"dbt {release.minor} is the installed dbt: it needs no toolchain", param_hint="VERSION"
        )
    return release


@command.command("list")
@json_option
@fails_cleanly
def list_command(as_json: bool) -> None:
    """The supported releases (newest first) and the toolchains this home has made."""
    from rich.console import Console

    from dbt_harvest.core.home import toolchains_dir
    from dbt_harvest.harvester.toolchain import made, supported

    releases = supported()
    have = made()
    if as_json:
        echo_json(
            {
                "releases": [
                    {
                        "minor": r.minor,
                        "dbt_core": r.dbt_core,
                        "dbt_duckdb": r.dbt_duckdb,
                        "duckdb": r.duckdb,
                        "installed": r.installed,
                    }
                    for r in releases
                ],
                "toolchains_dir": str(toolchains_dir()),
                "made": [{**t.to_dict(), "name": t.name} for t in have],
            }
        )
        return
    out = Console()
    for release in releases:
        where = "installed (no toolchain)" if release.installed else ""
        for toolchain in have:
            if toolchain.dbt_core == release.dbt_core:
                where = f"made: {toolchain.name}"
        out.print(f"{markup(release.label)}  {markup(where or 'not made here')}")
    out.print(f"toolchains folder: {markup(toolchains_dir())}")


@command.command("make")
@click.argument("version")
@json_option
@fails_cleanly
def make_command(version: str, as_json: bool) -> None:
    """Make the toolchain of VERSION (1.5 ... 1.10, or an exact dbt-core version) in this home."""
    from dbt_harvest.cli._progress import working
    from dbt_harvest.harvester.toolchain import make_release

    release = _toolchain_release(version)
    with working(f"making the toolchain of {release.label} (pip)…"):
        toolchain = make_release(release)
    if as_json:
        echo_json({**toolchain.to_dict(), "name": toolchain.name})
        return
    click.echo(f"{toolchain.name}: {toolchain.label}, {len(toolchain.lock)} packages locked")


@command.command("wheels")
@click.argument("version")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@fails_cleanly
def wheels_command(version: str, dest: Path) -> None:
    """Download VERSION's packages into DEST: its toolchain is then made offline from there."""
    from dbt_harvest.cli._progress import working
    from dbt_harvest.harvester.toolchain import wheels

    release = _toolchain_release(version)
    with working(f"downloading the packages of {release.label}…"):
        wheels(release, dest)
    click.echo(f"{dest}: PIP_NO_INDEX=1 PIP_FIND_LINKS={dest} makes the toolchain of {release.label} offline")

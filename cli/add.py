"""`harvest add SPEC`: pin a repository at an exact commit, build it twice sandboxed, keep gold."""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup


@click.command("add")
@click.argument("spec")
@click.option("--project-dir", help="Folder of the dbt project inside the repository (default: discovered).")
@click.option(
    "--origin",
    help="Public URL this copy stands for, e.g. https://github.com/owner/name: the pin, "
    "task ids, split groups and datasets use it (the local path is never recorded).",
)
@click.option(
    "--name",
    "repo_name",
    help="owner/name to record a repository without a public URL under "
    "(default for a local copy: its origin remote, else its dbt project's name).",
)
@click.option(
    "--package-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline dbt package mirror: DIR/<org>/<package> git repos (or $HARVEST_PACKAGE_MIRROR).",
)
@click.option(
    "--repo-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline copies of repositories: DIR/<owner>/<name> git clones (bare or not; or "
    "$HARVEST_REPO_MIRROR); owner/name@sha then builds from there with the same pin as from the network.",
)
@click.option(
    "--package-version",
    "package_versions",
    multiple=True,
    metavar="HUB_ID=VERSION",
    help="A release standing in for the one packages.yml asks for, where no source holds that (e.g. "
    "metaplane/dbt_expectations=0.10.9 for a tag the mirror lacks); repeatable. The pin records the "
    "substitute as such; a package that resolves as asked refuses it.",
)
@click.option("--resolve-ref", is_flag=True, help="Accept a branch or tag and record the commit it resolves to.")
@click.option("--clock", help="Pinned build date (default: the day after the newest date in the seeds).")
@click.option(
    "--compat-patch",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="A unified diff applied before every build (stored with the pin and hashed). It adds new files "
    "only, unless --allow-edits.",
)
@click.option(
    "--allow-edits",
    is_flag=True,
    help="Let --compat-patch edit files the repository has (configuration, seeds, YAML, macros; never model "
    "SQL). The edited files are recorded in the pin, every dataset row and the card.",
)
@click.option(
    "--synthesize-data",
    is_flag=True,
    help="The project ships no data for its sources: synthesize it from the project's own YAML, tests and "
    "SQL (seeds added by a derived patch; the pin records its sha256 and seed, a rebuild derives it again).",
)
@click.option(
    "--synth-seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="With --synthesize-data: the seed the rows are drawn with.",
)
@click.option(
    "--port-from",
    type=click.Choice(["snowflake", "bigquery", "postgres", "redshift"]),
    help="The models are written for this warehouse: port their SQL to DuckDB with sqlglot (Jinja kept; a "
    "model sqlglot cannot port is refused by name). The rewrite is the pin's declared port, listed per file.",
)
@click.option(
    "--dbt-version",
    metavar="VERSION",
    help="Build under this dbt release (1.5 ... 1.11, or an exact dbt-core version): a toolchain of its own, made "
    "once per home (`harvest toolchain list`). Default: a rebuild's own; else the newest release the project's "
    "require-dbt-version admits that builds it.",
)
@click.option("--rebuild", is_flag=True, help="Rebuild an existing pin and report any drift.")
@click.option(
    "--rename-gold",
    is_flag=True,
    help="With --rebuild: name the gold by its content digest even where the pin's older name (the sha256 "
    "of the file's bytes, pins made before 2026-12-02) is reproduced. The pin's gold name changes, so "
    "its tasks must be minted again.",
)
@click.option("--no-sandbox", is_flag=True, help="Build without bubblewrap (trusted projects only).")
@click.option("--timeout", type=float, default=900.0, show_default=True, help="Wall-time bound per build, seconds.")
@json_option
@fails_cleanly
def command(
    spec: str,
    project_dir: str | None,
    origin: str | None,
    repo_name: str | None,
    package_mirror: Path | None,
    repo_mirror: Path | None,
    package_versions: tuple[str, ...],
    resolve_ref: bool,
    clock: str | None,
    compat_patch: Path | None,
    allow_edits: bool,
    synthesize_data: bool,
    synth_seed: int,
    port_from: str | None,
    dbt_version: str | None,
    rebuild: bool,
    rename_gold: bool,
    no_sandbox: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Pin SPEC (owner/repo@sha, <git URL>@sha or <local path>@sha) and capture verified gold."""
    from rich.console import Console

    from dbt_harvest.cli._progress import working
    from dbt_harvest.cli.pin_view import pin_json, print_pin
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.sandbox import Limits

    _check_usage(spec, synthesize_data, synth_seed, rebuild, rename_gold, dbt_version)
    substitutes = _substitutes(package_versions, rebuild)
    options = AddOptions(
        project_dir=project_dir,
        origin=origin,
        name=repo_name,
        package_mirror=package_mirror,
        repo_mirror=repo_mirror,
        resolve_ref=resolve_ref,
        clock=clock,
        sandboxed=not no_sandbox,
        rebuild=rebuild,
        rename_gold=rename_gold,
        compat_patch=compat_patch,
        allow_edits=allow_edits,
        synthesize=synth_seed if synthesize_data else None,
        port_from=port_from,
        dbt_version=dbt_version,
        package_versions=substitutes,
        limits=Limits(wall_s=timeout),
    )
    with working(f"harvesting {spec} (fetch, vendor packages, two sandboxed builds)…"):
        result = add(spec, options)
    if as_json:
        echo_json(
            {
                **pin_json(result.pin, result.path),
                "status": result.status,
                "drift": list(result.drift),
                "seconds": round(result.seconds, 2),
            }
        )
        return
    out = Console()
    if result.status == "exists":
        out.print(
            f"{markup(result.pin.id)} is already pinned at {markup(result.path)} (nothing to do; --rebuild to rebuild)"
        )
        return
    print_pin(result.pin, result.path, out)
    if result.status == "rebuilt":
        out.print("no drift" if not result.drift else "[yellow]drift:[/yellow] " + markup("; ".join(result.drift)))
    out.print(f"{result.status} in {result.seconds:.1f} s")


def _substitutes(values: tuple[str, ...], rebuild: bool) -> tuple[tuple[str, str], ...]:
    """``--package-version HUB_ID=VERSION`` values as pairs (a usage error when malformed, given twice for one
    package, or given to a rebuild, which builds with the packages its pin records)."""
    import re

    if values and rebuild:
        raise click.UsageError("--package-version is for a first add: a rebuild builds with the pin's own packages")
    pairs: dict[str, str] = {}
    for value in values:
        m = re.fullmatch(r"\s*([\w.-]+/[\w.-]+)\s*=\s*v?(\d+\.\d+\.\d+\S*)\s*", value)
        if m is None:
            raise click.BadParameter(
                f"{value!r} is not HUB_ID=VERSION (e.g. dbt-labs/dbt_utils=1.1.1)", param_hint="--package-version"
            )
        if m.group(1).lower() in pairs:
            raise click.BadParameter(f"{m.group(1)} is given twice", param_hint="--package-version")
        pairs[m.group(1).lower()] = m.group(2)
    return tuple(sorted(pairs.items()))


def _check_usage(
    spec: str, synthesize_data: bool, synth_seed: int, rebuild: bool, rename_gold: bool, dbt_version: str | None
) -> None:
    """Usage errors (exit 2) before anything is fetched: options that need another, an unsupported dbt
    release, a malformed SPEC (an unreachable one is exit 1, later)."""
    from dbt_harvest.core.errors import SpecError, ToolchainError
    from dbt_harvest.harvester.specs import parse_spec
    from dbt_harvest.harvester.toolchain import release_named

    if synth_seed and not synthesize_data:
        raise click.UsageError("--synth-seed is the seed of synthesized data: add --synthesize-data")
    if rename_gold and not rebuild:
        raise click.UsageError("--rename-gold renames the gold of an existing pin: add --rebuild")
    if dbt_version is not None:
        try:
            release_named(dbt_version)
        except ToolchainError as exc:
            raise click.BadParameter(str(exc), param_hint="--dbt-version") from None
    try:
        parse_spec(spec)
    except SpecError as exc:
        raise click.BadParameter(str(exc), param_hint="SPEC") from None

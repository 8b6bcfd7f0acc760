"""`harvest mine`: real fixes from a pinned repository's history, pinned and minted as repair tasks."""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup


@click.command("mine")
@click.argument("pin_id")
@click.option("--since", help="Only commits authored on or after this date (YYYY-MM-DD).")
@click.option(
    "--from",
    "start",
    metavar="REV",
    help="Walk back from this commit or ref of the repository (e.g. HEAD: fixes made after the pinned commit "
    "too); default: the pinned commit.",
)
@click.option(
    "--max-commits",
    type=click.IntRange(1),
    default=500,
    show_default=True,
    help="First-parent commits walked back from the pinned commit, at most.",
)
@click.option(
    "--max-fixes",
    type=click.IntRange(1),
    default=None,
    help="Fix candidates pinned and minted, at most (newest first).",
)
@click.option(
    "--source",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A local copy of the repository to read (for a pin made from a local copy).",
)
@click.option(
    "--repo-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline copies of repositories: DIR/<owner>/<name>[.git], as for `harvest add`.",
)
@click.option(
    "--package-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline dbt packages (hub id -> git repository), as for `harvest add`.",
)
@click.option("--scan-only", is_flag=True, help="List the fix candidates and why other commits are not; pin nothing.")
@click.option("--no-mint", is_flag=True, help="Pin the fixes' parents but do not mint them.")
@click.option(
    "--retry-refused",
    is_flag=True,
    help="Build again the parents an earlier run could not pin (remembered per toolchain under "
    "HARVEST_HOME/history; refusals that depend on a mirror or the network are never remembered).",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="Re-pin only the history pins under pins/ mined from PIN_ID (a corpus rebuilt on a fresh machine: the "
    "same ids, drift reported), then mint them; no scan.",
)
@click.option("--jobs", type=click.IntRange(1), default=1, show_default=True, help="Mint worker processes.")
@click.option("--no-sandbox", is_flag=True, help="Build without bubblewrap (trusted projects only).")
@click.option("--timeout", type=float, default=900.0, show_default=True, help="Wall-time bound per build, seconds.")
@json_option
@fails_cleanly
def command(
    pin_id: str,
    since: str | None,
    start: str | None,
    max_commits: int,
    max_fixes: int | None,
    source: Path | None,
    repo_mirror: Path | None,
    package_mirror: Path | None,
    scan_only: bool,
    no_mint: bool,
    retry_refused: bool,
    rebuild: bool,
    jobs: int,
    no_sandbox: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Scan PIN_ID's history for commits that fix model logic; pin each fix's parent with the fix applied (a
    history pin: the parent's data, the fixed model) and mint it: the task undoes the fix, under the same
    admission as every task (the fix scores 1, an informative wrong repair passes the local checks and scores 0)."""
    import re

    from dbt_harvest.cli._progress import progress
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.history.mine import MineOptions, mine
    from dbt_harvest.harvester.sandbox import Limits

    if since is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", since):
        raise click.BadParameter(f"{since!r} is not a date YYYY-MM-DD", param_hint="--since")
    base = read_pin(pin_path(pin_id, pins_dir()))
    options = MineOptions(
        since=since,
        start=start,
        max_commits=max_commits,
        max_fixes=max_fixes,
        source=source,
        repo_mirror=repo_mirror,
        package_mirror=package_mirror,
        sandboxed=not no_sandbox,
        limits=Limits(wall_s=timeout),
        scan_only=scan_only,
        rebuild=rebuild,
        retry_refused=retry_refused,
    )
    if rebuild and (scan_only or since or max_fixes or start):
        raise click.UsageError(
            "--rebuild re-pins the committed history pins; it takes no --scan-only, --since, --from or --max-fixes"
        )
    with progress("mine", total=None, unit="fixes pinned") as bar:
        report = mine(base, options, on_fix=lambda pinned: bar.advance(1, detail=pinned.verdict.sha[:12]))
    minted: dict = {}
    if report.pin_ids and not (scan_only or no_mint):
        from dbt_harvest.harvester.mint.pipeline import MintOptions, plan, yield_report
        from dbt_harvest.harvester.mint.pipeline import mint as run_mint

        pins = [read_pin(pin_path(p, pins_dir())) for p in report.pin_ids]
        mint_options = MintOptions(max_per_model=1, jobs=jobs, sandboxed=not no_sandbox, kinds=("repair",))
        target = mint_target(harvest_home(), pins_dir())
        from dbt_harvest.harvester.mint.tally import MintTally

        shards = plan(pins, mint_options, target)
        tally = MintTally(pins=len(pins), history_pins=frozenset(report.pin_ids))
        with progress("mint", total=len(shards), unit="model shards") as bar:
            run_mint(
                pins,
                mint_options,
                target,
                on_result=lambda job, reports: bar.advance(1, detail=tally.line()),
                jobs=shards,
                tally=tally,
            )
        minted = _tasks_of(report.pin_ids, yield_report(report.pin_ids))
    data = {**report.to_dict(), **({"minted": minted} if minted else {})}
    if as_json:
        echo_json(data)
        return
    _print(data)


def _tasks_of(pin_ids: list[str], report: dict) -> dict:
    """Per history pin: the task kept, or why its candidate was refused (from the mint's reports)."""
    from dbt_harvest.harvester.mint.pipeline import load_reports

    per_pin: dict[str, dict] = {}
    for pin_id in pin_ids:
        rows = load_reports(pin_id)
        kept = [r["task_id"] for r in rows if r.get("kept")]
        refused = [f"{r['stage']}: {r['reason']}" for r in rows if not r.get("kept")]
        per_pin[pin_id] = {
            "kept": kept,
            "refused": refused or ([] if kept else ["no candidate: the fix file is not a model the project builds"]),
        }
    reasons: dict[str, int] = {}
    for row in per_pin.values():
        for why in row["refused"]:
            reasons[why] = reasons.get(why, 0) + 1
    return {
        "tasks": sum(len(r["kept"]) for r in per_pin.values()),
        "refused": reasons,
        "per_pin": per_pin,
        "tasks_per_pin": report.get("tasks_per_pin", {}),
    }


def _print(data: dict) -> None:
    from rich.console import Console

    out = Console()
    out.print(
        f"{markup(data['pin'])}: {data['commits']} commits scanned, {data['candidates']} fix candidates, "
        f"{data['pinned']} pinned",
        markup=True,
    )
    for reason, n in data["rejected"].items():
        out.print(f"  not a fix: {n:4d}  {reason}", markup=False)
    for fix in data["fixes"]:
        before = " before (--retry-refused builds it again)" if fix["status"] == "refused before" else ""
        status = fix["pin"] or f"refused{before}: {fix['refused']}"
        out.print(f"  {fix['commit'][:12]} {fix['date'][:10]} {fix['subject'][:60]!r} -> {status}", markup=False)
    minted = data.get("minted")
    if minted:
        out.print(f"history tasks kept: {minted['tasks']}", markup=False)
        for reason, n in sorted(minted["refused"].items(), key=lambda kv: -kv[1]):
            out.print(f"  refused: {n:3d}  {reason}", markup=False)

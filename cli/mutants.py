"""`harvest mutants PATH...`: show what the harvester would do to a project's model files.

For each ``.sql`` file (or every ``.sql`` under a folder): whether it parsed after Jinja masking (and
why not), the off-limits regions, and every candidate mutation as a unified diff with its operator,
family, effect and wrong repairs. ``--json`` prints the same as a list of objects for machines.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say, shown
from dbt_harvest.core.errors import HarvestError


def _model_files(paths: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.sql") if p.is_file())
        else:
            files.append(path)
    if not files:
        raise HarvestError(f"no .sql files under {', '.join(paths)}; pass model files or folders that hold them")
    return files


def _families(values: tuple[str, ...]) -> list[str] | None:
    from dbt_harvest.mutators import FAMILIES

    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if not names:
        return None
    unknown = sorted(set(names) - set(FAMILIES))
    if unknown:
        raise click.BadParameter(
            f"unknown families {unknown}; choose from {', '.join(FAMILIES)}", param_hint="--families"
        )
    return names


def report_file(path: Path, families: list[str] | None) -> dict[str, Any]:
    """The JSON-ready report of one model file."""
    from dbt_harvest.mutators import candidates, mask_file

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return {"file": str(path), "parsed": False, "reason": "not UTF-8 text", "off_limits": [], "mutations": []}
    masked = mask_file(text)
    mutations = candidates(text, families) if masked.parsed else []
    return {
        "file": str(path),
        "parsed": masked.parsed,
        "reason": masked.reason,
        "dialect": masked.dialect,
        "off_limits": [{"start": r.start, "end": r.end, "why": r.why} for r in masked.off_limits],
        "mutations": [
            {
                "operator": m.operator,
                "family": m.family,
                "effect": m.effect,
                "start": m.edit.start,
                "end": m.edit.end,
                "replacement": m.edit.replacement,
                "description": m.description,
                "wrong_repairs": [
                    {"start": w.start, "end": w.end, "replacement": w.replacement} for w in m.wrong_repairs
                ],
            }
            for m in mutations
        ],
        "_text": text,
    }


def _diff(before: str, after: str, name: str, label: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        f"a/{name.lstrip('/')}",
        f"b/{name.lstrip('/')} ({label})",
        n=1,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _print_human(report: dict[str, Any]) -> None:
    from dbt_harvest.mutators import Edit

    text = report["_text"]
    status = "parsed" if report["parsed"] else f"NOT parsed: {report['reason']}"
    click.secho(shown(f"== {report['file']}: {status}; {len(report['mutations'])} mutation(s)"), bold=True)
    for region in report["off_limits"]:
        line = text.count("\n", 0, region["start"]) + 1
        click.echo(shown(f"   off-limits line {line} [{region['start']}, {region['end']}): {region['why']}"))
    for m in report["mutations"]:
        edit = Edit(m["start"], m["end"], m["replacement"])
        mutant = edit.apply(text)
        click.secho(shown(f"-- {m['operator']} ({m['family']}, {m['effect']})"), fg="cyan")
        say(_diff(text, mutant, report["file"], m["operator"]), nl=False)
        for k, w in enumerate(m["wrong_repairs"], 1):
            fixed = Edit(w["start"], w["end"], w["replacement"]).apply(mutant)
            click.secho(f"   wrong repair {k}:", fg="yellow")
            say(_diff(mutant, fixed, report["file"], f"wrong repair {k}"), nl=False)


@click.command("mutants")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--families",
    multiple=True,
    metavar="NAMES",
    help="Only these operator families (comma-separated or repeated): filter, null, join, grain, time, values.",
)
@json_option
@fails_cleanly
def command(paths: tuple[str, ...], families: tuple[str, ...], as_json: bool) -> None:
    """Show the candidate mutations of dbt model files (files or folders of .sql)."""
    chosen = _families(families)
    files = _model_files(paths)
    reports: list[dict[str, Any]] = []
    if as_json or len(files) < 20:
        reports = [report_file(f, chosen) for f in files]
    else:
        from rich.progress import Progress

        with Progress(transient=True) as progress:
            task = progress.add_task("masking and mutating models", total=len(files))
            for f in files:
                reports.append(report_file(f, chosen))
                progress.advance(task)
    if as_json:
        echo_json([{k: v for k, v in r.items() if k != "_text"} for r in reports])
        return
    for report in reports:
        _print_human(report)
    parsed = sum(r["parsed"] for r in reports)
    total = sum(len(r["mutations"]) for r in reports)
    click.echo(f"{parsed}/{len(reports)} file(s) parsed; {total} candidate mutation(s)")

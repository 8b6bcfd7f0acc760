"""How a pin is shown: the JSON object for machines and the rich table for people (add/list/show)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from dbt_harvest.cli._common import markup
from dbt_harvest.cli._tables import id_table, print_table
from dbt_harvest.core.pin import Pin


def pin_json(pin: Pin, path: Path) -> dict[str, Any]:
    return {
        "pin": str(path),
        "id": pin.id,
        "spec": pin.spec,
        "repo": pin.repo,
        "url": pin.url,
        "commit": pin.commit,
        "ref": pin.ref,
        "project_dir": pin.project_dir,
        "gold_sha256": pin.gold_sha256,
        "clock": pin.clock,
        "compat_patch_sha256": pin.compat_patch_sha256,
        "compat_edits": list(pin.compat_edits),
        "data_origin": pin.data_origin,
        "synthesis_sha256": pin.synthesis_sha256,
        "synthesis_seed": pin.synthesis_seed,
        "dialect": pin.dialect,
        "ported_files": list(pin.ported_files),
        "clock_frozen": pin.clock_frozen,
        "database": pin.database,
        "license": pin.license,
        "packages": [
            {"name": p.name, "source": p.source, "version": p.version, "commit": p.commit, "substituted": p.substituted}
            for p in pin.packages
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in pin.skipped],
        "tables": [
            {
                "name": t.name,
                "rows": t.rows,
                "deterministic": t.deterministic,
                "empty": t.empty,
                "gradable": t.gradable,
                "unstable_columns": list(t.unstable_columns),
                "database_columns": list(t.database_columns),
            }
            for t in pin.tables
        ],
        "versions": pin.versions,
        "toolchain": (
            None
            if pin.toolchain is None
            else {**pin.toolchain.to_dict(), "name": pin.toolchain.name, "lock_sha256": pin.toolchain.lock_sha256}
        ),
        "baseline_tests": [
            {"unique_id": t.unique_id, "status": t.status, "excluded": t.known_failure} for t in pin.baseline_tests
        ],
    }


def print_pin(pin: Pin, path: Path, console: Console | None = None) -> None:
    console = console or Console()
    deterministic = sum(t.deterministic for t in pin.tables)
    console.print(f"[bold]{markup(pin.id)}[/bold]  {markup(pin.spec)}")
    console.print(f"pin: {markup(path)}")
    ref = f"  (ref {pin.ref})" if pin.ref else ""
    console.print(markup(f"commit {pin.commit}{ref}  project {pin.project_dir}  license {pin.license}"))
    console.print(
        markup(
            f"clock {pin.clock} ({'frozen' if pin.clock_frozen else 'ticking'})  database {pin.database}  "
            f"gold {pin.gold_sha256[:16]}  dbt-core {pin.versions.get('dbt-core', '?')}"
        )
    )
    if pin.toolchain is not None:
        console.print(
            f"[yellow]toolchain[/yellow] {markup(pin.toolchain.label)} ({len(pin.toolchain.lock)} packages locked, "
            f"lock {pin.toolchain.lock_sha256[:12]}): every build runs this dbt, not the installed one"
        )
    else:
        console.print("toolchain: the installed dbt (none recorded)")
    console.print(
        f"{len(pin.tables)} tables, {sum(t.rows for t in pin.tables)} rows, "
        f"{deterministic}/{len(pin.tables)} deterministic, {len(pin.gradable_tables)} gradable"
    )
    table = id_table("table", "rows", "deterministic", "gradable", "never graded (unstable columns)", ids=("table",))
    for t in pin.tables:
        unstable = ", ".join(f"{c}{' (database name)' if c in t.database_columns else ''}" for c in t.unstable_columns)
        table.add_row(
            markup(t.name),
            str(t.rows),
            "yes" if t.deterministic else "[red]no[/red]",
            "yes" if t.gradable else "no",
            markup(unstable or "-"),
        )
    print_table(table, console)
    if pin.packages:
        packages = Table("package", "source", "version", "commit")
        for p in pin.packages:
            version = p.version or "-"
            if p.substituted:
                version += f" (substitutes {p.requested})"
            packages.add_row(markup(p.name), markup(p.source), markup(version), markup(p.commit[:12] or "-"))
        console.print(packages)
    for skipped in pin.skipped:
        console.print(f"[yellow]skipped[/yellow] {markup(skipped.path)}: {markup(skipped.reason)}")
    if pin.compat_edits:
        console.print(f"[yellow]compat patch edits[/yellow] {markup(', '.join(pin.compat_edits))} (declared)")
    if pin.synthesis_sha256:
        console.print(
            f"[yellow]data synthesized[/yellow] from the project's contract (seed {pin.synthesis_seed}, patch "
            f"{pin.synthesis_sha256[:12]}): the repository ships no data for its sources"
        )
    if pin.port_sha256:
        console.print(
            f"[yellow]ported from {markup(pin.port_from)}[/yellow] (sqlglot, patch {pin.port_sha256[:12]}): "
            f"{len(pin.ported_files)} model file(s) rewritten"
        )
        for file in pin.ported_files:
            console.print(f"  ported {markup(file)}")
    for test in pin.baseline_tests:
        what = "left out of every build (fails on the original project)" if test.known_failure else "runs (warns only)"
        console.print(f"[yellow]baseline test {test.status}[/yellow] {markup(test.unique_id)}: {what}")

"""`harvest tasks list|show|verify|materialize`: the minted task records (train and dev; the sealed test
split stays sealed), their independent re-verification from the pins in fresh sandboxed builds, and one
task of a built or published dataset rebuilt from its row (`materialize`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup, say, shown

if TYPE_CHECKING:
    from dbt_harvest.core.scorer.spec import GradingSpec
    from dbt_harvest.core.task_record import TaskRecord
    from dbt_harvest.harvester.verify import TaskVerdict


@click.group("tasks")
def command() -> None:
    """List, show or re-verify minted tasks; materialize a dataset's task."""


def _records(split: str | None) -> list[TaskRecord]:
    """The task records of ``split``, or of train and dev (the sealed test split is never read here)."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.store import load_tasks

    splits = [split] if split else ["train", "dev"]
    found: list[TaskRecord] = []
    for name in splits:
        found.extend(load_tasks(name, harvest_home(), pins_dir(), purpose="inspect"))
    return found


@command.command("list")
@click.option("--split", type=click.Choice(["train", "dev"]), help="Only this split (test is sealed).")
@json_option
@fails_cleanly
def list_tasks(split: str | None, as_json: bool) -> None:
    """List tasks: id, split, family, operator, silent or loud."""
    from dbt_harvest.cli._tables import id_table, print_table

    records = _records(split)
    if as_json:
        echo_json(
            {
                "tasks": [
                    {
                        "instance_id": r.instance_id,
                        "split": r.split,
                        "family": r.family,
                        "operator": r.operator,
                        "silent": r.local_checks.silent,
                        "weak": r.weak,
                        "local_tests": r.local_tests,
                    }
                    for r in records
                ]
            }
        )
        return
    if not records:
        click.echo("no tasks")
        return
    table = id_table("task", "split", "family", "operator", "local checks", "local tests", ids=("task",))
    for r in records:
        table.add_row(
            markup(r.instance_id),
            markup(r.split),
            markup(r.family),
            markup(r.operator),
            "silent" if r.local_checks.silent else "loud",
            str(r.local_tests),
        )
    print_table(table)


@command.command("show")
@click.argument("task_id")
@json_option
@fails_cleanly
def show_task(task_id: str, as_json: bool) -> None:
    """Show one task: statement, grading spec, broken and fix patches."""
    import json

    from dbt_harvest.core.errors import HarvestError

    match = [r for r in _records(None) if r.instance_id == task_id]
    if not match:
        raise HarvestError(f"no task {task_id!r} in the train or dev split")
    record = match[0]
    if as_json:
        echo_json(json.loads(record.to_json()))
        return
    say(shown(f"{record.instance_id}  [{record.split}] {record.family}/{record.operator} ({record.effect})"))
    say(f"file: {shown(record.file)}")
    for line in _grading_lines(record.grading):
        say(shown(line))
    say("")
    say(record.problem_statement + "\n")
    say("broken patch:\n" + record.broken_patch)
    say("fix patch:\n" + record.fix_patch)


@command.command("verify")
@click.argument("task_ids", nargs=-1)
@click.option("--all", "all_tasks", is_flag=True, help="Verify every task of the train and dev splits.")
@click.option("--split", type=click.Choice(["train", "dev"]), help="Only tasks of this split (test is sealed).")
@click.option("--no-sandbox", is_flag=True, help="Build without bubblewrap (trusted projects only).")
@json_option
@fails_cleanly
def verify_tasks(
    task_ids: tuple[str, ...], all_tasks: bool, split: str | None, no_sandbox: bool, as_json: bool
) -> None:
    """Re-verify TASK_IDS (or --all) from their pins, in fresh sandboxed builds under another database name.

    Checks per task: the unmodified project matches gold; the broken project scores 0; the true repair
    scores 1; the wrong repair builds, passes the repair's dbt tests, scores 0 and differs from the broken
    output; every statement claim holds; no other task of the pin shares its broken outputs or statement.
    Exit 1 when any check fails.
    """
    import sys

    from dbt_harvest.harvester.verify import summary

    if not task_ids and not all_tasks:
        raise click.UsageError("name at least one TASK_ID or pass --all")
    verdicts = _verify_with_progress(_records_to_verify(task_ids, split), sandboxed=not no_sandbox, as_json=as_json)
    totals = summary(verdicts)
    if as_json:
        echo_json({"summary": totals, "tasks": [v.to_dict() for v in verdicts]})
    else:
        click.echo(_summary_line(totals))
    if totals["ok"] != totals["tasks"]:
        sys.exit(1)


@dataclass(frozen=True)
class VerifyTally:
    """What `tasks verify` found so far: tasks that pass every check, and tasks that fail one."""

    verified: int = 0
    failed: int = 0

    def plus(self, verdict: TaskVerdict) -> VerifyTally:
        """This tally with one more verdict counted."""
        return VerifyTally(self.verified + verdict.ok, self.failed + (not verdict.ok))

    def line(self) -> str:
        """``3 verified, 1 failed``."""
        return f"{self.verified} verified, {self.failed} failed"


def _records_to_verify(task_ids: tuple[str, ...], split: str | None) -> list[TaskRecord]:
    """The records ``task_ids`` name (in that order), or every record of ``split`` (of train and dev without
    one); HarvestError for an unknown id or when there is nothing to verify."""
    from dbt_harvest.core.errors import HarvestError

    records = _records(split)
    if task_ids:
        known = {r.instance_id: r for r in records}
        missing = [t for t in task_ids if t not in known]
        if missing:
            raise HarvestError(f"no task {missing[0]!r} in the train or dev split")
        records = [known[t] for t in task_ids]
    if not records:
        raise HarvestError("no tasks to verify (mint first, or name a split that has tasks)")
    return records


def _verify_with_progress(records: list[TaskRecord], *, sandboxed: bool, as_json: bool) -> list[TaskVerdict]:
    """Verify ``records`` with counted progress on stderr; without ``as_json``, one stdout line per verdict."""
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.harvester.verify import verify

    tally = VerifyTally()
    with progress("tasks verify", len(records), "tasks") as bar:

        def show(verdict: TaskVerdict) -> None:
            nonlocal tally
            if not as_json:
                click.echo(_verdict_line(verdict), err=False)
            tally = tally.plus(verdict)
            bar.advance(detail=tally.line())

        return verify(records, sandboxed=sandboxed, on_result=show)


def _verdict_line(verdict: TaskVerdict) -> str:
    """``<id>: ok``, or ``<id>: FAILED <check> (<why>), ...`` naming each failed check."""
    failed = [c for c in verdict.checks if not c.ok]
    state = "ok" if not failed else "FAILED " + ", ".join(f"{c.name} ({c.detail})" for c in failed)
    return f"{verdict.instance_id}: {state}"


def _summary_line(totals: Mapping[str, object]) -> str:
    """``3/4 tasks pass every check; per check: gold_matches 4/4, ...`` from ``harvester.verify.summary``."""
    checks = totals["checks"]
    assert isinstance(checks, Mapping)  # summary's "checks": check name -> {"ok": n, "of": n}
    return f"{totals['ok']}/{totals['tasks']} tasks pass every check; per check: " + ", ".join(
        f"{k} {v['ok']}/{v['of']}" for k, v in checks.items()
    )


def _grading_lines(grading: GradingSpec) -> list[str]:
    """The grading spec for people: the gold file, then one line per graded table."""
    lines = [f"gold: {grading.gold}"]
    for table, cols, ignore_order in zip(grading.condition_tabs, grading.condition_cols, grading.ignore_orders):
        columns = "gold columns " + ", ".join(str(c) for c in cols) + " (by index)" if cols else "every gold column"
        order = "row order ignored" if ignore_order else "row order checked"
        lines.append(f"graded: table {table}, {columns}, {order}")
    return lines


@command.command("materialize")
@click.argument("dataset")
@click.argument("instance_id")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--split", type=click.Choice(["train", "dev"]), help="Look only in this split (default: every split).")
@click.option(
    "--repo-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline: a folder holding the repository as <owner>/<name> or <owner>__<name> (bare or not).",
)
@click.option(
    "--package-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline: the dbt package mirror (default $HARVEST_PACKAGE_MIRROR).",
)
@json_option
@fails_cleanly
def materialize(
    dataset: str,
    instance_id: str,
    out: Path,
    split: str | None,
    repo_mirror: Path | None,
    package_mirror: Path | None,
    as_json: bool,
) -> None:
    """Rebuild one task of a dataset (a `harvest dataset build` folder or a Hub repo id) into OUT/.

    OUT/project is the broken workspace an agent gets, OUT/grader the gold file and grading spec, OUT/task.json
    the row; the export is checked against the row's git tree id, the compat patch and gold against their sha256.
    """
    import os

    from dbt_harvest.corpora.materialize import materialize_task
    from dbt_harvest.harvester.packages import MIRROR_ENV

    if package_mirror is not None:
        os.environ[MIRROR_ENV] = str(package_mirror.resolve())
    done = materialize_task(dataset, instance_id, out, repo_mirror=repo_mirror, split=split)
    if as_json:
        echo_json(done.to_dict())
        return
    click.echo(f"{done.instance_id} [{done.split}] -> {done.out}")
    click.echo(f"project: {done.project}\ngold:    {done.gold} (sha256 {done.gold_sha256[:12]})")
    for check in done.checks:
        click.echo(f"checked: {check}")
    click.echo(f"build:   {done.build}")

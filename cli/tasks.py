"""`harvest tasks list|show|verify|materialize`: the minted task records (train and dev; the sealed test
split stays sealed), their independent re-verification from the pins in fresh sandboxed builds (the sealed
split's too, reported by lock hash and check names only), and one task of a built or published dataset
rebuilt from its row (`materialize`)."""

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
@click.option("--split", type=click.Choice(["train", "dev"]), help="Only tasks of this split (test: --sealed).")
@click.option(
    "--sealed",
    is_flag=True,
    help="Verify the sealed test split of this home instead (read only after it matches pins/_sealed.json); "
    "each task is reported by its lock hash and the names of the checks it fails, nothing of its content.",
)
@click.option("--pin", "pin_ids", multiple=True, metavar="PIN_ID", help="Only tasks of these pins (repeatable).")
@click.option(
    "--sample", type=click.IntRange(1), default=None, help="A seeded sample of this many of the chosen tasks."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample (same seed, same tasks).")
@click.option("--no-sandbox", is_flag=True, help="Build without bubblewrap (trusted projects only).")
@json_option
@fails_cleanly
def verify_tasks(
    task_ids: tuple[str, ...],
    all_tasks: bool,
    split: str | None,
    sealed: bool,
    pin_ids: tuple[str, ...],
    sample: int | None,
    seed: int,
    no_sandbox: bool,
    as_json: bool,
) -> None:
    """Re-verify TASK_IDS (or --all, --split, --pin, --sealed) from their pins, in fresh sandboxed builds
    under another database name.

    Checks per task: the unmodified project matches gold; the broken project scores 0; the true repair
    scores 1; the wrong repair builds, passes the repair's dbt tests, scores 0 and differs from the broken
    output; every statement claim holds; no other task of the pin shares its broken outputs or statement.
    Exit 1 when any check fails.
    """
    import sys

    from dbt_harvest.harvester.verify import summary

    if task_ids and (sealed or all_tasks or split or pin_ids):
        raise click.UsageError("name TASK_IDs, or choose tasks with --all/--split/--sealed/--pin, not both")
    if sealed and (split or all_tasks):
        raise click.UsageError("--sealed verifies the test split; --split and --all name train and dev")
    if not (task_ids or all_tasks or split or sealed or pin_ids):
        raise click.UsageError("name at least one TASK_ID or pass --all (or --split, --pin, --sealed)")
    chosen = _sealed_records() if sealed else _records_to_verify(task_ids, split)
    chosen = _sampled(_of_pins(chosen, pin_ids), sample, seed)
    verdicts = _verify_with_progress(chosen, sandboxed=not no_sandbox, as_json=as_json, sealed=sealed)
    totals = summary(verdicts)
    if as_json:
        echo_json({"summary": totals, "tasks": [v.to_dict() for v in verdicts]})
    else:
        click.echo(_summary_line(totals))
    if totals["ok"] != totals["tasks"]:
        sys.exit(1)


def _sealed_records() -> list[TaskRecord]:
    """This home's sealed test tasks, once the store matches its seal (HarvestError when it holds none)."""
    from dbt_harvest.core.errors import HarvestError
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.sealed import records_to_verify

    records = records_to_verify(harvest_home(), pins_dir())
    if not records:
        raise HarvestError("the sealed store holds no task: mint the test split first")
    return records


def _of_pins(records: list[TaskRecord], pin_ids: tuple[str, ...]) -> list[TaskRecord]:
    """The records of ``pin_ids`` (all without any); HarvestError for a pin none of them comes from."""
    from dbt_harvest.core.errors import HarvestError

    if not pin_ids:
        return records
    have = {r.pin for r in records}
    unknown = [p for p in pin_ids if p not in have]
    if unknown:
        raise HarvestError(f"no task of pin {unknown[0]!r} among the chosen tasks (check the id and the split)")
    return [r for r in records if r.pin in set(pin_ids)]


def _sampled(records: list[TaskRecord], sample: int | None, seed: int) -> list[TaskRecord]:
    """A seeded sample of ``sample`` records, in the order of their lock hashes (all when None or fewer):
    the same tasks for the same seed on any machine, whatever order the store lists them in."""
    import random

    from dbt_harvest.corpora.tasklock import record_sha256

    if sample is None or sample >= len(records):
        return records
    ordered = sorted(records, key=record_sha256)
    return sorted(random.Random(seed).sample(ordered, sample), key=record_sha256)


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


def _verify_with_progress(
    records: list[TaskRecord], *, sandboxed: bool, as_json: bool, sealed: bool = False
) -> list[TaskVerdict]:
    """Verify ``records`` with counted progress on stderr; without ``as_json``, one stdout line per verdict.
    ``sealed``: every verdict is masked (:func:`_masked`) before it is shown or returned."""
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.harvester.verify import verify

    names = {r.instance_id: _sealed_name(r) for r in records} if sealed else {}
    tally = VerifyTally()
    shown_verdicts: list[TaskVerdict] = []
    with progress("tasks verify", len(records), "tasks") as bar:

        def show(verdict: TaskVerdict) -> None:
            nonlocal tally
            if sealed:
                verdict = _masked(verdict, names[verdict.instance_id])
            shown_verdicts.append(verdict)
            if not as_json:
                click.echo(_verdict_line(verdict), err=False)
            tally = tally.plus(verdict)
            bar.advance(detail=tally.line())

        verify(records, sandboxed=sandboxed, on_result=show)
    return shown_verdicts


def _sealed_name(record: TaskRecord) -> str:
    """How a sealed task is named in a report: ``sealed:`` and the first 12 hex digits of its lock hash."""
    from dbt_harvest.corpora.tasklock import record_sha256

    return f"sealed:{record_sha256(record)[:12]}"


def _masked(verdict: TaskVerdict, name: str) -> TaskVerdict:
    """A sealed task's verdict with nothing of the task in it: its lock-hash name for its id, and each check's
    name and outcome without the detail (which can quote columns, values or the statement)."""
    from dataclasses import replace

    return replace(verdict, instance_id=name, checks=tuple(replace(c, detail="") for c in verdict.checks))


def _verdict_line(verdict: TaskVerdict) -> str:
    """``<id>: ok``, or ``<id>: FAILED <check> (<why>), ...`` naming each failed check (a masked one: its name)."""
    failed = [c for c in verdict.checks if not c.ok]
    state = (
        "ok" if not failed else "FAILED " + ", ".join(f"{c.name} ({c.detail})" if c.detail else c.name for c in failed)
    )
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

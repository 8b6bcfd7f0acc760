"""`harvest tasks list|show|materialize`: the minted task records (train and dev; the sealed test split stays
sealed), and one task of a built or published dataset rebuilt from its row (`materialize`)."""

from __future__ import annotations

from pathlib import Path

import click

from cli._common import echo_json, fails_cleanly, json_option, markup, say, shown


@click.group("tasks")
def command() -> None:
    """List or show minted tasks; materialize a dataset's task."""


def _records(split: str | None):  # type: ignore[no-untyped-def]
    from corpora.store import load_tasks
    from core.home import harvest_home, pins_dir

    splits = [split] if split else ["train", "dev"]
    found = []
    for name in splits:
        found.extend(load_tasks(name, harvest_home(), pins_dir(), purpose="inspect"))
    return found


@command.command("list")
@click.option("--split", type=click.Choice(["train", "dev"]), help="Only this split (test is sealed).")
@json_option
@fails_cleanly
def list_tasks(split: str | None, as_json: bool) -> None:
    """List tasks: id, split, family, operator, silent or loud."""
    from cli._tables import id_table, print_table

    records = _records(split)
    if as_json:
        echo_json({"tasks": [{"instance_id": r.instance_id, "split": r.split, "family": r.family,
                              "operator": r.operator, "silent": r.local_checks.silent, "weak": r.weak}
                             for r in records]})
        return
    if not records:
        click.echo("no tasks")
        return
    table = id_table("task", "split", "family", "operator", "local checks", ids=("task",))
    for r in records:
        table.add_row(markup(r.instance_id), markup(r.split), markup(r.family), markup(r.operator),
                      "silent" if r.local_checks.silent else "loud")
    print_table(table)


@command.command("show")
@click.argument("task_id")
@json_option
@fails_cleanly
def show_task(task_id: str, as_json: bool) -> None:
    """Show one task: statement, grading spec, broken and fix patches."""
    import json

    from core.errors import HarvestError

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


def _grading_lines(grading) -> list[str]:  # type: ignore[no-untyped-def]
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
@click.option("--repo-mirror", type=click.Path(path_type=Path, file_okay=False),
              help="Offline: a folder holding the repository as <owner>/<name> or <owner>__<name> (bare or not).")
@click.option("--package-mirror", type=click.Path(path_type=Path, file_okay=False),
              help="Offline: the dbt package mirror (default $HARVEST_PACKAGE_MIRROR).")
@json_option
@fails_cleanly
def materialize(dataset: str, instance_id: str, out: Path, split: str | None, repo_mirror: Path | None,
                package_mirror: Path | None, as_json: bool) -> None:
    """Rebuild one task of a dataset (a `harvest dataset build` folder or a Hub repo id) into OUT/.

    OUT/project is the broken workspace an agent gets, OUT/grader the gold file and grading spec, OUT/task.json
    the row; the export is checked against the row's git tree id, the compat patch and gold against their sha256.
    """
    import os

    from corpora.materialize import materialize_task
    from harvester.packages import MIRROR_ENV

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

"""Export a split's tasks in Spider 2.0-DBT's own layout, so its tools (spider-agent-dbt, evaluate.py) run them unchanged.

``OUT/`` after ``harvest export spider2 --split dev OUT``::

    examples/spider2-dbt.jsonl            one line per task: instance_id, instruction, type "DBT"
    examples/<instance_id>/               the broken project (tree + vendored packages + compat patch +
                                          broken patch), its profiles.yml and build.duckdb (the source data:
                                          seeds loaded by a sandboxed `dbt seed`); no gold, no .git
    spider2-dbt.jsonl                     the same lines as examples/spider2-dbt.jsonl
    evaluation_suite/gold/spider2_eval.jsonl          duckdb_match parameters of each task's grading spec
    evaluation_suite/gold/<instance_id>/build.duckdb  the task's gold tables
    evaluation_suite/reference/<instance_id>.patch    the true repair (a unified diff over the example
                                                      folder): what `harvest audit --benchmark spider2-dbt
                                                      --driver oracle` plays; Spider2's tools ignore it

Spider2 keeps ``spider2-dbt.jsonl`` inside ``examples/`` and spider-agent-dbt finds each project beside the
file it is given (``run.py -t``), so the file is written there; the copy at the top is the issue's layout.
spider-agent-dbt picks its prompt by the line's ``type`` ("DBT"). The DuckDB file keeps the name every
build of the pin used (``build.duckdb``, or ``<database>.duckdb`` for a pin whose SQL names its database;
so ``target.database`` is what the gold was built with); the gold file in the evaluation suite has that name
too, as Spider2's does, so ``answer_or_path`` is the project's own database: ``build.duckdb``
(``<project_dir>/build.duckdb`` when the dbt project is in a subfolder).

A task is exported only when a Spider2 agent could solve it: per pin, the project is seeded (that file is
what every example ships) and then built with the true repair in the sandbox at ``check_clock`` (default:
today), not at the pin's frozen clock, since Spider2 runs no fake clock; the task is kept when the official
check passes that build against its gold. So a task whose graded tables depend on the build date, or are
built outside schema ``main`` (the official check looks bare names up there), is skipped with the reason.
The test split is never exported. Nothing is half-written: the folder is assembled beside ``OUT`` and
renamed into place at the end.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.home import pin_folder_name
from dbt_harvest.core.task_record import TaskRecord, statement_of

DB_FILE = "build.duckdb"
TASK_TYPE = "DBT"
EXAMPLES = "examples"
TASKS_FILE = "spider2-dbt.jsonl"
GOLD_DIR = "evaluation_suite/gold"
REFERENCE_DIR = "evaluation_suite/reference"


class ExportError(HarvestError):
    """A split cannot be exported in Spider 2.0-DBT's layout (sealed split, existing output, failed seed...)."""


@dataclass(frozen=True)
class ExportedTask:
    """One task as written: where its project is and what a Spider2 submission names as its answer."""

    instance_id: str
    pin: str
    answer_or_path: str  # relative to the example folder (and to <results>/<instance_id>/)
    graded_tables: tuple[str, ...]


@dataclass(frozen=True)
class SkippedTask:
    """A task left out of the export, and why."""

    instance_id: str
    reason: str


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote and what it left out."""

    out: Path
    split: str
    exported: tuple[ExportedTask, ...]
    skipped: tuple[SkippedTask, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "split": self.split,
            "exported": [vars(t) | {"graded_tables": list(t.graded_tables)} for t in self.exported],
            "skipped": [vars(s) for s in self.skipped],
        }


# ------------------------------------------------------------------------------------------- pure parts


def answer_path(project_dir: str, db_file: str = DB_FILE) -> str:
    """Where the project's DuckDB file sits, relative to the example folder (``db_file``: the pin's, whose stem
    is the database the project's SQL may name)."""
    return db_file if project_dir in ("", ".") else f"{project_dir.strip('/')}/{db_file}"


def task_line(task: TaskRecord, statement: str = "full") -> dict[str, Any]:
    """The task's line in spider2-dbt.jsonl (``statement``: which of the task's statements is the
    instruction, ``core.task_record.statement_of``)."""
    return {"instance_id": task.instance_id, "instruction": statement_of(task, statement), "type": TASK_TYPE}


def eval_line(task: TaskRecord) -> dict[str, Any]:
    """The task's line in spider2_eval.jsonl: duckdb_match over the task's grading spec, gold renamed."""
    spec = task.grading.to_dict()
    spec["gold"] = f"{task.database}.duckdb"
    return {"instance_id": task.instance_id, "evaluation": {"func": "duckdb_match", "parameters": spec}}


def profile_text(profile: str, schema: str, db_file: str = DB_FILE) -> str:
    """profiles.yml for the exported project: DuckDB at ./<db_file> (the pin's), the schema the pin builds in."""
    from dbt_harvest.harvester.sandbox.profile import plain_profile_text

    return plain_profile_text(profile, schema, db_file)


def repair_fails(reason: str, clock: str) -> str:
    """Why a task is skipped: its true repair, built as a Spider2 agent would build it, fails the check."""
    return (
        f"its true repair, built at {clock} as Spider2 would build it (no pinned clock, graded tables "
        f"looked up in main), scores 0 against its gold ({reason})"
    )


def _make_readable(root: Path) -> None:
    """Folders 0755, files 0644 (0755 when executable): the export is read by other users' tools (Docker)."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o755)
        else:
            path.chmod(0o755 if path.stat().st_mode & 0o111 else 0o644)


def jsonl(lines: list[dict[str, Any]]) -> str:
    """JSON Lines text, keys sorted."""
    return "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)


# ------------------------------------------------------------------------------------------------ export


def preflight(split: str, out: Path) -> None:
    """Refuse the sealed split and an output folder that is already in use, before any work."""
    if split == "test":
        raise ExportError(
            "the test split is sealed and never exported; models are scored on it only by the sealed audit "
            "(`harvest audit --split test --recipe MANIFEST`)"
        )
    if split not in ("train", "dev"):
        raise ExportError(f"unknown split {split!r}: export train or dev")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} already exists and is not an empty folder; remove it or name a new one")


@dataclass(frozen=True)
class PinDatabases:
    """Per pin: its seeds alone (what every example ships) and its original models built on them."""

    seeds: Path
    built: Path


def _pin_databases(
    task: TaskRecord, pins: Path, scratch: Path, check_clock: str, sandboxed: bool, limits: Any
) -> PinDatabases:
    """Seed the task's project in the sandbox (keep that file), then apply the true repair (it restores
    the original file) and build at ``check_clock``. Mutations only touch models and every true repair
    restores the pin's tree, so one pass serves every task of the pin."""
    from dbt_harvest.core.patching import apply_patch
    from dbt_harvest.eval.env.workspace import discard, materialize
    from dbt_harvest.harvester.sandbox import DbtStep, Limits, run_steps, write_profile

    ws = materialize(task, pins, scratch)
    name = pin_folder_name(task.pin)
    try:
        apply_patch(ws.root, task.fix_patch)
        write_profile(ws.root, ws.project_dir, ws.profile, ws.schema, ws.db_file, exclude_tests=ws.exclude_tests)
        db = ws.root / ws.db_file
        # each copy keeps the file name: dbt-duckdb's views name their catalog, which is the file's stem
        keep = {"seed": scratch / name / "seeds" / ws.db_file, "build": scratch / name / "built" / ws.db_file}
        for what, args, clock in (("dbt seed", ("seed",), ws.clock), ("dbt build", ("build",), check_clock)):
            run = run_steps(
                ws.root,
                ws.project_dir,
                [DbtStep(args)],
                clock=clock,
                sandboxed=sandboxed,
                limits=limits or Limits(),
                stop_on_failure=False,
            )
            if what == "dbt seed" and not run.ok:
                raise ExportError(
                    f"{task.pin}: `dbt seed` failed in the sandbox ({run.first_error}); logs: {run.log_path}"
                )
            if not db.is_file() or (ws.root / (ws.db_file + ".wal")).exists():
                raise ExportError(f"{task.pin}: `{what}` left no complete {ws.db_file}; logs: {run.log_path}")
            keep[args[0]].parent.mkdir(parents=True)
            shutil.copyfile(db, keep[args[0]])
        return PinDatabases(keep["seed"], keep["build"])
    finally:
        discard(ws)


def export_spider2(
    split: str,
    out: Path,
    *,
    home: Path,
    pins: Path,
    sandboxed: bool = True,
    limits: Any = None,
    check_clock: str = "",
    progress: Callable[[str], None] | None = None,
    statement: str = "full",
) -> ExportReport:
    """Write ``split``'s tasks to ``out`` in Spider 2.0-DBT's layout; see the module docstring.
    ``statement``: ``full`` or ``documentation`` (a completion's documentation alone, Spider2's shape)."""
    from dbt_harvest.corpora.store import load_tasks

    out = Path(out)
    preflight(split, out)
    tasks = load_tasks(split, home, pins, purpose="eval")
    if not tasks:
        raise ExportError(f"the {split} split has no tasks; mint some first (`harvest mint`)")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    scratch = Path(tempfile.mkdtemp(prefix="spider2-export-"))  # workspaces: never inside OUT
    exported: list[ExportedTask] = []
    skipped: list[SkippedTask] = []
    clock = check_clock or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d")
    try:
        prepared: dict[str, PinDatabases] = {}
        (staging / GOLD_DIR).mkdir(parents=True)
        for task in tasks:
            if progress is not None:
                progress(task.instance_id)
            if task.pin not in prepared:
                prepared[task.pin] = _pin_databases(task, pins, scratch, clock, sandboxed, limits)
            written = _export_task(task, prepared[task.pin], staging, pins, scratch, clock)
            if isinstance(written, ExportedTask):
                exported.append(written)
            else:
                skipped.append(written)
        if not exported:
            raise ExportError(
                f"none of the {split} split's {len(tasks)} tasks can be graded by Spider2: {skipped[0].reason}"
            )
        kept = [t for t in tasks if t.instance_id in {e.instance_id for e in exported}]
        _write_task_files(staging, kept, statement)
        _make_readable(staging)
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return ExportReport(out, split, tuple(exported), tuple(skipped))


def _export_task(
    task: TaskRecord, dbs: PinDatabases, staging: Path, pins: Path, scratch: Path, clock: str
) -> ExportedTask | SkippedTask:
    """Write one task into ``staging`` (its example, gold and reference patch) when its true repair, built
    as Spider2 would build it (``dbs.built``), passes the official check; else skip it with the reason."""
    from dbt_harvest.core import atomic
    from dbt_harvest.core.scorer import official
    from dbt_harvest.eval.env.workspace import discard, materialize
    from dbt_harvest.harvester.gold import gold_path

    gold = gold_path(task.gold_sha256)
    verdict = official(gold, dbs.built, task.grading)
    if not verdict.passed:
        return SkippedTask(task.instance_id, repair_fails(verdict.reason, clock))
    ws = materialize(task, pins, scratch)
    try:
        example = staging / EXAMPLES / task.instance_id
        example.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(ws.root, example, symlinks=True)
    finally:
        discard(ws)
    project = example / ws.project_dir
    if not project.resolve().is_relative_to(example.resolve()):
        raise ExportError(f"{task.instance_id}: its project folder {ws.project_dir} leaves the tree (a link)")
    for name in (ws.db_file, "profiles.yml"):  # never write through a link the tree planted
        _remove(project / name)
    shutil.copyfile(dbs.seeds, project / ws.db_file)
    atomic.write_text(project / "profiles.yml", profile_text(ws.profile, ws.schema, ws.db_file))
    gold_folder = staging / GOLD_DIR
    (gold_folder / task.instance_id).mkdir()
    shutil.copyfile(gold, gold_folder / task.instance_id / f"{task.database}.duckdb")
    (staging / REFERENCE_DIR).mkdir(parents=True, exist_ok=True)
    atomic.write_text(staging / REFERENCE_DIR / f"{task.instance_id}.patch", task.fix_patch)
    return ExportedTask(
        task.instance_id, task.pin, answer_path(ws.project_dir, ws.db_file), tuple(task.grading.condition_tabs)
    )


def _remove(target: Path) -> None:
    """Remove what is at ``target`` (a folder, a file or a link, never what a link points to), if anything."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.is_symlink() or target.exists():
        target.unlink()


def _write_task_files(staging: Path, kept: list[TaskRecord], statement: str) -> None:
    """The exported tasks' lines: spider2-dbt.jsonl (in examples/ and at the top) and spider2_eval.jsonl."""
    from dbt_harvest.core import atomic

    lines = jsonl([task_line(t, statement) for t in kept])
    atomic.write_text(staging / EXAMPLES / TASKS_FILE, lines)
    atomic.write_text(staging / TASKS_FILE, lines)
    atomic.write_text(staging / GOLD_DIR / "spider2_eval.jsonl", jsonl([eval_line(t) for t in kept]))

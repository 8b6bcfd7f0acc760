"""Spider 2.0-DBT instances as environment tasks: the project as shipped, its instruction, the official check.

An instance becomes a ``TaskRecord`` (so every driver, the audit's run folder, report and ``audit compare``
take it unchanged) with: the instruction as problem statement, the official ``duckdb_match`` parameters as
grading spec, the gold file's sha256, family and operator ``spider2-dbt``, and the reference repair as fix
patch when the checkout carries one (our exports; the benchmark ships none, so the oracle driver abandons
its episodes). Nothing about the instance reaches a dataset or a commit: records live in the audit's run
folder only.

The workspace is a copy of the example folder, the DuckDB file its profile names moved to the workspace
root (the sandbox's profile points there; the file keeps its name, which is dbt-duckdb's catalog), and a
pristine copy of that file kept beside the workspace, out of the agent's reach. ``validate`` and ``dbt``
build in place, over the shipped data, as a Spider2 agent does. ``submit`` grades the project's files, not
whatever state the agent's database reached: the shipped database is restored, ``dbt seed`` and
``dbt run`` run in the sandbox (``run``, not ``build``: a failing dbt test of a shipped project must not
skip the models the check reads), and the official check compares the resulting database with the gold,
as ``evaluate.py`` compares the database a Spider2 agent leaves (graded tables looked up in ``main``).
Episodes run at a clock of the audit's day (Spider2 runs no fake clock); the run folder records it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.core.atomic import sha256_file
from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord
from dbt_harvest.eval.env.benchmark import BenchmarkTasks
from dbt_harvest.eval.env.errors import EnvError
from dbt_harvest.eval.env.tools import DUCKDB_SCOPE, LOG_NAME, RunSettings
from dbt_harvest.eval.env.workspace import TaskWorkspace
from dbt_harvest.eval.spider2.checkout import Spider2Instance
from dbt_harvest.harvester.grading.verdict import Graded

BENCHMARK = "spider2-dbt"
SOURCE_REPO = "xlang-ai/Spider2"
PRISTINE = "pristine"
GRADED_COPY = "graded"
MAX_DATABASE_BYTES = 16 << 30
#: a grading spec for an instance that cannot be played (its episode never starts: materialize refuses it)
_UNPLAYABLE = GradingSpec(gold="", condition_tabs=("(none)",), condition_cols=((),), ignore_orders=(True,))


def instance_task(instance: Spider2Instance, part: str) -> TaskRecord:
    """The task record of one instance (see the module docstring); ``part`` is its split part."""
    return TaskRecord(
        instance_id=instance.instance_id,
        pin=f"{BENCHMARK}:{instance.instance_id}",
        repo=SOURCE_REPO,
        base_commit="",
        project_dir=instance.project_dir,
        split=part,
        split_group=BENCHMARK,
        family=BENCHMARK,
        operator=BENCHMARK,
        effect="",
        file="",
        broken_patch="",
        fix_patch=instance.reference,
        wrong_repair_patches=(),
        grading=instance.grading or _UNPLAYABLE,
        problem_statement=instance.instruction,
        local_checks=LocalChecks(builds=False, tests_total=0, tests_failed=0),
        gold_sha256=sha256_file(instance.gold) if instance.playable and instance.gold else "",
        license="",
        versions={},
        database=Path(instance.database).stem or "build",
    )


def today_clock() -> str:
    """The audit's clock: today (UTC) at midnight, since Spider2 runs no fake clock."""
    return time.strftime("%Y-%m-%d 00:00:00", time.gmtime())


@dataclass(frozen=True)
class _Located:
    instance: Spider2Instance
    task: TaskRecord


class Spider2Tasks(BenchmarkTasks):
    """The instances of one checkout, served to ``RepairEnvironment`` (see the module docstring)."""

    name = BENCHMARK

    def __init__(
        self, instances: list[Spider2Instance], parts: dict[str, str], clock: str = "", results: Path | None = None
    ) -> None:
        self.clock = clock or today_clock()
        self.results = results  # also keep each graded database here, in Spider2's results layout
        self._by_id = {i.instance_id: _Located(i, instance_task(i, parts[i.instance_id])) for i in instances}

    @property
    def tasks(self) -> list[TaskRecord]:
        return [located.task for located in self._by_id.values()]

    def _located(self, instance_id: str) -> _Located:
        try:
            return self._by_id[instance_id]
        except KeyError:
            raise EnvError(f"no {BENCHMARK} instance {instance_id!r} in this audit") from None

    def __call__(self, instance_id: str) -> TaskRecord:
        return self._located(instance_id).task

    def gold(self, task: TaskRecord) -> Path:
        gold = self._located(task.instance_id).instance.gold
        if gold is None:
            raise EnvError(f"{task.instance_id} has no gold database")
        return gold

    def materialize(self, task: TaskRecord, scratch: Path | None) -> TaskWorkspace:
        from dbt_harvest.eval.env.policy import policy_for
        from dbt_harvest.harvester.discovery import discover
        from dbt_harvest.harvester.sandbox import safe_fs

        instance = self._located(task.instance_id).instance
        if instance.problems:
            raise EnvError(f"{instance.instance_id} cannot be played: {'; '.join(instance.problems)}")
        if scratch is not None:
            scratch.mkdir(parents=True, exist_ok=True)
        holder = Path(tempfile.mkdtemp(prefix="episode-", dir=scratch))
        root = holder / "ws"
        name = Path(instance.database).name
        try:
            shutil.copytree(
                instance.example, root, symlinks=True, ignore=shutil.ignore_patterns(".git", "target", "logs")
            )
            if instance.packages:  # what `dbt deps` would install; episodes have no network
                from dbt_harvest.core.home import mirrors_dir
                from dbt_harvest.harvester.gitstore import GitStore
                from dbt_harvest.harvester.packages.vendor import vendor_packages

                vendor_packages(root / instance.project_dir, instance.packages, GitStore(mirrors_dir()), workspace=root)
            shipped = root / instance.database
            if not safe_fs.is_file(root, instance.database):  # no link anywhere on the way: never moves a host file
                raise EnvError(
                    f"{instance.instance_id}: {instance.database} is not a regular file reached without a link"
                )
            for stale in (root / (name + ".wal"), root / (instance.database + ".wal")):
                if stale.is_file() and not stale.is_symlink():
                    stale.unlink()
            if instance.database != name:  # the sandbox's database sits at the workspace root
                if os.path.lexists(root / name):
                    raise EnvError(f"{instance.instance_id}: the workspace root already holds a {name}")
                shipped.rename(root / name)
            (holder / PRISTINE).mkdir()
            shutil.copyfile(root / name, holder / PRISTINE / name)
            project = discover(root, instance.project_dir)
            policy = policy_for(root, instance.project_dir)
        except (HarvestError, OSError) as exc:
            shutil.rmtree(holder, ignore_errors=True)
            raise EnvError(f"{instance.instance_id}: the workspace cannot be made ({exc})") from None
        except BaseException:
            shutil.rmtree(holder, ignore_errors=True)
            raise
        return TaskWorkspace(
            root=root.resolve(),
            project_dir=instance.project_dir,
            profile=project.profile,
            schema=instance.schema,
            clock=self.clock,
            policy=policy,
            db_file=name,
        )

    def grade(self, task: TaskRecord, ws: TaskWorkspace, settings: RunSettings) -> Graded:
        from dbt_harvest.core.scorer import score
        from dbt_harvest.harvester.sandbox import DbtStep, run_steps, safe_fs, write_profile

        started = time.perf_counter()
        gold = self.gold(task)
        target = "target" if ws.project_dir in ("", ".") else f"{ws.project_dir}/target"
        for rel in (ws.db_file, ws.db_file + ".wal", target):  # nothing the agent's builds left is graded
            safe_fs.remove(ws.root, rel)
        holder = ws.root.parent
        fd = safe_fs.open_file(ws.root, ws.db_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as out, open(holder / PRISTINE / ws.db_file, "rb") as pristine:
            shutil.copyfileobj(pristine, out)
        write_profile(ws.root, ws.project_dir, ws.profile, ws.schema, db_file=ws.db_file)
        run = run_steps(
            ws.root,
            ws.project_dir,
            [DbtStep(("seed",)), DbtStep(("run",))],
            clock=ws.clock,
            sandboxed=settings.sandboxed,
            limits=settings.limits,
            log_path=ws.root / LOG_NAME,
            stop_on_failure=False,
            duckdb_scope=DUCKDB_SCOPE,
        )
        graded = holder / GRADED_COPY / ws.db_file  # read on the host from a copy, never through the workspace
        shutil.rmtree(graded.parent, ignore_errors=True)
        try:
            safe_fs.copy_out(ws.root, ws.db_file, graded, max_bytes=MAX_DATABASE_BYTES)
        except HarvestError as exc:
            return Graded.not_built(
                f"the built database cannot be read: {exc}",
                run.first_error,
                path=BENCHMARK,
                seconds=time.perf_counter() - started,
            )
        if self.results is not None:
            from dbt_harvest.core import atomic

            atomic.install_file(graded, self.results / task.instance_id / ws.db_file)
        return Graded.from_score(
            score(gold, graded, task.grading),
            built=run.ok,
            first_error=run.first_error,
            capture=graded,
            path=BENCHMARK,
            seconds=time.perf_counter() - started,
        )

    def write_results_metadata(self) -> Path | None:
        """``results_metadata.jsonl`` over the graded databases kept in ``results`` (one line each: Spider2's
        ``answer_type`` file, ``answer_or_path`` the database), so `harvest score --spider2` and the official
        evaluate.py score the same submissions; None without a results folder."""
        import json

        from dbt_harvest.core import atomic

        if self.results is None:
            return None
        lines = []
        for iid, located in sorted(self._by_id.items()):
            name = Path(located.instance.database).name
            if name and (self.results / iid / name).is_file():
                lines.append({"instance_id": iid, "answer_type": "file", "answer_or_path": name})
        path = self.results / "results_metadata.jsonl"
        atomic.write_text(path, "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
        return path

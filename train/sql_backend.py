"""A fast reward backend for projects whose models are plain SQL: run them straight in DuckDB.

The same idea as the mint's screening stage: for a model that uses only ``{{ ref('x') }}`` and
``{{ source('s', 't') }}``, the compiled SQL is the file with those calls replaced by relation names,
so a rollout costs a few DuckDB statements instead of a dbt build. Inputs (seeds and sources) come
from ``<inputs>/<pin>.duckdb``, copied per rollout; every model of the edited project is created as a
table in dependency order, and the copy is scored by the REAL scorer (core.scorer) against the task's
gold (harvester.gold, hash-verified once per process). Any other Jinja, a cycle or a SQL error is a
failed build: 0 with its reason. For full dbt projects use the harvester backend.

The SQL is a model's completion, run in the trainer's own process, so it runs on the project's one
locked-down DuckDB (``core.locked_duckdb``): no file but the rollout's private copy of the inputs, no
extensions, memory and threads bounded, configuration locked, and every statement interrupted after
``statement_seconds``. A completion that reads or writes a host file, or runs for ever, scores 0.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dbt_harvest.core.locked_duckdb import Lock, LockedDuckDB, is_interrupt
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.harvester.grading.verdict import Graded
from dbt_harvest.train.project import ProjectSource
from dbt_harvest.train.reward import EditingBackend, RewardResult

_REF = re.compile(r"\{\{\s*ref\(\s*['\"]([A-Za-z0-9_]+)['\"]\s*\)\s*\}\}")
_SOURCE = re.compile(r"\{\{\s*source\(\s*['\"][A-Za-z0-9_]+['\"]\s*,\s*['\"]([A-Za-z0-9_]+)['\"]\s*\)\s*\}\}")
_JINJA = re.compile(r"\{\{|\{%|\{#")


class UnsupportedModel(ValueError):
    """A model uses Jinja beyond ref()/source(), or the models form a cycle."""


def compile_models(files: Mapping[str, str], project_dir: str) -> list[tuple[str, str]]:
    """(relation name, SQL) for every model under ``<project_dir>/models``, parents before children."""
    root = posixpath.join(project_dir.strip("/"), "models") if project_dir.strip("/. ") else "models"
    models: dict[str, str] = {}
    parents: dict[str, set[str]] = {}
    for path, text in files.items():
        if not path.endswith(".sql") or not path.startswith(root + "/"):
            continue
        name = posixpath.basename(path)[: -len(".sql")]
        sql = _SOURCE.sub(lambda m: m.group(1), _REF.sub(lambda m: m.group(1), text))
        if _JINJA.search(sql):
            raise UnsupportedModel(f"{path} uses Jinja beyond ref()/source()")
        models[name] = sql.strip().rstrip(";")
        parents[name] = set(_REF.findall(text))
    order: list[tuple[str, str]] = []
    done: set[str] = set()
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in done or name not in models:
            return
        if name in visiting:
            raise UnsupportedModel(f"models form a cycle through {name}")
        visiting.add(name)
        for parent in sorted(parents[name]):
            visit(parent)
        visiting.discard(name)
        done.add(name)
        order.append((name, models[name]))

    for name in sorted(models):
        visit(name)
    return order


class DuckDBSqlBackend:
    """RewardBackend for plain-SQL projects (see module docstring). Picklable: pool workers build one."""

    def __init__(
        self, project: ProjectSource, inputs: Path, *, statement_seconds: float = 30.0, memory_limit: str = "2GB"
    ) -> None:
        self.project = project
        self.inputs = Path(inputs)
        self.statement_seconds = statement_seconds
        self.memory_limit = memory_limit
        self._verified: set[str] = set()
        self._editing = EditingBackend(project, self.build_and_score)

    def score_completion(self, task: TaskRecord, completion: str) -> RewardResult:
        return self._editing.score_completion(task, completion)

    def _gold(self, task: TaskRecord) -> Path:
        from dbt_harvest.harvester.gold import gold_path

        path = gold_path(task.gold_sha256, verify=task.gold_sha256 not in self._verified)
        self._verified.add(task.gold_sha256)
        return path

    def build_and_score(self, task: TaskRecord, edits: Mapping[str, str]) -> Graded:
        import duckdb

        from dbt_harvest.core.scorer import score

        files = {**self.project.broken_files(task), **edits}
        try:
            order = compile_models(files, task.project_dir)
        except UnsupportedModel as exc:
            return Graded.not_built(f"build failed: {exc}", path="sql")
        source = self.inputs / f"{task.pin}.duckdb"
        if not source.is_file():
            raise FileNotFoundError(f"no inputs database {source} for pin {task.pin}")
        with tempfile.TemporaryDirectory(prefix="reward-") as tmp:
            submission = Path(tmp) / "submission.duckdb"
            shutil.copyfile(source, submission)
            lock = Lock(
                allowed_directories=(str(Path(tmp).resolve()),),
                temp_directory=str(Path(tmp).resolve()),
                memory_limit=self.memory_limit,
                threads=1,
            )
            con = LockedDuckDB(str(submission), lock, statement_seconds=self.statement_seconds)
            try:
                for name, sql in order:
                    con.execute(f'create or replace table "{name}" as {sql}')
                con.execute("checkpoint")
            except duckdb.Error as exc:
                if is_interrupt(exc):
                    return Graded.not_built(
                        f"build failed: a statement ran past {self.statement_seconds:g} s", path="sql"
                    )
                return Graded.not_built(f"build failed: {str(exc).splitlines()[0][:200]}", path="sql")
            finally:
                con.close()
            result = score(self._gold(task), submission, task.grading)
        return Graded.from_score(result, path="sql")

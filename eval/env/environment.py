"""RepairEnvironment: the tool environment as one class, for the audit's drivers and for trl's GRPO.

It follows trl's ``environment_factory`` protocol (trl 1.16, ``GRPOTrainer``): the trainer constructs it
with no arguments, calls ``reset(**row)`` with the dataset row (which carries ``instance_id``) and appends
the returned string to the prompt, exposes every public method of the class as a tool (their docstrings
and type hints become the tool schemas, through ``transformers.utils.get_json_schema``), and reads the
episode's reward from ``get_reward()``. Hence: the public methods ARE the tools; everything else is a
property or starts with an underscore. All tool calls go through the same ``Episode`` state machine
the audit uses, so training and evaluation share one policy, one turn cap and one grader.

With no task source given, tasks come from the TRAIN split only (``corpora.store.load_tasks`` with
purpose "train"): a training path cannot reach dev or sealed test tasks through this class.

A ``BenchmarkTasks`` source (``eval/env/benchmark.py``: Spider 2.0-DBT's instances) brings its own workspaces
and grading; everything else (tools, policy, guard, turn cap) is the same.

``RepairEnvironment.from_dataset(DATASET, split)`` serves the rows of a built or published dataset instead
(:class:`DatasetTasks`): a row is materialized on demand from what it carries (``corpora.materialize``), the
repository, package trees, the pin's template and the gold cached under ``HARVEST_HOME``, and the reset
observation opens with the row's problem statement. Every environment makes its own workspace and every
build runs in its own sandbox, so several environments (threads or processes) can run at once; the shared
caches appear atomically (temp folder + rename), so two environments materializing the same task at once
both get a whole tree.

``validate`` and ``submit`` grade the agent's edits on the fast path where it applies; the builds it cannot
answer run in one warm sandboxed child per environment (``harvester.grading.warm``), started on the first
such build and ended when the environment closes (``with``/``__exit__``, garbage collection, or exit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env import tools
from dbt_harvest.eval.env.benchmark import BenchmarkTasks
from dbt_harvest.eval.env.episode import Episode, EpisodeLimits, EpisodeOutcome
from dbt_harvest.eval.env.errors import EnvError
from dbt_harvest.eval.env.workspace import TaskWorkspace, discard, materialize
from dbt_harvest.harvester.grading.warm import WarmBuilds

TaskSource = Callable[[str], TaskRecord]


class DatasetTasks:
    """The tasks of a dataset (a `harvest dataset build` folder or a Hub repo id), for RepairEnvironment.

    Rows are read once (``load_dataset``); the gold of a task is fetched and verified when it is first served.
    """

    def __init__(self, dataset: str, split: str = "train", *, repo_mirror: Path | None = None) -> None:
        from dbt_harvest.corpora.materialize import dataset_ref, load_rows

        self.dataset, self.split, self.repo_mirror = dataset, split, repo_mirror
        self._ref = dataset_ref(dataset)
        self.rows = {r["instance_id"]: r for r in load_rows(self._ref, split)[split]}

    def __call__(self, instance_id: str) -> TaskRecord:
        from dbt_harvest.corpora.materialize import find_row, gold_for, row_task

        if instance_id not in self.rows:
            raise EnvError(f"no task {instance_id!r} in the {self.split} split of {self.dataset}")
        _, row = find_row({self.split: [self.rows[instance_id]]}, instance_id, self.dataset)  # format check
        gold_for(self._ref, row)
        return row_task(row, self.split)

    def source(self, instance_id: str):  # -> harvester.task_tree.TreeSource
        from dbt_harvest.corpora.materialize import find_row, row_source

        if instance_id not in self.rows:
            raise EnvError(f"no task {instance_id!r} in the {self.split} split of {self.dataset}")
        _, row = find_row({self.split: [self.rows[instance_id]]}, instance_id, self.dataset)  # checked, untrusted
        return row_source(row, self.repo_mirror)


@dataclass(frozen=True)
class EnvSettings:
    """Everything an environment needs besides the task: where pins and scratch are, bounds, sandboxing."""

    pins: Path | None = None  # default: core.home.pins_dir() at reset time
    scratch: Path | None = None  # where episode workspaces are made; default: the system temp folder
    run: tools.RunSettings = field(default_factory=tools.RunSettings)
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    keep_workspace: bool = False  # keep the last workspace after reset/close (debugging)
    statement_in_observation: bool = False  # open the reset observation with the task's problem statement


def _train_tasks() -> TaskSource:
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.store import load_tasks

    by_id = {t.instance_id: t for t in load_tasks("train", harvest_home(), pins_dir(), purpose="train")}

    def lookup(instance_id: str) -> TaskRecord:
        try:
            return by_id[instance_id]
        except KeyError:
            raise EnvError(
                f"no train task {instance_id!r}; the training environment serves the train split only"
            ) from None

    return lookup


def _as_source(tasks: Mapping[str, TaskRecord] | TaskSource | None) -> TaskSource | None:
    if tasks is None or callable(tasks):
        return tasks
    mapping = dict(tasks)

    def lookup(instance_id: str) -> TaskRecord:
        try:
            return mapping[instance_id]
        except KeyError:
            raise EnvError(f"no task {instance_id!r} in this environment's task set") from None

    return lookup


class RepairEnvironment:
    """A dbt project with a silent bug: inspect it, edit the model, check it, submit."""

    def __init__(
        self,
        tasks: Mapping[str, TaskRecord] | TaskSource | None = None,
        settings: EnvSettings | None = None,
    ) -> None:
        self._source = _as_source(tasks)
        self._settings = settings or EnvSettings()
        self._episode: Episode | None = None
        self._workspace: TaskWorkspace | None = None
        self._warm: WarmBuilds | None = None  # the warm sandboxed child of fallback builds, made on first need

    @classmethod
    def from_dataset(
        cls, dataset: str, split: str = "train", *, repo_mirror: Path | None = None, settings: EnvSettings | None = None
    ) -> RepairEnvironment:
        """An environment over a dataset's rows (see the module docstring); the statement opens each reset."""
        return cls(
            DatasetTasks(dataset, split, repo_mirror=repo_mirror),
            replace(settings or EnvSettings(), statement_in_observation=True),
        )

    # -- trl protocol: reset and reward ----------------------------------------------------------
    def reset(self, **row: Any) -> str:
        """Start the episode of the row's task (``instance_id``); return the initial observation."""
        instance_id = row.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id:
            raise EnvError("reset(**row) needs the row's 'instance_id' (a task id)")
        if self._source is None:
            self._source = _train_tasks()
        task = self._source(instance_id)
        self._close()
        from dbt_harvest.core.home import pins_dir

        if isinstance(self._source, BenchmarkTasks):  # another benchmark's instance: its own tree and check
            workspace = self._source.materialize(task, self._settings.scratch)
            self._workspace = workspace
            self._episode = Episode(
                task,
                workspace,
                replace(self._settings.run, graded_edits=False),
                self._settings.limits,
                grader=self._source.grade,
            )
        else:
            source = self._source.source(instance_id) if isinstance(self._source, DatasetTasks) else None
            workspace = materialize(task, self._settings.pins or pins_dir(), self._settings.scratch, source=source)
            self._workspace = workspace
            if self._warm is None:
                self._warm = WarmBuilds(self._settings.scratch)  # its child starts on the first fallback build
            self._episode = Episode(task, workspace, self._settings.run, self._settings.limits, warm=self._warm)
        observation = tools.project_brief(workspace)
        if self._settings.statement_in_observation:
            observation = f"{task.problem_statement}\n\n{observation}"
        self._episode.record({"kind": "reset", "instance_id": instance_id, "observation": observation})
        return observation

    def get_reward(self) -> float:
        """The official score of the submission: 1.0 or 0.0 (0.0 when nothing was submitted)."""
        return float(self._episode.outcome.official) if self._episode is not None else 0.0

    # -- the tools (every public method is one) --------------------------------------------------
    def list_files(self, path: str = ".") -> str:
        """List the files of the project under a folder (recursively), relative to the workspace root.

        Args:
            path: A folder (or file) relative to the workspace root, e.g. "models" or "."; defaults to the root.
        """
        return self._act("list_files", {"path": path})

    def read_file(self, path: str) -> str:
        """Read a text file of the project.

        Args:
            path: The file, relative to the workspace root, e.g. "models/marts/fct_orders.sql".
        """
        return self._act("read_file", {"path": path})

    def write_file(self, path: str, content: str) -> str:
        """Replace (or create) a file with new content; only inside the project's model, macro, seed and test folders.

        Args:
            path: The file, relative to the workspace root, e.g. "models/marts/fct_orders.sql".
            content: The complete new text of the file.
        """
        return self._act("write_file", {"path": path, "content": content})

    def query(self, sql: str) -> str:
        """Run a read-only SQL query on the project's built DuckDB database (run dbt build first).

        Args:
            sql: One DuckDB SELECT statement, e.g. "select status, count(*) from fct_orders group by 1".
        """
        return self._act("query", {"sql": sql})

    def dbt(self, command: str, select: str = "") -> str:
        """Run a dbt command on the project in the sandbox, optionally on a node selection.

        Args:
            command: The dbt command (choices: ["build", "run", "test", "compile", "seed"])
            select: A node selection such as "fct_orders+" or "tag:daily"; empty means the whole project.
        """
        return self._act("dbt", {"command": command, "select": select})

    def validate(self) -> str:
        """Run the task's local checks: seed and build the whole project with its dbt tests; report pass or fail."""
        return self._act("validate", {})

    def submit(self) -> str:
        """Submit the project as it is now: it is built once more and checked; the episode ends."""
        return self._act("submit", {})

    # -- for drivers and the audit (not tools: properties and private methods) -------------------
    @property
    def episode(self) -> Episode:
        if self._episode is None:
            raise EnvError("no episode: call reset(instance_id=...) first")
        return self._episode

    @property
    def outcome(self) -> EpisodeOutcome:
        return self.episode.outcome

    def _act(self, tool: str, args: dict[str, Any]) -> str:
        return self.episode.act(tool, args)

    def _close(self) -> None:
        if self._workspace is not None and not self._settings.keep_workspace:
            discard(self._workspace)
        self._workspace = None

    def _shutdown(self) -> None:
        """The environment closes: its workspace goes, and its warm sandboxed child ends."""
        self._close()
        if self._warm is not None:
            self._warm.close()
            self._warm = None

    def __enter__(self) -> RepairEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self._shutdown()

    def __del__(self) -> None:  # best effort: trl never closes its pooled environments (atexit closes the child)
        try:
            self._shutdown()
        except Exception:
            pass


def tool_schemas() -> list[dict[str, Any]]:
    """The JSON schemas of the tools, exactly as trl/transformers derive them from RepairEnvironment."""
    import inspect

    from transformers.utils import get_json_schema

    env = RepairEnvironment.__new__(RepairEnvironment)
    names = [
        name
        for name, _ in inspect.getmembers(RepairEnvironment, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]
    return [get_json_schema(getattr(env, name)) for name in names]

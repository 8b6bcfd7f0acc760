"""Tasks that come from another benchmark, not from our pins: what the environment needs from them.

The environment, its tools, the drivers and the audit are the same for every task; what differs for a
benchmark's instance (Spider 2.0-DBT's, ``eval/spider2``) is where its project comes from and how a
submission is graded. A ``BenchmarkTasks`` object is a task source (``source(instance_id)`` -> record) that
also makes the episode's workspace and grades the submission; ``RepairEnvironment`` uses it in place of
the pin's template and the corpus's gold. Its validate and submit always build the agent's workspace in
the sandbox (the fast path needs a pin's built state, which a benchmark instance has not).
"""

from __future__ import annotations

import abc
from pathlib import Path

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env.tools import RunSettings
from dbt_harvest.eval.env.workspace import TaskWorkspace
from dbt_harvest.harvester.grading.verdict import Graded


class BenchmarkTasks(abc.ABC):
    """A benchmark's tasks for ``RepairEnvironment``: records, workspaces, grading, gold."""

    #: the benchmark's name, as reports and run folders show it (e.g. "spider2-dbt")
    name: str = ""

    @abc.abstractmethod
    def __call__(self, instance_id: str) -> TaskRecord:
        """The task record of an instance (EnvError when there is none)."""

    @abc.abstractmethod
    def materialize(self, task: TaskRecord, scratch: Path | None) -> TaskWorkspace:
        """A fresh workspace of the instance under ``scratch`` (EnvError when it cannot be made)."""

    @abc.abstractmethod
    def grade(self, task: TaskRecord, ws: TaskWorkspace, settings: RunSettings) -> Graded:
        """The submission in ``ws``, built once more in the sandbox and graded by the benchmark's check."""

    @abc.abstractmethod
    def gold(self, task: TaskRecord) -> Path:
        """The gold database the task is graded against (for the audit's explainer)."""

"""What a driver is: something that plays one episode in a RepairEnvironment, and how to make one by name.

A driver gets the environment (already reset to the task), the task record and the initial observation,
and acts through the environment's tools until the episode is over. Privileged drivers (oracle, wrong)
read the task's patches to play a known answer; model drivers (openai, hf) see only what an agent sees:
the problem statement, the initial observation and tool results. ``prepare`` runs once before the first
episode: model drivers load their model or check their endpoint there, so a driver that cannot play fails
the audit up front instead of turning every episode into a crash. Making one by name is ``registry.py``'s
job: this module imports no concrete driver, so the drivers can import it without a circle.
"""

from __future__ import annotations

from typing import Any, Protocol

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env.environment import RepairEnvironment
from dbt_harvest.eval.env.errors import EnvError


class DriverError(EnvError):
    """A driver cannot play at all: its model does not load, or its endpoint cannot be reached or lacks the model."""


class Driver(Protocol):
    name: str

    def prepare(self) -> None:
        """Load the model or reach the endpoint now, before any episode; raise DriverError if it cannot.

        The audit calls it before the first episode (and before a sealed split is unsealed), so a driver
        that cannot play fails the command in one line instead of recording every episode as crashed.
        """
        ...

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        """Act in ``env`` until its episode is over (or stop; the episode is then abandoned)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What to record about this driver in the run folder (name, model, decoding settings)."""
        ...

    @property
    def parallel_safe(self) -> bool:
        """Whether several episodes may run at once through this driver (threads)."""
        ...

"""The environment's exceptions: refusals an agent causes (answered as tool errors) and setup failures.

``InvalidAction`` never escapes an episode: the state machine turns it into an error observation and
counts it. ``EnvError`` is for the people running the environment (no such task, workspace cannot be
made) and, deriving from HarvestError, prints as one line in the CLI.
"""

from __future__ import annotations

from dbt_harvest.core.errors import HarvestError


class EnvError(HarvestError):
    """The environment cannot start or continue an episode (missing task, gold, pin or workspace)."""


class InvalidAction(Exception):
    """An action the environment refuses; the message is what the agent reads, so it says what to do."""

"""The agent tool environment: a task's broken project in a sandboxed workspace, tools, and the episode.

``RepairEnvironment`` (environment.py) is the one class both the audit's drivers and trl's GRPO use;
``Episode`` (episode.py) is its state machine; policy.py says where an agent may read and write;
tools.py implements the tools; grading.py builds and scores a submission. Nothing here imports the
scorer's explainer: why a submission failed is for people (the audit), never for the agent.
"""

from dbt_harvest.eval.env.environment import EnvSettings, RepairEnvironment, tool_schemas
from dbt_harvest.eval.env.episode import (
    ABANDONED,
    LOOPED,
    RUNNING,
    SUBMITTED,
    TURN_CAP,
    Episode,
    EpisodeLimits,
    EpisodeOutcome,
)
from dbt_harvest.eval.env.errors import EnvError, InvalidAction
from dbt_harvest.eval.env.tools import TOOL_NAMES, RunSettings
from dbt_harvest.harvester.grading.verdict import Graded

__all__ = [
    "ABANDONED",
    "LOOPED",
    "RUNNING",
    "SUBMITTED",
    "TURN_CAP",
    "EnvError",
    "EnvSettings",
    "Episode",
    "EpisodeLimits",
    "EpisodeOutcome",
    "InvalidAction",
    "RepairEnvironment",
    "RunSettings",
    "Graded",
    "TOOL_NAMES",
    "tool_schemas",
]

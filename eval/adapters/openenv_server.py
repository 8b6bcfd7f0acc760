"""The repair environment served as an OpenEnv environment (``openenv-core``, the optional extra ``openenv``).

One OpenEnv session is one :class:`eval.env.RepairEnvironment` over a dataset's rows
(``RepairEnvironment.from_dataset``): ``reset(instance_id=...)`` materializes the task into its own workspace
and returns the problem statement plus the workspace brief; ``step(RepairAction(tool=..., args={...}))`` calls
one of the seven tools (list_files, read_file, write_file, query, dbt, validate, submit) and returns its text.
The episode ends at ``submit`` (or the turn cap); the reward of that last step is the official score, 1.0 or
0.0, and every earlier step carries reward 0.0.

Serve with :func:`make_app` (a FastAPI app, ``uvicorn``), drive with :class:`RepairEnvClient` (OpenEnv's own
WebSocket client; ``.sync()`` for blocking use). Concurrency: OpenEnv makes one environment per WebSocket
session and runs each session's reset/step in that session's own executor; each environment has its own
workspace and every dbt build runs in its own bubblewrap sandbox, so ``max_concurrent_envs`` sessions build at
once (bounded by cores and memory: a build is one dbt process, one thread). The server runs untrusted project
code only through the sandbox, like every other entry point.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Literal

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from eval.env.environment import DatasetTasks, EnvSettings, RepairEnvironment

TOOLS = ("list_files", "read_file", "write_file", "query", "dbt", "validate", "submit")
ToolName = Literal["list_files", "read_file", "write_file", "query", "dbt", "validate", "submit"]


class RepairAction(Action):
    """One tool call: the tool's name and its arguments (as the tool's signature names them)."""

    tool: ToolName = Field(..., description="One of: " + ", ".join(TOOLS))
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments, e.g. {'path': 'models'}")


class RepairObservation(Observation):
    """What the tool answered (or, at reset, the problem statement and the workspace brief)."""

    text: str = Field(default="", description="The tool's answer")
    instance_id: str = Field(default="", description="The task of this episode")
    tool: str = Field(default="", description="The tool that produced this observation ('' at reset)")


class RepairOpenEnv(Environment[RepairAction, RepairObservation, State]):
    """One session's environment: a RepairEnvironment over ``tasks`` (shared, read-only rows)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, tasks: DatasetTasks, settings: EnvSettings | None = None) -> None:
        super().__init__()
        self._env = RepairEnvironment(tasks, settings or EnvSettings(statement_in_observation=True))
        self._state = State(episode_id=None, step_count=0)
        self._instance_id = ""

    def reset(self, seed: int | None = None, episode_id: str | None = None, instance_id: str | None = None,
              **kwargs: Any) -> RepairObservation:
        if not instance_id:
            raise ValueError("reset needs instance_id: the task to play")
        text = self._env.reset(instance_id=instance_id)
        self._instance_id = instance_id
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return RepairObservation(text=text, instance_id=instance_id, done=False, reward=0.0)

    def step(self, action: RepairAction, timeout_s: float | None = None, **kwargs: Any) -> RepairObservation:
        text = getattr(self._env, action.tool)(**action.args)
        self._state.step_count += 1
        done = self._env.episode.done
        reward = self._env.get_reward() if done else 0.0
        return RepairObservation(text=text, instance_id=self._instance_id, tool=action.tool, done=done, reward=reward)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self._env._close()


def make_app(dataset: str, split: str = "train", *, repo_mirror: Path | None = None, max_concurrent_envs: int = 4,
             settings: EnvSettings | None = None):  # -> fastapi.FastAPI
    """The OpenEnv FastAPI app serving ``dataset``'s ``split`` (rows read once, shared by every session)."""
    from dataclasses import replace

    from openenv.core.env_server.http_server import create_app

    tasks = DatasetTasks(dataset, split, repo_mirror=repo_mirror)
    session_settings = replace(settings or EnvSettings(), statement_in_observation=True)
    return create_app(lambda: RepairOpenEnv(tasks, session_settings), RepairAction, RepairObservation,
                      env_name="dbt-repair", max_concurrent_envs=max_concurrent_envs)


class RepairEnvClient(EnvClient[RepairAction, RepairObservation, State]):
    """OpenEnv's client for this environment: ``reset(instance_id=...)``, ``step(RepairAction(...))``."""

    def _step_payload(self, action: RepairAction) -> dict[str, Any]:
        return {"tool": action.tool, "args": action.args}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[RepairObservation]:
        obs = payload.get("observation", {})
        observation = RepairObservation(
            text=obs.get("text", ""), instance_id=obs.get("instance_id", ""), tool=obs.get("tool", ""),
            done=payload.get("done", False), reward=payload.get("reward"), metadata=obs.get("metadata", {}),
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(episode_id=payload.get("episode_id"), step_count=payload.get("step_count", 0))

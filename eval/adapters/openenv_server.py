"""The repair environment served as an OpenEnv environment (``openenv-core``, the optional extra ``openenv``).

One OpenEnv session is one :class:`eval.env.RepairEnvironment` over a dataset's rows
(``RepairEnvironment.from_dataset``): ``reset(instance_id=...)`` materializes the task into its own workspace
and returns the problem statement plus the workspace brief; ``step(RepairAction(tool=..., args={...}))`` calls
one of the seven tools (list_files, read_file, write_file, query, dbt, validate, submit) and returns its text.
The episode ends at ``submit`` (or the turn cap); the reward of that last step is the official score, 1.0 or
0.0, and every earlier step carries reward 0.0.

Bad requests get a one-line reason, never a traceback: over HTTP a ``reset`` of an unknown or refused task, a
step before any reset, an unknown tool argument or one of the wrong type is a 400 (``BadRequest``), a body over
``MAX_REQUEST_BYTES`` a 413, a request while every session slot is taken a 429 (``ServerBusy``); over the
WebSocket the same one line is the error message. The rows themselves are untrusted input, checked before use
(``corpora.untrusted``). Limits: ``max_concurrent_envs`` environments at once, WebSocket sessions and HTTP
resets counted together (an HTTP ``/reset`` builds a throwaway environment: it holds a slot while it runs);
requests of at most ``MAX_REQUEST_BYTES``; episodes as long as the environment's turn cap
(``EpisodeLimits``).

Serve with :func:`make_app` (a FastAPI app, ``uvicorn``), drive with :class:`RepairEnvClient` (OpenEnv's own
WebSocket client; ``.sync()`` for blocking use). Concurrency: OpenEnv makes one environment per WebSocket
session and runs each session's reset/step in that session's own executor; each environment has its own
workspace and every dbt build runs in its own bubblewrap sandbox, so ``max_concurrent_envs`` sessions build at
once (bounded by cores and memory: a build is one dbt process, one thread). The server runs untrusted project
code only through the sandbox, like every other entry point.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any, Literal

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.eval.env.environment import DatasetTasks, EnvSettings, RepairEnvironment
from dbt_harvest.eval.env.errors import InvalidAction
from dbt_harvest.eval.env.tools import check_args

TOOLS = ("list_files", "read_file", "write_file", "query", "dbt", "validate", "submit")
#: the largest request body (HTTP) or message (WebSocket) the server reads; a write_file of the largest file
#: an agent may write (eval.env.policy.MAX_WRITE_CHARS characters) fits with room to spare
MAX_REQUEST_BYTES = 1 << 20


class BadRequest(ValueError):
    """A request the server refuses, with the one line that says why (HTTP 400)."""


class ServerBusy(RuntimeError):
    """Every session slot is taken (HTTP 429)."""


class Slots:
    """The session cap shared by WebSocket sessions and HTTP resets: one slot per live environment."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = threading.BoundedSemaphore(size)

    def take(self) -> None:
        if not self._free.acquire(blocking=False):
            raise ServerBusy(f"all {self.size} session slots are in use; retry when a session ends")

    def give(self) -> None:
        self._free.release()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__


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

    def __init__(self, tasks: DatasetTasks, settings: EnvSettings | None = None, slots: Slots | None = None) -> None:
        super().__init__()
        if slots is not None:
            slots.take()
        self._slots = slots
        self._env = RepairEnvironment(tasks, settings or EnvSettings(statement_in_observation=True))
        self._state = State(episode_id=None, step_count=0)
        self._instance_id = ""

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, instance_id: str | None = None, **kwargs: Any
    ) -> RepairObservation:
        if not isinstance(instance_id, str) or not instance_id:
            raise BadRequest("reset needs instance_id: the id of the task to play")
        try:
            text = self._env.reset(instance_id=instance_id)
        except HarvestError as exc:  # unknown task, a row refused as untrusted input, a workspace not made
            raise BadRequest(f"reset {instance_id[:200]!r}: {_one_line(exc)}") from None
        self._instance_id = instance_id
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return RepairObservation(text=text, instance_id=instance_id, done=False, reward=0.0)

    def step(self, action: RepairAction, timeout_s: float | None = None, **kwargs: Any) -> RepairObservation:
        if not self._instance_id:
            raise BadRequest("no episode: reset(instance_id=...) first")
        try:
            args = check_args(action.tool, action.args)
        except InvalidAction as exc:
            raise BadRequest(_one_line(exc)) from None
        text = getattr(self._env, action.tool)(**args)
        self._state.step_count += 1
        done = self._env.episode.done
        reward = self._env.get_reward() if done else 0.0
        return RepairObservation(text=text, instance_id=self._instance_id, tool=action.tool, done=done, reward=reward)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self._env._close()
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.give()


def make_app(
    dataset: str,
    split: str = "train",
    *,
    repo_mirror: Path | None = None,
    max_concurrent_envs: int = 4,
    settings: EnvSettings | None = None,
):  # -> fastapi.FastAPI
    """The OpenEnv FastAPI app serving ``dataset``'s ``split`` (rows read once, shared by every session)."""
    from dataclasses import replace

    from fastapi import Request
    from fastapi.responses import JSONResponse
    from openenv.core.env_server.http_server import create_app

    tasks = DatasetTasks(dataset, split, repo_mirror=repo_mirror)
    session_settings = replace(settings or EnvSettings(), statement_in_observation=True)
    slots = Slots(max_concurrent_envs)
    app = create_app(
        lambda: RepairOpenEnv(tasks, session_settings, slots),
        RepairAction,
        RepairObservation,
        env_name="dbt-repair",
        max_concurrent_envs=max_concurrent_envs,
    )

    async def bad_request(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": _one_line(exc)}, status_code=400)

    async def busy(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": _one_line(exc)}, status_code=429)

    app.add_exception_handler(BadRequest, bad_request)
    app.add_exception_handler(ServerBusy, busy)

    @app.middleware("http")
    async def bounded(request: Request, call_next):
        length = request.headers.get("content-length", "")
        if (length and (not length.isdigit() or int(length) > MAX_REQUEST_BYTES)) or (
            not length and request.headers.get("transfer-encoding")
        ):
            return JSONResponse(
                {"detail": f"request body over {MAX_REQUEST_BYTES:,} bytes (or of no stated length)"}, status_code=413
            )
        return await call_next(request)

    return app


class RepairEnvClient(EnvClient[RepairAction, RepairObservation, State]):
    """OpenEnv's client for this environment: ``reset(instance_id=...)``, ``step(RepairAction(...))``."""

    def _step_payload(self, action: RepairAction) -> dict[str, Any]:
        return {"tool": action.tool, "args": action.args}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[RepairObservation]:
        obs = payload.get("observation", {})
        observation = RepairObservation(
            text=obs.get("text", ""),
            instance_id=obs.get("instance_id", ""),
            tool=obs.get("tool", ""),
            done=payload.get("done", False),
            reward=payload.get("reward"),
            metadata=obs.get("metadata", {}),
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(episode_id=payload.get("episode_id"), step_count=payload.get("step_count", 0))

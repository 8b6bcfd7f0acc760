"""The episode state machine: actions in, observations out, until submit, a turn cap, or a loop.

States: ``running`` -> one of ``submitted`` (the agent called submit; the workspace was graded),
``looped`` (the same action, same arguments, ``repeat_limit`` times in a row), ``turn_cap`` (``max_turns``
actions without submitting), ``abandoned`` (the driver stopped without submitting, e.g. the model
answered without a tool call and the conversation ended). Every action is one turn; an invalid one (unknown
tool, bad arguments, a refused path, a reply without a tool call) is counted and answered with an
error that says what to do. Each step is appended to the transcript, which the audit saves as JSONL.

After every action that runs dbt or SQL (``dbt``, ``query``, ``validate``) the episode's
``WorkspaceGuard`` checks that the project is still exactly what the agent wrote with ``write_file``;
a change made any other way (an agent's SQL writing a Python model, a link planted by a model) fails the
action with a message saying what changed, and is undone. A refusal of the sandbox itself (a workspace
the project tampered with) ends up as an error observation too, never as an exception out of ``act``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env import tools
from dbt_harvest.eval.env.errors import InvalidAction
from dbt_harvest.eval.env.grading import grade
from dbt_harvest.eval.env.guard import WorkspaceGuard
from dbt_harvest.eval.env.workspace import TaskWorkspace
from dbt_harvest.harvester.grading.verdict import Graded
from dbt_harvest.harvester.grading.warm import WarmBuilds

RUNNING, SUBMITTED, LOOPED, TURN_CAP, ABANDONED = "running", "submitted", "looped", "turn_cap", "abandoned"
NO_TOOL_CALL = "<no tool call>"
#: Actions that run dbt or SQL in the sandbox: the guard checks the workspace after each.
RUNS_CODE = ("dbt", "query", "validate")


@dataclass(frozen=True)
class EpisodeLimits:
    """The bounds of one episode."""

    max_turns: int = 30
    repeat_limit: int = 3  # this many identical actions in a row end the episode
    observation_chars: int = 8000

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.repeat_limit < 2 or self.observation_chars < 200:
            raise ValueError(
                f"invalid episode limits {self}: max_turns >= 1, repeat_limit >= 2, observation_chars >= 200"
            )


@dataclass(frozen=True)
class EpisodeOutcome:
    """How an episode ended; ``submission`` is None unless the agent submitted."""

    instance_id: str
    status: str
    turns: int
    invalid_actions: int
    submission: Graded | None

    @property
    def submitted(self) -> bool:
        return self.status == SUBMITTED and self.submission is not None

    @property
    def official(self) -> int:
        return self.submission.official if self.submission else 0

    @property
    def strict(self) -> int:
        return self.submission.strict if self.submission else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "status": self.status,
            "turns": self.turns,
            "invalid_actions": self.invalid_actions,
            "official": self.official,
            "strict": self.strict,
            "submission": self.submission.to_dict() if self.submission else None,
        }


def action_key(tool: str, args: Any) -> str:
    """A canonical key of an action: the same tool with the same arguments gives the same key."""
    try:
        body = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        body = repr(args)
    return hashlib.sha256(f"{tool}\0{body}".encode()).hexdigest()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 60] + f"\n… [{len(text) - limit + 60} characters cut]"


class Episode:
    """One agent's attempt at one task in one workspace."""

    def __init__(
        self,
        task: TaskRecord,
        workspace: TaskWorkspace,
        settings: tools.RunSettings = tools.RunSettings(),
        limits: EpisodeLimits = EpisodeLimits(),
        grader: Callable[[TaskRecord, TaskWorkspace, tools.RunSettings], Graded] = grade,
        warm: WarmBuilds | None = None,
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.settings = settings
        self.limits = limits
        self._grader = grader
        self._warm = warm  # the environment's warm sandboxed child for fallback builds (None: a cold one each)
        self.status = RUNNING
        self.turns = 0
        self.invalid_actions = 0
        self.submission: Graded | None = None
        self.transcript: list[dict[str, Any]] = []
        self._last_key = ""
        self._repeats = 0
        self._started = time.monotonic()
        self.guard = WorkspaceGuard.take(workspace.root, workspace.project_dir, workspace.db_file)
        #: what the agent wrote (workspace-relative path -> text): the fast checks grade these edits
        self.edits: dict[str, str] = {}

    # -- state -----------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.status != RUNNING

    @property
    def outcome(self) -> EpisodeOutcome:
        return EpisodeOutcome(self.task.instance_id, self.status, self.turns, self.invalid_actions, self.submission)

    def record(self, event: dict[str, Any]) -> None:
        """Append an event (a driver's message, a note) to the transcript."""
        self.transcript.append({"t": round(time.monotonic() - self._started, 3), **event})

    def abandon(self, reason: str) -> None:
        """The driver stops without submitting."""
        if not self.done:
            self.status = ABANDONED
            self.record({"kind": "end", "status": ABANDONED, "reason": reason})

    # -- actions ---------------------------------------------------------------------------------
    def act(self, tool: str, args: Any = None) -> str:
        """Run one action and return the observation (an error text for invalid actions)."""
        if self.done:
            return f"error: the episode is over ({self.status}); no more actions are taken"
        self.turns += 1
        key = action_key(tool, args)
        self._repeats = self._repeats + 1 if key == self._last_key else 1
        self._last_key = key
        started = time.monotonic()
        invalid = False
        if self._repeats >= self.limits.repeat_limit:
            self.status = LOOPED
            observation = f"error: the same action was repeated {self._repeats} times in a row; the episode ends without a submission"
        else:
            try:
                observation = self._dispatch(tool, args)
            except InvalidAction as exc:
                invalid = True
                self.invalid_actions += 1
                observation = f"error: {exc}"
            except HarvestError as exc:  # the sandbox refused (a workspace the project tampered with)
                invalid = True
                self.invalid_actions += 1
                observation = f"error: the {tool} action could not run: {' '.join(str(exc).split())}"
        if not self.done and self.turns >= self.limits.max_turns:
            self.status = TURN_CAP
            observation += (
                f"\n(turn cap of {self.limits.max_turns} actions reached; the episode ends without a submission)"
            )
        if tool != "read_file" or invalid:  # a file is returned whole (policy caps its size) so it can be edited
            observation = _clip(observation, self.limits.observation_chars)
        self.record(
            {
                "kind": "action",
                "turn": self.turns,
                "tool": tool,
                "args": args,
                "invalid": invalid,
                "observation": observation,
                "wall_s": round(time.monotonic() - started, 3),
            }
        )
        if self.done:
            self.record({"kind": "end", **self.outcome.to_dict()})
        return observation

    def no_tool_call(self, text: str) -> str:
        """A reply without a tool call: an invalid action (and a repeated one counts toward a loop)."""
        return self.act(NO_TOOL_CALL, {"text": text})

    def _dispatch(self, tool: str, args: Any) -> str:
        if tool == NO_TOOL_CALL:
            raise InvalidAction(
                f"no tool call found in your reply; call one of {', '.join(tools.TOOL_NAMES)} (submit when done)"
            )
        clean = tools.check_args(tool, args)
        ws, settings = self.workspace, self.settings
        if tool == "list_files":
            return tools.list_files(ws, clean.get("path", "."))
        if tool == "read_file":
            return tools.read_file(ws, clean["path"])
        if tool == "write_file":
            answer = tools.write_file(ws, clean["path"], clean["content"])
            _, rel = tools.files.check_write(ws.policy, clean["path"])
            self.guard.record_write(rel, clean["content"].encode("utf-8"))
            self.edits[rel] = clean["content"]
            return answer
        if tool in RUNS_CODE:
            return self._guarded(tool, clean)
        assert tool == "submit"
        try:
            self.submission = self._graded_submission() or self._grader(self.task, ws, settings)
        except HarvestError as exc:
            self.submission = Graded.not_built(f"the submission could not be built: {' '.join(str(exc).split())}")
        self.status = SUBMITTED
        return "submitted; your project was built once more for the hidden check. The episode is over."

    def _graded_validate(self) -> str | None:
        """The validate answer through the one grading path (None: build the workspace instead)."""
        if not self.settings.graded_edits:
            return None
        from dbt_harvest.eval.env.graded_edits import validate_edits

        return validate_edits(self.task, self.edits, limits=self.settings.limits, warm=self._warm)

    def _graded_submission(self) -> Graded | None:
        """The submission graded through the one grading path (only with the default grader, when settings
        allow; None: build the workspace instead)."""
        if not self.settings.graded_edits or self._grader is not grade:
            return None
        from dbt_harvest.eval.env.graded_edits import submit_edits
        from dbt_harvest.harvester.sandbox import safe_fs

        holder = self.workspace.root / ".harvest_fast"
        safe_fs.rmtree(holder)
        holder.mkdir()
        return submit_edits(
            self.task, self.edits, holder / "capture.duckdb", limits=self.settings.limits, warm=self._warm
        )

    def _guarded(self, tool: str, clean: dict[str, Any]) -> str:
        """Run a dbt/SQL tool, then hold the write policy: any other change to the project is undone and
        fails the action."""
        ws, settings = self.workspace, self.settings
        failed: Exception | None = None
        answer = ""
        try:
            if tool == "query":
                answer = tools.query(ws, settings, clean["sql"])
            elif tool == "dbt":
                answer = tools.dbt(ws, settings, clean["command"], clean.get("select", ""))
            else:
                answer = self._graded_validate() or tools.validate(ws, settings)
        except (InvalidAction, HarvestError) as exc:
            failed = exc
        violation = self.guard.enforce(tool)
        if violation:
            raise InvalidAction(violation)
        if failed is not None:
            raise failed
        return answer

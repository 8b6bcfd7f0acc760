"""Agentic SFT conversations from REAL oracle episodes played in the eval RepairEnvironment.

The scripted oracle of sft_data.py invents its tool results; a model trained on those learns
observations that the environment never produces. Here the oracle plays through the very environment
the audit and GRPO use (eval/env): it lists the project, reads each file the fix touches, writes the
true fix, runs the configured checks (validate by default) and submits. The conversation is rendered
from the episode's transcript (the real calls and the real observations), with the system prompt and
first user message of the eval chat loop (eval/drivers/chat.py) and the environment's own tool schemas
(``eval.env.tool_schemas``), so SFT, GRPO and evaluation share one prompt format. An oracle episode that
does not score 1 is refused (the task or the environment is broken), never rendered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.train.errors import TrainDataError

#: Checks the oracle may run between writing the fix and submitting (environment tool names).
CHECKS = ("validate", "dbt_build")


def _play_oracle(env: Any, task: TaskRecord, checks: Sequence[str]) -> None:
    """List, read each file of the fix, write it fixed, run the checks, submit: all through the tools."""
    from dbt_harvest.core.patching import PatchError, apply_to_text, parse_patch

    env.list_files(".")
    for file_patch in parse_patch(task.fix_patch):
        current = env.read_file(file_patch.path)
        if current.startswith("error:"):
            raise TrainDataError(f"{task.instance_id}: the environment cannot read {file_patch.path}: {current}")
        try:
            fixed = apply_to_text(current, file_patch)
        except PatchError as exc:
            raise TrainDataError(f"{task.instance_id}: the fix patch does not apply in the environment: {exc}") from None
        answer = env.write_file(file_patch.path, fixed)
        if answer.startswith("error:"):
            raise TrainDataError(f"{task.instance_id}: the environment refused to write {file_patch.path}: {answer}")
    for check in checks:
        if check == "validate":
            env.validate()
        elif check == "dbt_build":
            env.dbt("build")
        else:
            raise TrainDataError(f"unknown oracle check {check!r}; one of {', '.join(CHECKS)}")
    env.submit()


def render_transcript(task: TaskRecord, transcript: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The episode as chat messages: eval's system prompt, the first user message, then call/result pairs."""
    from dbt_harvest.eval.drivers.chat import SYSTEM_PROMPT, first_message

    reset = next((e for e in transcript if e.get("kind") == "reset"), None)
    if reset is None:
        raise TrainDataError(f"{task.instance_id}: the episode transcript has no reset event")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": first_message(task, reset["observation"])},
    ]
    for event in transcript:
        if event.get("kind") != "action":
            continue
        arguments = json.loads(json.dumps(event["args"] or {}))
        messages.append({
            "role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": event["tool"], "arguments": arguments}}],
        })
        messages.append({"role": "tool", "name": event["tool"], "content": event["observation"]})
    return messages


class EnvironmentOracle:
    """An ``episode`` for ``sft_data.agentic_rows``: plays the oracle in a fresh RepairEnvironment per task.

    ``outcomes`` keeps each task's EpisodeOutcome (official score 1 by construction: anything else raises).
    ``tools`` is the environment's tool schemas, which the rows carry.
    """

    def __init__(self, pins: Path | None = None, scratch: Path | None = None, checks: Sequence[str] = ("validate",)) -> None:
        unknown = [c for c in checks if c not in CHECKS]
        if unknown:
            raise TrainDataError(f"unknown oracle check(s) {unknown}; choose from {', '.join(CHECKS)}")
        self.pins, self.scratch, self.checks = pins, scratch, tuple(checks)
        self.outcomes: dict[str, Any] = {}

    @property
    def tools(self) -> list[dict[str, Any]]:
        from dbt_harvest.eval.env import tool_schemas

        return tool_schemas()

    def __call__(self, task: TaskRecord, broken: Mapping[str, str], max_file_chars: int) -> list[dict[str, Any]]:
        from dbt_harvest.eval.env import EnvSettings, RepairEnvironment

        settings = EnvSettings(pins=self.pins, scratch=self.scratch)
        with RepairEnvironment({task.instance_id: task}, settings) as env:
            env.reset(instance_id=task.instance_id)
            _play_oracle(env, task, self.checks)
            outcome = env.outcome
            transcript = list(env.episode.transcript)
        if outcome.official != 1:
            raise TrainDataError(
                f"{task.instance_id}: the oracle episode ended {outcome.status} with official score {outcome.official}, "
                "not 1; the task or the environment is broken, so it yields no training row"
            )
        self.outcomes[task.instance_id] = outcome
        return render_transcript(task, transcript)

"""Agentic SFT conversations from REAL oracle episodes played in the eval RepairEnvironment.

The scripted oracle of sft_data.py makes up its tool results; a model trained on those learns
observations that the environment never produces. Here the oracle plays an investigation plan
(train/investigation.py: query the reported table, read its model and YAML, follow lineage down to the
broken model, write the true fix, validate, submit) through the very environment the audit and GRPO use
(eval/env). The conversation is rendered
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


def _play_plan(env: Any, task: TaskRecord, steps: Sequence[Any]) -> None:
    """Play an investigation plan (``train.investigation.plan``) through the environment's tools. The
    fix is applied to what the environment reads back, so a plan never writes text the agent did not see."""
    from dbt_harvest.core.patching import PatchError, apply_to_text, parse_patch
    from dbt_harvest.train.investigation import WRITE_FIX

    patches = {p.path: p for p in parse_patch(task.fix_patch)}
    for step in steps:
        if step.tool == WRITE_FIX:
            path = step.args["path"]
            current = _last_read(env, path)
            if current is None:
                current = env.read_file(path)
            if current.startswith("error:"):
                raise TrainDataError(f"{task.instance_id}: the environment cannot read {path}: {current}")
            try:
                fixed = apply_to_text(current, patches[path])
            except PatchError as exc:
                raise TrainDataError(
                    f"{task.instance_id}: the fix patch does not apply in the environment: {exc}"
                ) from None
            answer = env.write_file(path, fixed)
            if answer.startswith("error:"):
                raise TrainDataError(f"{task.instance_id}: the environment refused to write {path}: {answer}")
            continue
        answer = getattr(env, step.tool)(**step.args)
        if step.tool in ("list_files", "read_file", "query") and str(answer).startswith(("error:", "query error:")):
            raise TrainDataError(
                f"{task.instance_id}: the oracle's {step.tool}({step.args}) failed in the environment: {answer}"
            )


def _last_read(env: Any, path: str) -> str | None:
    """What the episode's last read of ``path`` returned (None: not read yet)."""
    for event in reversed(env.episode.transcript):
        if event.get("tool") == "read_file" and (event.get("args") or {}).get("path") == path:
            return str(event["observation"])
    return None


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
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": event["tool"], "arguments": arguments}}],
            }
        )
        messages.append({"role": "tool", "name": event["tool"], "content": event["observation"]})
    return messages


class EnvironmentOracle:
    """An ``episode`` for ``sft_data.agentic_rows``: plays investigation ``variant`` of the oracle
    (``train.investigation.plan`` over the broken project's files) in a fresh RepairEnvironment.

    ``outcomes`` keeps each (task, variant)'s EpisodeOutcome (official score 1 by construction: anything
    else raises). ``tools`` is the environment's tool schemas, which the rows carry.
    """

    def __init__(self, pins: Path | None = None, scratch: Path | None = None) -> None:
        self.pins, self.scratch = pins, scratch
        self.outcomes: dict[tuple[str, int], Any] = {}

    @property
    def tools(self) -> list[dict[str, Any]]:
        from dbt_harvest.eval.env import tool_schemas

        return tool_schemas()

    def __call__(
        self, task: TaskRecord, broken: Mapping[str, str], max_file_chars: int, *, variant: int = 0
    ) -> list[dict[str, Any]]:
        from dbt_harvest.eval.env import EnvSettings, RepairEnvironment
        from dbt_harvest.train.investigation import plan

        if not broken:
            raise TrainDataError(
                f"{task.instance_id}: the environment oracle plans from the broken project's files; "
                "pass a project source to agentic_rows"
            )
        steps = plan(task, broken, variant)
        settings = EnvSettings(pins=self.pins, scratch=self.scratch)
        with RepairEnvironment({task.instance_id: task}, settings) as env:
            env.reset(instance_id=task.instance_id)
            _play_plan(env, task, steps)
            outcome = env.outcome
            transcript = list(env.episode.transcript)
        if outcome.official != 1:
            raise TrainDataError(
                f"{task.instance_id}: the oracle episode (variant {variant}) ended {outcome.status} with official "
                f"score {outcome.official}, not 1; the task or the environment is broken, so it yields no training row"
            )
        self.outcomes[(task.instance_id, variant)] = outcome
        return render_transcript(task, transcript)

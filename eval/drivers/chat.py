"""The chat loop shared by model drivers: messages in, tool calls out, observations back, until done.

A ``ChatModel`` answers a message list (with the tool schemas) with an ``AssistantTurn``: its text and
its tool calls. The loop feeds each call to the episode, returns the observation as a ``tool`` message,
and answers a reply without a tool call with the episode's error (an invalid action, which also counts
toward loop detection). Everything the model says is recorded in the episode's transcript.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env.environment import RepairEnvironment, tool_schemas

SYSTEM_PROMPT = (
    "You are a data engineer fixing a dbt project whose output is wrong. Use the tools to inspect the "
    "project, query its built tables, edit model files and run dbt. The hidden check compares the project's "
    "tables with the correct ones; dbt tests passing is not enough. Call submit when the project is fixed."
)
#: for another benchmark's instance (no planted bug: Spider 2.0-DBT asks to complete or change a project)
BENCHMARK_SYSTEM_PROMPT = (
    "You are a data engineer working on a dbt project. Use the tools to inspect the project, query its "
    "tables, write model files and run dbt. The task says what the project must produce; the hidden check "
    "compares the project's tables with the correct ones, and dbt tests passing is not enough. Call submit "
    "when the task is done."
)


def system_prompt(task: TaskRecord) -> str:
    """The repair prompt for our repair tasks; the neutral one for a completion task (a model to write, not a
    bug to find) and for a benchmark's instance (it has no broken patch)."""
    return SYSTEM_PROMPT if task.broken_patch and task.kind == "repair" else BENCHMARK_SYSTEM_PROMPT


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: Any  # a dict when the model produced valid JSON, else the raw text


@dataclass(frozen=True)
class AssistantTurn:
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)


class ContextFull(Exception):
    """The conversation no longer fits the model's context; the episode ends without a submission."""


class ChatModel(Protocol):
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn: ...


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as a dict when they are a JSON object (string or dict), else as given."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
        return value
    return raw


def first_message(task: TaskRecord, observation: str) -> str:
    return f"{task.problem_statement.strip()}\n\n{observation}"


def play_chat(model: ChatModel, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
    """Run the conversation until the episode is over."""
    schemas = tool_schemas()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(task)},
        {"role": "user", "content": first_message(task, observation)},
    ]
    episode = env.episode
    while not episode.done:
        try:
            turn = model.complete(messages, schemas)
        except ContextFull as exc:
            episode.abandon(f"context full: {exc}")
            return
        episode.record(
            {
                "kind": "message",
                "role": "assistant",
                "content": turn.content,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls],
            }
        )
        if not turn.tool_calls:
            messages.append({"role": "assistant", "content": turn.content})
            messages.append({"role": "user", "content": episode.no_tool_call(turn.content)})
            continue
        messages.append(
            {
                "role": "assistant",
                "content": turn.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _as_json_text(c.arguments)},
                    }
                    for c in turn.tool_calls
                ],
            }
        )
        for call in turn.tool_calls:
            answer = episode.act(call.name, parse_arguments(call.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": answer})
            if episode.done:
                break


def _as_json_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, sort_keys=True)

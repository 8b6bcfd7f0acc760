"""SFT rows from train-split tasks: single-turn repairs and agentic tool-calling conversations.

Both formats are conversational so the chat template of the model decides the tokens:

- single-turn (prompt-completion): system + user (problem statement and the relevant project files of
  the BROKEN project) -> assistant (the corrected file(s), in the completion format the reward parses,
  train/completion.py). Loss on the completion only.
- agentic (messages + tools): an oracle episode rendered as a tool-calling conversation — list the
  files, read the model, write the fix, build, submit. Loss on assistant turns only. The tool names
  and arguments are ``AGENT_TOOLS`` for the scripted ``oracle_episode`` (tool results made up from the
  task record, kept for projects without a pin). Pass ``episode=train.env_episodes.EnvironmentOracle()``
  to render REAL oracle episodes of the eval RepairEnvironment instead: its transcript (real calls, real
  observations) and its tool schemas (an episode object's ``tools`` attribute is what the rows carry).

Every builder passes each record through corpora's firewall first (train split only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dbt_harvest.core.task_record import TaskRecord, read_task
from dbt_harvest.train.completion import render_files
from dbt_harvest.train.errors import TrainDataError
from dbt_harvest.corpora.firewall import require_train
from dbt_harvest.train.project import ProjectSource, corrected_files, relevant_files

SYSTEM_PROMPT = (
    "You are a data engineer fixing a dbt project. A hidden check compares the project's output tables "
    "with the correct ones. Answer with the full corrected content of every file you change, each in a "
    '<file path="..."> ... </file> block.'
)
AGENT_SYSTEM_PROMPT = (
    "You are a data engineer fixing a dbt project with tools. Inspect the project, find the bug, write the "
    "fix, build it, and submit when the output is right."
)


def _tool(name: str, description: str, params: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
                "required": list(params),
            },
        },
    }


#: The agent's tools (names and arguments must match the eval environment's).
AGENT_TOOLS: tuple[dict[str, Any], ...] = (
    _tool("list_files", "List the files of the dbt project.", {}),
    _tool("read_file", "Read one file of the project.", {"path": "repo-relative path"}),
    _tool("run_sql", "Run a read-only SQL query against the last build.", {"sql": "one SELECT statement"}),
    _tool("write_file", "Replace the content of one project file.", {"path": "repo-relative path", "content": "full new text"}),
    _tool("build", "Run dbt build (models and tests) on the project.", {}),
    _tool("submit", "Submit the current build as the answer.", {}),
)


def load_train_tasks(tasks_dir: str, max_rows: int = 0) -> list[TaskRecord]:
    """The train tasks a run uses, sorted by id, through the firewall.

    ``tasks_dir`` empty: the corpora store's train split (HARVEST_HOME/tasks/train, checked against the
    split ledger under the pins folder). Otherwise a folder of task records, every one of which must be
    a train record: a dev or test record there is refused (FirewallError), not skipped.
    """
    if not tasks_dir:
        from dbt_harvest.corpora.store import load_tasks
        from dbt_harvest.core.home import harvest_home, pins_dir

        records = load_tasks("train", harvest_home(), pins_dir(), purpose="train")
        where = "the train split of HARVEST_HOME"
    else:
        records = require_train(sorted((read_task(p) for p in Path(tasks_dir).glob("*.json")), key=lambda r: r.instance_id))
        where = tasks_dir
    if not records:
        raise TrainDataError(f"no train task records in {where}; mint tasks first (harvest mint)")
    return records[:max_rows] if max_rows else records


def dataset_sha256(tasks: Sequence[TaskRecord]) -> str:
    """One digest for the exact records a run trains on (ids and full contents, order-independent)."""
    lines = sorted(f"{t.instance_id} {hashlib.sha256(t.to_json().encode()).hexdigest()}" for t in tasks)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def repair_prompt(task: TaskRecord, files: Mapping[str, str], max_file_chars: int) -> list[dict[str, str]]:
    """The single-turn prompt (system + user), shared by SFT and GRPO."""
    shown = relevant_files(task, files, max_file_chars)
    body = "\n\n".join(f'<file path="{path}">\n{text}</file>' for path, text in shown.items())
    user = f"{task.problem_statement.strip()}\n\nThe model to fix is {task.file}. Project files:\n\n{body}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def single_turn_rows(tasks: Iterable[TaskRecord], project: ProjectSource, max_file_chars: int) -> list[dict[str, Any]]:
    rows = []
    for task in tasks:
        require_train([task])
        broken = project.broken_files(task)
        fixed = corrected_files(task, broken)
        rows.append(
            {
                "prompt": repair_prompt(task, broken, max_file_chars),
                "completion": [{"role": "assistant", "content": render_files(fixed)}],
                "instance_id": task.instance_id,
            }
        )
    return rows


def grpo_prompt_rows(tasks: Iterable[TaskRecord], project: ProjectSource, max_file_chars: int) -> list[dict[str, Any]]:
    """GRPO rows: the single-turn prompt and the task id the reward function looks up."""
    rows = []
    for task in tasks:
        require_train([task])
        rows.append({"prompt": repair_prompt(task, project.broken_files(task), max_file_chars), "instance_id": task.instance_id})
    return rows


def _call(name: str, **arguments: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def _result(name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "name": name, "content": content}


def oracle_episode(task: TaskRecord, broken: Mapping[str, str], max_file_chars: int) -> list[dict[str, Any]]:
    """The oracle's conversation: inspect, read, write the true fix, build, submit."""
    fixed = corrected_files(task, broken)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": AGENT_SYSTEM_PROMPT},
        {"role": "user", "content": task.problem_statement.strip()},
        _call("list_files"),
        _result("list_files", "\n".join(sorted(broken))[:max_file_chars]),
    ]
    for path in relevant_files(task, broken, max_file_chars):
        messages += [_call("read_file", path=path), _result("read_file", broken[path])]
    for path, text in fixed.items():
        messages += [_call("write_file", path=path, content=text), _result("write_file", f"wrote {len(text)} characters to {path}")]
    checks = task.local_checks
    messages += [
        _call("build"),
        _result("build", f"dbt build: OK; {checks.tests_total} tests, 0 failed"),
        _call("submit"),
        _result("submit", "submitted"),
        {"role": "assistant", "content": f"Fixed {', '.join(fixed)} and submitted the build."},
    ]
    return messages


Episode = Callable[[TaskRecord, Mapping[str, str], int], list[dict[str, Any]]]


def agentic_rows(
    tasks: Iterable[TaskRecord], project: ProjectSource | None, max_file_chars: int, episode: Episode = oracle_episode
) -> list[dict[str, Any]]:
    """One tool-calling conversation per task. ``project`` may be None for an episode that does not use
    the broken files (EnvironmentOracle materializes the task from its pin)."""
    tools = getattr(episode, "tools", AGENT_TOOLS)
    rows = []
    for task in tasks:
        require_train([task])
        broken = project.broken_files(task) if project is not None else {}
        messages = episode(task, broken, max_file_chars)
        rows.append({"messages": _json_safe(messages), "tools": list(tools), "instance_id": task.instance_id})
    return rows


def to_dataset(rows: list[dict[str, Any]]):  # -> datasets.Dataset
    """Rows as a datasets.Dataset. Agentic rows keep tool arguments and tool schemas as JSON values:
    Arrow would otherwise merge every call's arguments into one struct and render ``null`` for the
    keys a call does not have (``list_files(path=null, content=null)``), teaching the model wrong calls."""
    from datasets import Dataset, Features, Json, List, Value

    if rows and "messages" in rows[0]:
        message = {
            "role": Value("string"),
            "content": Value("string"),
            "tool_calls": List({"type": Value("string"), "function": {"name": Value("string"), "arguments": Json()}}),
            "name": Value("string"),
        }
        features = Features({"messages": List(message), "tools": List(Json()), "instance_id": Value("string")})
        return Dataset.from_list(rows, features=features)
    return Dataset.from_list(rows)


def _json_safe(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return json.loads(json.dumps(messages))

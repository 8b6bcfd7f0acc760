"""SFT rows from train-split tasks: single-turn repairs and agentic tool-calling conversations.

Both formats are conversational so the chat template of the model decides the tokens, and neither tells
the model where the bug is (that is the skill the hidden check measures):

- single-turn (prompt-completion): system + user (problem statement and the files a data engineer opens
  for the reported symptom: the reported tables' models, their upstream lineage and its YAML, in an order
  seeded per task, ``train.project.relevant_files``) -> assistant (the corrected file(s), in
  the completion format the reward parses, train/completion.py). Loss on the completion only. A task whose broken file
  the budget would leave out of its prompt is left out (``left_out``), not rendered with a pointer.
- agentic (messages + tools): an oracle that investigates before it fixes (``train.investigation``:
  query the reported table, read its model and YAML, follow lineage to the broken model, write the fix,
  validate, submit), several variants per task. ``EnvironmentOracle`` (train/env_episodes.py) plays the
  plan in the real eval RepairEnvironment (real observations, the default for `harvest train sft`);
  ``scripted_episode`` renders the same plan without one (tool results from the project's files and the
  task record, for projects without a pin and for the corpus report). Loss on assistant turns only. The
  tools are the environment's (``eval.env.tool_schemas``).

Every builder passes each record through corpora's firewall first (train split only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dbt_harvest.core.task_record import TaskRecord, read_task
from dbt_harvest.corpora.firewall import require_train
from dbt_harvest.train.completion import render_files
from dbt_harvest.train.errors import PromptCoverageError, TrainDataError
from dbt_harvest.train.project import ProjectSource, corrected_files, relevant_files

#: the system prompt of a completion task's single-turn row: the file is missing, not broken
COMPLETION_SYSTEM_PROMPT = (
    "You are a data engineer completing a dbt project. A model the project documents has no SQL file; a hidden "
    "check compares the table it builds with the correct one. Write the missing model from its documentation "
    'and the models it may read, and answer with the full content of the file in a <file path="..."> ... </file> block.'
)
SYSTEM_PROMPT = (
    "You are a data engineer fixing a dbt project. A hidden check compares the project's output tables "
    "with the correct ones. Find the model whose logic breaks the reported rule and answer with the full "
    'corrected content of every file you change, each in a <file path="..."> ... </file> block.'
)


def load_train_tasks(tasks_dir: str, max_rows: int = 0) -> list[TaskRecord]:
    """The train tasks a run uses, sorted by id, through the firewall.

    ``tasks_dir`` empty: the corpora store's train split (HARVEST_HOME/tasks/train, checked against the
    split ledger under the pins folder). Otherwise a folder of task records, every one of which must be
    a train record: a dev or test record there is refused (FirewallError), not skipped.
    """
    if not tasks_dir:
        from dbt_harvest.core.home import harvest_home, pins_dir
        from dbt_harvest.corpora.store import load_tasks

        records = load_tasks("train", harvest_home(), pins_dir(), purpose="train")
        where = "the train split of HARVEST_HOME"
    else:
        records = require_train(
            sorted((read_task(p) for p in Path(tasks_dir).glob("*.json")), key=lambda r: r.instance_id)
        )
        where = tasks_dir
    if not records:
        raise TrainDataError(f"no train task records in {where}; mint tasks first (harvest mint)")
    return records[:max_rows] if max_rows else records


def dataset_sha256(tasks: Sequence[TaskRecord]) -> str:
    """One digest for the exact records a run trains on (ids and full contents, order-independent)."""
    lines = sorted(f"{t.instance_id} {hashlib.sha256(t.to_json().encode()).hexdigest()}" for t in tasks)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def repair_prompt(task: TaskRecord, files: Mapping[str, str], max_file_chars: int) -> list[dict[str, str]]:
    """The single-turn prompt (system + user), shared by SFT and GRPO. It names the reported tables (the
    statement does) and shows their lineage in an order seeded by the task; it never names the broken file."""
    shown = relevant_files(task, files, max_file_chars)
    body = "\n\n".join(f'<file path="{path}">\n{text}</file>' for path, text in shown.items())
    if task.kind == "completion":
        user = (
            f"{task.problem_statement.strip()}\n\nThe models upstream of the missing model and the YAML that "
            f"documents them:\n\n{body}"
        )
        return [{"role": "system", "content": COMPLETION_SYSTEM_PROMPT}, {"role": "user", "content": user}]
    tables = ", ".join(f"`{t}`" for t in task.grading.condition_tabs)
    user = (
        f"{task.problem_statement.strip()}\n\nThe models behind {tables}, their upstream models and the YAML "
        f"that documents them:\n\n{body}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


#: A row left out before rendering: (task id, why in one line).
LeftOut = tuple[str, str]


def _prompt_or_left_out(
    task: TaskRecord, files: Mapping[str, str], max_file_chars: int, left_out: list[LeftOut] | None
) -> list[dict[str, str]] | None:
    try:
        return repair_prompt(task, files, max_file_chars)
    except PromptCoverageError as exc:
        if left_out is None:
            raise
        left_out.append((task.instance_id, str(exc)))
        return None


def single_turn_rows(
    tasks: Iterable[TaskRecord], project: ProjectSource, max_file_chars: int, left_out: list[LeftOut] | None = None
) -> list[dict[str, Any]]:
    """One prompt-completion row per task. With a ``left_out`` list, a task whose prompt cannot show its
    broken file is recorded there (its id, why) instead of raising PromptCoverageError."""
    rows = []
    for task in tasks:
        require_train([task])
        broken = project.broken_files(task)
        prompt = _prompt_or_left_out(task, broken, max_file_chars, left_out)
        if prompt is None:
            continue
        fixed = corrected_files(task, broken)
        rows.append(
            {
                "prompt": prompt,
                "completion": [{"role": "assistant", "content": render_files(fixed)}],
                "instance_id": task.instance_id,
            }
        )
    return rows


def grpo_prompt_rows(
    tasks: Iterable[TaskRecord], project: ProjectSource, max_file_chars: int, left_out: list[LeftOut] | None = None
) -> list[dict[str, Any]]:
    """GRPO rows: the single-turn prompt and the task id the reward function looks up."""
    rows = []
    for task in tasks:
        require_train([task])
        prompt = _prompt_or_left_out(task, project.broken_files(task), max_file_chars, left_out)
        if prompt is not None:
            rows.append({"prompt": prompt, "instance_id": task.instance_id})
    return rows


def _call(name: str, **arguments: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def _result(name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "name": name, "content": content}


def _listing(files: Mapping[str, str], folder: str) -> str:
    prefix = "" if folder in ("", ".") else folder.rstrip("/") + "/"
    return "\n".join(p for p in sorted(files) if p.startswith(prefix)) or f"no files under {folder}"


def scripted_episode(
    task: TaskRecord, broken: Mapping[str, str], max_file_chars: int, *, variant: int = 0
) -> list[dict[str, Any]]:
    """Investigation ``variant`` of the oracle, rendered without an environment: file listings and reads
    from the broken project, the fix from the task, the checks' results from the task's local checks.
    A query is answered with what the statement reports (no database is built here)."""
    from dbt_harvest.eval.drivers.chat import SYSTEM_PROMPT as AGENT_SYSTEM_PROMPT
    from dbt_harvest.train.investigation import WRITE_FIX, plan

    fixed = corrected_files(task, broken)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": AGENT_SYSTEM_PROMPT},
        {"role": "user", "content": task.problem_statement.strip()},
    ]
    checks = task.local_checks
    for step in plan(task, broken, variant):
        if step.tool == WRITE_FIX:
            path = step.args["path"]
            text = fixed[path]
            messages += [_call("write_file", path=path, content=text), _result("write_file", f"updated {path}")]
        elif step.tool == "list_files":
            messages += [
                _call("list_files", **step.args),
                _result("list_files", _listing(broken, step.args["path"])[:max_file_chars]),
            ]
        elif step.tool == "read_file":
            messages += [_call("read_file", **step.args), _result("read_file", broken[step.args["path"]])]
        elif step.tool == "query":
            messages += [_call("query", **step.args), _result("query", "(rows as built; see the reported symptom)")]
        elif step.tool == "dbt":
            messages += [_call("dbt", **step.args), _result("dbt", "dbt build: OK")]
        elif step.tool == "validate":
            messages += [
                _call("validate"),
                _result(
                    "validate", f"local checks PASS: the project builds and all {checks.tests_total} dbt tests pass"
                ),
            ]
        elif step.tool == "submit":
            messages += [_call("submit"), _result("submit", "submitted")]
    return messages


#: An episode renders one investigation of a task: (task, broken files, max_file_chars, variant=) -> messages.
Episode = Callable[..., list[dict[str, Any]]]
#: The default episode: the scripted oracle.
oracle_episode: Episode = scripted_episode


def agentic_rows(
    tasks: Iterable[TaskRecord],
    project: ProjectSource | None,
    max_file_chars: int,
    episode: Episode = oracle_episode,
    variants: int = 1,
) -> list[dict[str, Any]]:
    """``variants`` tool-calling conversations per task (investigations 0..variants-1). ``project`` may be
    None for an episode that does not use the broken files (EnvironmentOracle materializes the task from
    its pin). Episodes that render the same conversation twice are kept once."""
    from dbt_harvest.eval.env import tool_schemas

    tools = getattr(episode, "tools", None) or tool_schemas()
    rows = []
    for task in tasks:
        require_train([task])
        broken = project.broken_files(task) if project is not None else {}
        seen: set[str] = set()
        for variant in range(variants):
            messages = _json_safe(episode(task, broken, max_file_chars, variant=variant))
            key = json.dumps(messages, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            rows.append(
                {"messages": messages, "tools": list(tools), "instance_id": task.instance_id, "variant": variant}
            )
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
        features = Features(
            {
                "messages": List(message),
                "tools": List(Json()),
                "instance_id": Value("string"),
                "variant": Value("int32"),
            }
        )
        return Dataset.from_list(rows, features=features)
    return Dataset.from_list(rows)


def _json_safe(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return json.loads(json.dumps(messages))

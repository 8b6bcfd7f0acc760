"""How an oracle investigates before it fixes: the tool calls of one agentic training episode, planned.

An oracle that reads exactly the broken model and writes the fix teaches a model to repair the file it is
pointed at. Real work starts from the symptom: look at the reported table, read its model and YAML, follow
``ref()`` lineage down to the model whose rule is wrong, fix it, run the local checks, submit. This module
plans such an investigation as data (a tuple of ``Step``), pure and seeded by (task id, variant), so that
each task yields several episodes that differ in order and depth:

- which reported table the investigation starts from (a task may report up to four);
- whether it lists the project first, and which folder;
- whether it builds and queries the reported table first, and with which query;
- whether a model's YAML is read before or after its SQL, and whether intermediate models' YAML is read;
- whether it also reads a parent model that is off the path to the bug (a lead that goes nowhere);
- whether it runs a dbt build before ``validate``.

The planner sees the task (its reported tables, its broken file and fix) because it is an oracle; what it
emits is an investigation a data engineer could have made from the statement alone: every file it reads is
on the lineage of a reported table. ``train.env_episodes`` plays a plan in the real environment; the
scripted episode of ``train.sft_data`` renders it without one. Tool names and arguments are the
environment's (``eval.env.tool_schemas``).
"""

from __future__ import annotations

import hashlib
import posixpath
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.harvester.mint.contract import READS
from dbt_harvest.train.lineage import documenting, lineage_path, models_by_name, refs, table_models

#: The pseudo-tool that writes the true fix of one file (resolved when the plan is played).
WRITE_FIX = "write_fix"
#: Steps that inspect rather than change or check (what "investigation length" counts).
INSPECTING = frozenset({"list_files", "read_file", "query", "dbt"})


@dataclass(frozen=True)
class Step:
    tool: str  # an environment tool name, or WRITE_FIX
    args: dict[str, str] = field(default_factory=dict)


def _rng(task: TaskRecord, variant: int) -> random.Random:
    seed = hashlib.sha256(f"{task.instance_id}\0{variant}".encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def fix_paths(task: TaskRecord) -> tuple[str, ...]:
    """The files the true repair writes, in patch order."""
    from dbt_harvest.core.patching import parse_patch

    return tuple(dict.fromkeys(p.path for p in parse_patch(task.fix_patch)))


def _route(files: Mapping[str, str], task: TaskRecord, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """(the reported table it starts from, the model paths it reads down to the bug).

    The first table is drawn among all the reported tables, not among those whose lineage holds the bug, so
    the first read says nothing of where the bug is (issue 59): when the bug is not upstream of it, its model
    is read first (a lead that goes nowhere) and the route goes on from a reported table whose lineage
    holds the bug."""
    tables = list(task.grading.condition_tabs)
    rng.shuffle(tables)
    first = next((t for t in tables if table_models(files, t)), "")
    detour: tuple[str, ...] = ()
    for table in sorted(tables, key=lambda t: t != first):  # the drawn table first, the others in drawn order
        for start in table_models(files, table):
            route = lineage_path(files, start, task.file)
            if route:
                lead = tuple(p for p in detour if p not in route)
                return first or table, (*lead, *route)
        if table == first:
            detour = table_models(files, table)[:1]
    return tables[0], (task.file,)


def _completion_plan(task: TaskRecord, files: Mapping[str, str], rng: random.Random) -> tuple[Step, ...]:
    """A completion's investigation: find where the model belongs, read its contract (the YAML that
    documents it), read the models it may read (its documented parents, some in a seeded order), maybe
    look at a parent's rows, write the model, build, validate, submit."""
    folder = posixpath.dirname(task.file) or "."
    steps: list[Step] = [Step("list_files", {"path": folder if rng.random() < 0.6 else "."})]
    written = fix_paths(task)  # the missing model, and the parents removed with it
    docs = documenting(files, written)
    for path in dict.fromkeys(p for w in written for p in docs.get(w, ())):
        steps.append(Step("read_file", {"path": path}))
    named = models_by_name(files)
    parents = list(
        dict.fromkeys(
            p
            for line in task.problem_statement.splitlines()
            if line.startswith(_READS_PREFIX)
            for ref_name in _backticked(line)
            for p in named.get(ref_name, ())
        )
    )
    if rng.random() < 0.5:
        rng.shuffle(parents)
    for path in parents[:6]:
        steps.append(Step("read_file", {"path": path}))
        more = documenting(files, [path]).get(path, ())
        if more and rng.random() < 0.3:
            steps.extend(Step("read_file", {"path": p}) for p in more if Step("read_file", {"path": p}) not in steps)
    if parents and rng.random() < 0.5:
        first = posixpath.basename(parents[0])[: -len(".sql")]
        steps.append(Step("query", {"sql": f"select * from {first} limit 5"}))
    steps.extend(Step(WRITE_FIX, {"path": path}) for path in fix_paths(task))
    if rng.random() < 0.6:
        steps.append(Step("dbt", {"command": "build"}))
    steps += [Step("validate"), Step("submit")]
    return tuple(steps)


#: how the completion statement's line of readable models starts
_READS_PREFIX = READS.split("{", 1)[0].strip()


def _backticked(line: str) -> list[str]:
    return [part for i, part in enumerate(line.split("`")) if i % 2 == 1]


def plan(task: TaskRecord, files: Mapping[str, str], variant: int = 0) -> tuple[Step, ...]:
    """The steps of investigation ``variant`` of ``task`` over the broken project's ``files``."""
    rng = _rng(task, variant)
    if task.kind == "completion":
        return _completion_plan(task, files, rng)
    table, route = _route(files, task, rng)
    steps: list[Step] = []
    if rng.random() < 0.7:
        folder = posixpath.dirname(route[0]) if rng.random() < 0.5 else "."
        steps.append(Step("list_files", {"path": folder or "."}))
    if rng.random() < 0.6:
        steps.append(Step("dbt", {"command": "build"}))
        query = rng.choice((f"select * from {table} limit 5", f"select count(*) as row_count from {table}"))
        steps.append(Step("query", {"sql": query}))
    docs = documenting(files, route)
    yaml_first = rng.random() < 0.5
    named = models_by_name(files)
    for i, model in enumerate(route):
        reads = [model]
        if docs[model] and (i == 0 or rng.random() < 0.5):
            reads = [*docs[model], model] if yaml_first else [model, *docs[model]]
        steps.extend(Step("read_file", {"path": p}) for p in reads if Step("read_file", {"path": p}) not in steps)
        if i + 1 < len(route) and rng.random() < 0.3:
            off_path = [p for name in refs(files[model]) for p in named.get(name, ()) if p not in route]
            if off_path:
                lead = rng.choice(off_path)
                if Step("read_file", {"path": lead}) not in steps:
                    steps.append(Step("read_file", {"path": lead}))
    steps.extend(Step(WRITE_FIX, {"path": path}) for path in fix_paths(task))
    if rng.random() < 0.3:
        steps.append(Step("dbt", {"command": "build"}))
    steps.append(Step("validate"))
    steps.append(Step("submit"))
    return tuple(steps)


def investigation_length(steps: Sequence[Step]) -> int:
    """How many inspecting steps come before the first write."""
    count = 0
    for step in steps:
        if step.tool == WRITE_FIX or step.tool == "write_file":
            break
        count += step.tool in INSPECTING
    return count


def length_summary(lengths: Sequence[int]) -> dict[str, Any]:
    """The distribution of investigation lengths (for reports): min, median, max and a histogram."""
    if not lengths:
        return {"episodes": 0, "min": None, "median": None, "max": None, "histogram": {}}
    histogram: dict[str, int] = {}
    for n in sorted(lengths):
        histogram[str(n)] = histogram.get(str(n), 0) + 1
    return {
        "episodes": len(lengths),
        "min": min(lengths),
        "median": median(lengths),
        "max": max(lengths),
        "histogram": histogram,
    }

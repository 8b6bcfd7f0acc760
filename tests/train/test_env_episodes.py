"""Agentic SFT rows rendered from REAL oracle episodes of the eval RepairEnvironment (not a script): the
oracle investigates before it fixes (train/investigation.py), in several variants per task."""

from __future__ import annotations

import json

from dbt_harvest.eval.env import tool_schemas
from dbt_harvest.train.env_episodes import EnvironmentOracle
from dbt_harvest.train.investigation import INSPECTING
from dbt_harvest.train.lineage import table_models, upstream
from dbt_harvest.train.project import PinnedProjectSource
from dbt_harvest.train.sft_data import agentic_rows, to_dataset


def _calls(row: dict) -> list[tuple[str, dict]]:
    return [
        (m["tool_calls"][0]["function"]["name"], m["tool_calls"][0]["function"]["arguments"])
        for m in row["messages"]
        if m.get("tool_calls")
    ]


def test_rows_are_real_investigations_that_score_1(env_world) -> None:
    from dbt_harvest.harvester.workspace import template

    task = env_world.tasks[0]
    oracle = EnvironmentOracle(pins=env_world.pins)
    with env_world.env():
        project = PinnedProjectSource(env_world.pins)
        rows = agentic_rows([task], project, 4000, episode=oracle, variants=3)
        files = dict(project.broken_files(task))
        expected_broken = (template(env_world.pin) / task.file).read_text()
    expected_broken = expected_broken.replace("    where payment_status = 'succeeded'\n", "")
    assert {
        variant for (iid, variant), o in oracle.outcomes.items() if iid == task.instance_id and o.official == 1
    } == {row["variant"] for row in rows}
    assert all(o.status == "submitted" for o in oracle.outcomes.values())
    names = {t["function"]["name"] for t in tool_schemas()}
    lineage = upstream(files, [p for t in task.grading.condition_tabs for p in table_models(files, t)])
    sequences = set()
    for row in rows:
        assert row["tools"] == tool_schemas()
        calls = _calls(row)
        sequences.add(tuple((name, json.dumps(args, sort_keys=True)) for name, args in calls))
        assert {name for name, _ in calls} <= names  # every call is a tool of the environment
        first_write = next(i for i, (name, _) in enumerate(calls) if name == "write_file")
        reads = [args["path"] for name, args in calls[:first_write] if name == "read_file"]
        # it reads its way to the broken model through the reported tables' lineage, then writes that file
        assert task.file in reads and set(reads) <= set(lineage) | {p for p in files if p.endswith(".yml")}
        assert calls[first_write][1]["path"] == task.file
        assert [name for name, _ in calls[-2:]] == ["validate", "submit"]
        results = [m for m in row["messages"] if m["role"] == "tool"]
        read_of_bug = next(
            r for (name, args), r in zip(calls, results) if name == "read_file" and args["path"] == task.file
        )
        assert read_of_bug["content"] == expected_broken  # the environment's read_file output, byte for byte
        assert results[first_write]["content"].startswith(f"updated {task.file} (")  # the environment's write report
        assert results[-2]["content"].startswith("local checks PASS") and results[-1]["content"].startswith("submitted")
        assert row["messages"][1]["role"] == "user" and task.problem_statement.strip() in row["messages"][1]["content"]
        assert sum(name in INSPECTING for name, _ in calls[:first_write]) >= 1
    assert len(sequences) == len(rows) >= 2, "the variants must differ in order or depth"
    ds_calls = [m["tool_calls"][0]["function"] for m in to_dataset(rows)[0]["messages"] if m.get("tool_calls")]
    assert ds_calls == [{"name": n, "arguments": a} for n, a in _calls(rows[0])]  # arguments kept exact
    assert json.dumps(ds_calls[-1]["arguments"]) == "{}"

"""Agentic SFT rows rendered from a REAL oracle episode of the eval RepairEnvironment (not a script)."""

from __future__ import annotations

import json

from dbt_harvest.eval.env import tool_schemas
from dbt_harvest.train.env_episodes import EnvironmentOracle
from dbt_harvest.train.sft_data import agentic_rows, to_dataset


def test_rows_carry_the_environments_real_observations(env_world) -> None:  # noqa: ANN001
    from dbt_harvest.harvester.workspace import template

    task = env_world.tasks[0]
    oracle = EnvironmentOracle(pins=env_world.pins)
    with env_world.env():
        rows = agentic_rows([task], None, 4000, episode=oracle)
        expected_broken = (template(env_world.pin) / task.file).read_text()
    # the broken file of the task workspace = the pin's tree with the task's bug applied
    expected_broken = expected_broken.replace("    where payment_status = 'succeeded'\n", "")
    assert oracle.outcomes[task.instance_id].official == 1
    assert oracle.outcomes[task.instance_id].status == "submitted"
    row = rows[0]
    assert row["tools"] == tool_schemas()
    names = {t["function"]["name"] for t in row["tools"]}
    assert {"list_files", "read_file", "write_file", "query", "dbt", "validate", "submit"} <= names
    messages = row["messages"]
    calls = [(m["tool_calls"][0]["function"]["name"], m["tool_calls"][0]["function"]["arguments"]) for m in messages if m.get("tool_calls")]
    assert [c[0] for c in calls] == ["list_files", "read_file", "write_file", "validate", "submit"]
    assert calls[1][1] == {"path": task.file}
    results = [m for m in messages if m["role"] == "tool"]
    assert results[1]["content"] == expected_broken  # the environment's read_file output, byte for byte
    assert task.file in results[0]["content"].splitlines() or task.file.split("/")[-1] in results[0]["content"]
    assert results[2]["content"].startswith(f"updated {task.file} (")  # the environment's write_file report
    assert results[-1]["content"].startswith("submitted")
    assert results[3]["content"].startswith("local checks PASS")  # the real validate report
    # the first user message carries the environment's reset observation, and the dataset keeps arguments exact
    assert messages[1]["role"] == "user" and task.problem_statement.strip() in messages[1]["content"]
    ds_calls = [m["tool_calls"][0]["function"] for m in to_dataset(rows)[0]["messages"] if m.get("tool_calls")]
    assert ds_calls[0] == {"name": "list_files", "arguments": {"path": "."}}
    assert json.dumps(ds_calls[3]["arguments"]) == "{}"

"""The agent's write policy holds for every route, not only write_file (issue 14, class 2).

An agent may write only model, macro, seed, test and YAML files. Two routes around that, each checked
with a hostile transcript written for this repository: the agent's own SQL (a pre_hook or a query that
COPYs a byte-exact Python model into models/, which the next build would run), and the repository's
own Python model changing the project behind the agent's back (tests/eval/projects/planter). The first
is stopped by DuckDB (agent builds allow no folder); the second by the episode's guard, which undoes
the change and fails the action. Neither leaves a Python model behind, and none ever runs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dbt_harvest.eval.env import EnvSettings, RepairEnvironment
from dbt_harvest.eval.env.episode import Episode
from dbt_harvest.eval.env.policy import policy_for
from dbt_harvest.eval.env.tools import RunSettings
from dbt_harvest.eval.env.workspace import TaskWorkspace
from dbt_harvest.harvester.sandbox import Limits

HERE = Path(__file__).parent
PYTHON_MODEL = "def model(dbt, session):\n    return session.sql(\"select 'ran' as pwned\")\n"


def _copy_to(path: str) -> str:
    """A DuckDB COPY that writes PYTHON_MODEL byte for byte to ``path`` (CSV, no quoting, no header)."""
    rows = " union all ".join(
        f"select {i} as n, '{line.replace(chr(39), chr(39) * 2)}' as line"
        for i, line in enumerate(PYTHON_MODEL.splitlines())
    )
    return f"copy (select line from ({rows}) order by n) to '{path}' (format csv, header false, quote '', escape '')"


@pytest.mark.slow
def test_an_agent_cannot_write_a_python_model_with_sql(dev_world) -> None:
    task = dev_world.tasks[0]
    with dev_world.env():
        env = RepairEnvironment({task.instance_id: task}, EnvSettings(pins=dev_world.pins))
        with env:
            env.reset(instance_id=task.instance_id)
            root = env.episode.workspace.root
            # the sandbox shows the workspace at /workspace
            hook = _copy_to("/workspace/models/marts/pwned.py").replace('"', '\\"')
            written = env.write_file("models/marts/hook.sql", f'{{{{ config(pre_hook="{hook}") }}}}\nselect 1 as x\n')
            assert written.startswith("created")
            built = env.dbt("run", "hook")
            assert not (root / "models/marts/pwned.py").exists(), built
            assert "FAILED" in built and "file system operations are disabled" in built
            answer = env.query(_copy_to("/workspace/models/marts/pwned2.py"))
            assert answer.startswith("query error") and "disabled" in answer
            assert not (root / "models/marts/pwned2.py").exists()
            rebuilt = env.dbt("build")
            assert "model.shop_analytics.pwned" not in rebuilt  # no such model was ever parsed, let alone run
            assert env.query("select * from pwned").startswith("query error")


@pytest.fixture()
def planter_ws(tmp_path: Path) -> TaskWorkspace:
    root = tmp_path / "holder" / "ws"
    shutil.copytree(HERE / "projects" / "planter", root)
    return TaskWorkspace(
        root=root.resolve(),
        project_dir=".",
        profile="planter",
        schema="main",
        clock="2024-06-30",
        policy=policy_for(root, "."),
    )


def _episode(ws: TaskWorkspace) -> Episode:
    from tests.eval.conftest import toy_task

    return Episode(toy_task(), ws, RunSettings(sandboxed=True, limits=Limits(wall_s=240)))


@pytest.mark.slow
def test_a_project_that_plants_a_python_model_or_a_link_is_undone(planter_ws: TaskWorkspace) -> None:
    episode = _episode(planter_ws)
    root = planter_ws.root
    observation = episode.act("dbt", {"command": "run"})
    assert observation.startswith("error: the dbt action changed project files"), observation
    assert "created models/evil.py" in observation and "symbolic link models/host" in observation
    assert "the change was undone" in observation
    assert not (root / "models/evil.py").exists() and not os.path.lexists(root / "models/host")
    assert episode.invalid_actions == 1
    # the planted model never runs: the next build starts without it (and plants again, undone again)
    again = episode.act("dbt", {"command": "run", "select": "orders"})
    assert again.startswith("dbt run --select orders: OK"), again
    assert "ran" not in episode.act("query", {"sql": "select * from evil"})
    assert not (root / "models/evil.py").exists()


@pytest.mark.slow
def test_a_tampered_workspace_is_an_error_observation_not_an_exception(planter_ws: TaskWorkspace) -> None:
    """Issue 14: an uncaught SandboxError escaped Episode.act after the workspace was tampered with."""
    episode = _episode(planter_ws)
    (planter_ws.root / "dbt_project.yml").unlink()  # what a project's Python model can do
    observation = episode.act("dbt", {"command": "run", "select": "orders"})
    assert observation.startswith("error:"), observation
    assert (planter_ws.root / "dbt_project.yml").is_file()  # put back with the rest of the project
    assert episode.act("dbt", {"command": "run", "select": "orders"}).startswith("dbt run --select orders: OK")

"""Training finds the project of a task through the task's pin, whatever kind of spec the pin was made from.

The case that failed: a repository pinned from a local bare copy by a RELATIVE path (``./clock.git@sha``, as
one does beside a folder of bare mirrors). The task records then name ``./clock.git`` as their ``repo``,
which says nothing about where the harvester's mirror is; guessing a mirror folder from that name gave
"no local git repository for ./clock.git under HARVEST_HOME/mirrors". The project is now read from what
the pin records about where its bytes came from (materialized by the harvester exactly as the mint saw it).
Since origins, such a pin no longer names a path at all (its repo is ``local://local/<dbt project>``), a
name that says even less about a folder of repositories: training must still find the project.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from train_world import tiny_raw

from dbt_harvest.train.configs import config_from_dict
from dbt_harvest.train.project import PinnedProjectSource, apply_diff
from dbt_harvest.train.sft import default_project, run_sft

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def relative_pin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`harvest add ./clock.git@sha` (a bare copy, relative path), reserved to train and minted, via the CLI."""
    from dbt_harvest.harvester.gitrepos import make_git_repo
    from tests.fixtures import fixture_dir

    root = tmp_path_factory.mktemp("relative-pin")
    repo = make_git_repo(fixture_dir("clock"), root / "clock.git", bare=True)
    env = {**os.environ, "HARVEST_HOME": str(root / "home"), "HARVEST_PINS": str(root / "pins")}
    exe = shutil.which("harvest")
    assert exe, "harvest must be on PATH (pip install -e .)"

    def harvest(*args: str) -> str:
        proc = subprocess.run([exe, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    added = json.loads(harvest("add", f"./clock.git@{repo.head}", "--json"))
    assert added["spec"] == f"local://local/gym_memberships@{repo.head}"  # no path: named after its dbt project
    harvest("split", "assign", "--test", "0", "--dev", "0")
    harvest("mint", "--all", "--max-per-model", "1")
    return root


def test_sft_trains_on_tasks_of_a_pin_made_from_a_relative_local_path(
    relative_pin: Path, world, tmp_path: Path
) -> None:
    from dbt_harvest.corpora.store import load_tasks
    from tests.conftest import use_env

    raw = tiny_raw("sft-tiny.toml", world, tmp_path, run={"name": "sft-relative-pin"}, train={"max_steps": 1})
    raw["data"]["tasks"] = ""  # the train split of HARVEST_HOME
    raw["data"]["repos"] = ""  # no folder of repositories by name: each task's pin says where its bytes are
    config = config_from_dict(raw, where="sft-relative-pin")
    cwd = os.getcwd()
    with use_env(relative_pin / "home", relative_pin / "pins"):
        tasks = load_tasks("train", relative_pin / "home", relative_pin / "pins", purpose="inspect")
        assert tasks and all(t.repo == "local://local/gym_memberships" for t in tasks)  # its dbt project, no path
        os.chdir(tmp_path)  # training runs from anywhere: nothing is resolved against the folder of the add
        try:
            project = default_project(config)
            assert isinstance(project, PinnedProjectSource)
            task = tasks[0]
            original = project.original_files(task)
            broken = project.broken_files(task)
            # the files are the mint's: its broken patch applied to them gives exactly the broken project
            assert broken[task.file] == apply_diff(original, task.broken_patch)[task.file] != original[task.file]
            result = run_sft(config)
        finally:
            os.chdir(cwd)
    assert result.manifest["dataset"]["tasks"] == len(tasks) and result.manifest["metrics"]["global_step"] == 1

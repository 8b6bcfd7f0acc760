"""Training finds the project of a task through the task's pin, whatever kind of spec the pin was made from.

The example is pinned from a LOCAL bare git repository (``/…/shop_analytics@sha``), so its task records name
a path as their ``repo``; the repository is found from what the pin records about where its bytes came from
(its mirror, materialized by the harvester as the mint saw it), never from the repo's display name.
"""

from __future__ import annotations

from pathlib import Path

from train_world import tiny_raw
from train.configs import config_from_dict
from train.project import PinnedProjectSource, apply_diff
from train.sft import default_project, run_sft


def test_sft_trains_on_tasks_minted_from_a_local_pin(minted_example, world, tmp_path: Path) -> None:  # noqa: ANN001
    from core.patching import parse_patch

    assert minted_example.pin.spec.startswith("/"), minted_example.pin.spec  # a local spec: the case that failed
    raw = tiny_raw("sft-tiny.toml", world, tmp_path, run={"name": "sft-local-pin"}, data={"max_rows": 2}, train={"max_steps": 1})
    raw["data"]["tasks"] = ""  # the train split of HARVEST_HOME
    raw["data"]["repos"] = ""  # no folder of repositories by name: each task's pin says where its bytes are
    config = config_from_dict(raw, where="sft-local-pin")
    with minted_example.env():
        project = default_project(config)
        assert isinstance(project, PinnedProjectSource)
        task = minted_example.tasks[0]
        broken = project.broken_files(task)
        original = project.original_files(task)
        # the files are the mint's: its broken patch applied to them gives exactly the broken project
        assert broken[task.file] == apply_diff(original, task.broken_patch)[task.file] != original[task.file]
        assert parse_patch(task.fix_patch)[0].path == task.file
        result = run_sft(config)
    assert result.manifest["dataset"]["tasks"] == 2 and result.manifest["metrics"]["global_step"] == 1

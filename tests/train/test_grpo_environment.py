"""Multi-turn GRPO: one step of trl's GRPOTrainer with ``environment_factory`` = the eval RepairEnvironment."""

from __future__ import annotations

from pathlib import Path

from recording_env import RecordingEnvironment
from train_world import tiny_raw

from dbt_harvest.core.task_record import write_task
from dbt_harvest.corpora.recipe import read_manifest
from dbt_harvest.train.configs import config_from_dict
from dbt_harvest.train.grpo import run_grpo


def test_one_multi_turn_grpo_step_on_the_real_environment(env_world, world, tmp_path: Path) -> None:
    task = env_world.tasks[0]
    tasks_dir = tmp_path / "tasks"
    write_task(task, tasks_dir)
    raw = tiny_raw(
        "grpo-tiny.toml",
        world,
        tmp_path / "runs",
        run={"name": "grpo-env"},
        grpo={
            "mode": "multi_turn",
            "environment": "recording_env:RecordingEnvironment",
            "max_tool_calling_iterations": 2,
        },
    )
    raw["data"]["tasks"] = str(tasks_dir)
    RecordingEnvironment.resets.clear()
    RecordingEnvironment.rewards.clear()
    with env_world.env():
        result = run_grpo(config_from_dict(raw, where="grpo-env"))
    manifest = read_manifest(result.run_dir)
    assert manifest["metrics"]["global_step"] == 1
    assert manifest["reward"]["mode"] == "multi_turn"
    # the two generations of the one prompt were each an episode of the dataset's task, rewarded by get_reward
    assert RecordingEnvironment.resets == [task.instance_id] * 2
    assert RecordingEnvironment.rewards == [0.0, 0.0]  # a random tiny model submits nothing
    # ...and the manifest counts those two rollouts (trl asked the environment, not a reward function)
    assert manifest["reward"]["reward_rollouts"] == 2 and manifest["reward"]["reward_official_mean"] == 0.0
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()

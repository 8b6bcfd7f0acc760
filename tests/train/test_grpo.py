"""GRPO on CPU with the tiny model and the DuckDB reward backend; torchrun with 2 CPU processes (gloo)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from train_world import World, tiny_raw, write_config

from dbt_harvest.cli import main
from dbt_harvest.corpora.recipe import read_manifest
from dbt_harvest.train.configs import config_from_dict
from dbt_harvest.train.grpo import run_grpo


def test_grpo_step_with_the_reward_pool(world: World, tmp_path: Path) -> None:
    result = run_grpo(
        config_from_dict(tiny_raw("grpo-tiny.toml", world, tmp_path, train={"max_steps": 2}), where="grpo")
    )
    manifest = read_manifest(result.run_dir)
    assert manifest["metrics"]["global_step"] == 2
    reward = manifest["reward"]
    assert reward["reward_rollouts"] == 4
    assert reward["shaping"] == "none" and reward["backend"] == "duckdb_sql"
    # a random tiny model writes no <file> block: every rollout is malformed, scored 0, nothing crashes
    assert reward["reward_official_mean"] == 0.0 and reward["reward_malformed"] == 4
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()


def test_gate_measures_one_grpo_step_and_writes_no_run(world: World, tmp_path: Path) -> None:
    """`harvest train grpo --gate`: one measured step on the reward pool, projected over the planned steps;
    stdout holds the one JSON object, and no adapter or manifest is written."""
    raw = tiny_raw("grpo-tiny.toml", world, tmp_path, train={"max_steps": 3})
    config = write_config(raw, tmp_path / "grpo.toml")
    result = CliRunner().invoke(main, ["train", "grpo", "--config", str(config), "--gate", "--json"])
    assert result.exit_code == 0, result.output
    gate = json.loads(result.stdout)["gate"]
    assert gate["kind"] == "grpo" and gate["total_steps"] == 3 and gate["step_seconds"] > 0
    run_dir = tmp_path / raw["run"]["name"]
    assert not (run_dir / "adapter").exists() and not (run_dir / "manifest.json").exists()


def test_harvester_backend_builds_and_scores_through_reward_build(world: World, tmp_path: Path) -> None:
    from dbt_harvest.harvester.grading.edited import build_and_score
    from dbt_harvest.train.grpo import backend_factory
    from dbt_harvest.train.project import GitProjectSource
    from dbt_harvest.train.reward import EditingBackend

    raw = tiny_raw("grpo-tiny.toml", world, tmp_path, reward={"backend": "harvester"})
    factory = backend_factory(config_from_dict(raw), GitProjectSource(world.repos))
    assert factory.func is EditingBackend
    assert factory.args[1] is build_and_score


@pytest.mark.slow
@pytest.mark.deep(covered_by=("tests/train/test_grpo.py::test_grpo_step_with_the_reward_pool",))
def test_torchrun_two_cpu_processes_one_step_each(world: World, tmp_path: Path) -> None:
    """Both trainers under torchrun: exit 0 with and without --json, one report (rank 0), and GRPO's manifest
    counts the rollouts of both processes (one completion each: 2)."""
    torchrun = shutil.which("torchrun")
    harvest = shutil.which("harvest")
    if torchrun is None or harvest is None:
        pytest.fail("torchrun and harvest must be on PATH (pip install -e '.[train]')")
    env = {**os.environ, "HARVEST_HOME": str(world.home), "OMP_NUM_THREADS": "1"}
    for name, as_json in (("sft-tiny.toml", False), ("grpo-tiny.toml", True)):
        # one prompt in the data set: under 2 processes, 1 completion per process makes the group of 2
        sections = (
            {"train": {"max_steps": 1, "per_device_train_batch_size": 1}}
            if name.startswith("grpo")
            else {"train": {"max_steps": 1}}
        )
        config = write_config(tiny_raw(name, world, tmp_path, **sections), tmp_path / name)
        proc = subprocess.run(
            [
                torchrun,
                "--standalone",
                "--nproc_per_node",
                "2",
                "--no-python",
                harvest,
                "train",
                name.split("-")[0],
                "--config",
                str(config),
                *(["--json"] if as_json else []),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "FAILED" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        run_dir = tmp_path / name.removesuffix(".toml")
        manifest = read_manifest(run_dir)
        assert manifest["hardware"]["world_size"] == 2
        assert manifest["metrics"]["global_step"] == 1
        if as_json:
            lines = [line for line in proc.stdout.splitlines() if line.startswith('{"adapter"')]
            assert len(lines) == 1, proc.stdout[-2000:]  # only rank 0 reports
            assert json.loads(lines[0])["manifest"] == manifest
            assert manifest["reward"]["reward_rollouts"] == 2, manifest["reward"]
        else:
            assert [line for line in proc.stdout.splitlines() if line.startswith("run: ")] == [f"run: {run_dir}"], (
                proc.stdout[-2000:]
            )
            assert "manifest: sha256 signed; steps 1" in proc.stdout

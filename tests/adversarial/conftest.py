"""Fixtures of the adversarial suites: a real dataset built from hand-made dev tasks on the embedded example."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HARVEST = [sys.executable, "-m", "dbt_harvest"]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """A fresh machine: empty HARVEST_HOME and pins, its own HF_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARVEST_", "HF_"))}
    env.update(
        {
            "HARVEST_HOME": str(tmp / "home"),
            "HARVEST_PINS": str(tmp / "pins"),
            "HF_HOME": str(tmp / "hf"),
            "HF_HUB_OFFLINE": "1",
        }
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def dataset(example_harvest, tmp_path_factory):
    """(dataset folder, repo mirror, package mirror, dev task ids): `harvest dataset build` of hand-made dev tasks."""
    from tests.eval.conftest import make_tasks

    world = make_tasks(example_harvest, tmp_path_factory.mktemp("untrusted-world"), "dev")
    root = tmp_path_factory.mktemp("untrusted")
    env = _env(root, HARVEST_HOME=str(world.home), HARVEST_PINS=str(world.pins))
    built = subprocess.run(
        [*HARVEST, "dataset", "build", "--out", str(root / "ds"), "--split", "dev", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    owner, name = world.pin.url.split("://", 1)[-1].rstrip("/").removesuffix(".git").split("/")[-2:]
    mirror = root / "repos"
    (mirror / owner).mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", str(example_harvest.example.project_repo), str(mirror / owner / name)],
        check=True,
        capture_output=True,
    )
    return root / "ds", mirror, example_harvest.example.mirror, [t.instance_id for t in world.tasks]

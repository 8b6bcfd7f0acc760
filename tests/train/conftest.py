"""Fixtures for the training tests: one example world (repo, inputs, gold, a train task) per session,
and tiny configs rewritten to point at it. Nothing here downloads anything."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from world import World, build_world  # noqa: E402

CONFIGS = Path(__file__).parent / "configs"


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("train-world")
    mp = pytest.MonkeyPatch()
    mp.setenv("HARVEST_HOME", str(root / "home"))
    built = build_world(root)
    yield built
    mp.undo()


@pytest.fixture(autouse=True)
def _home(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARVEST_HOME", str(world.home))
    monkeypatch.delenv("HARVEST_MANIFEST_KEY", raising=False)


def tiny_raw(name: str, world: World, out: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """A tiny test config as a dict, pointed at ``world`` and writing under ``out``."""
    raw = tomllib.loads((CONFIGS / name).read_text())
    raw["run"]["output_dir"] = str(out)
    raw["data"] = {**raw.get("data", {}), "tasks": str(world.tasks_dir), "repos": str(world.repos)}
    if "reward" in raw:
        raw["reward"]["inputs"] = str(world.inputs)
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    return raw


def write_config(raw: dict[str, Any], path: Path) -> Path:
    import tomli_w

    path.write_text(tomli_w.dumps(raw))
    return path


@pytest.fixture(scope="session")
def env_world(example_harvest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN001, ANN201
    """The eval tests' hand-made tasks on the harvested example (tests/eval/conftest.py), relabelled train.

    They are stored in the dev split of their copied HARVEST_HOME (make_tasks knows dev and test only);
    the training paths here take the records directly, so the relabelled copies pass the firewall.
    """
    import dataclasses

    from tests.eval.conftest import make_tasks

    world = make_tasks(example_harvest, tmp_path_factory.mktemp("train-env"), "dev")
    return dataclasses.replace(world, tasks=[dataclasses.replace(t, split="train") for t in world.tasks], split="train")

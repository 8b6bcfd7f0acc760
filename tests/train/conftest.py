"""Fixtures for the training tests: one example world (repo, inputs, gold, a train task) per session,
and tiny configs rewritten to point at it. Nothing here downloads anything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from train_world import World, build_world

from tests.built_once import built_once


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    def build(root: Path) -> World:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("HARVEST_HOME", str(root / "home"))
            return build_world(root)

    built = built_once(tmp_path_factory, "train-world", build)
    mp = pytest.MonkeyPatch()
    mp.setenv("HARVEST_HOME", str(built.home))
    yield built
    mp.undo()


@pytest.fixture(autouse=True)
def _home(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARVEST_HOME", str(world.home))
    monkeypatch.delenv("HARVEST_MANIFEST_KEY", raising=False)


@pytest.fixture(scope="session")
def env_world(example_harvest, tmp_path_factory: pytest.TempPathFactory):
    """The eval tests' hand-made tasks on the harvested example (tests/eval/conftest.py), relabelled train.

    They are stored in the dev split of their copied HARVEST_HOME (make_tasks knows dev and test only);
    the training paths here take the records directly, so the relabelled copies pass the firewall.
    """
    import dataclasses

    from tests.eval.conftest import make_tasks

    world = make_tasks(example_harvest, tmp_path_factory.mktemp("train-env"), "dev")
    return dataclasses.replace(world, tasks=[dataclasses.replace(t, split="train") for t in world.tasks], split="train")

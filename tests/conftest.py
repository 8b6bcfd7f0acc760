"""Shared fixtures: the embedded example harvested once per session, and minted once per session.

Every fixture works in its own HARVEST_HOME and pins folder under pytest's tmp dirs; ``use_env``
points the harvester at them for the duration of a block (``harvester.home`` reads the environment
at call time).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@contextlib.contextmanager
def use_env(home: Path, pins: Path) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("HARVEST_HOME", "HARVEST_PINS")}
    os.environ["HARVEST_HOME"] = str(home)
    os.environ["HARVEST_PINS"] = str(pins)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass(frozen=True)
class Harvested:
    home: Path
    pins: Path
    pin: object  # harvester.pin.Pin
    pin_path: Path
    example: object  # harvester.example.Example

    def env(self) -> contextlib.AbstractContextManager[None]:
        return use_env(self.home, self.pins)


@dataclass(frozen=True)
class Minted:
    home: Path
    pins: Path
    pin: object
    tasks: list  # list[TaskRecord]
    split: str

    def env(self) -> contextlib.AbstractContextManager[None]:
        return use_env(self.home, self.pins)


@pytest.fixture(scope="session")
def example_harvest(tmp_path_factory: pytest.TempPathFactory) -> Harvested:
    """`harvest add` of the embedded example, sandboxed, through its package mirror (offline)."""
    from harvester.add import AddOptions, add
    from harvester.example import materialize_example

    root = tmp_path_factory.mktemp("example-harvest")
    home, pins = root / "home", root / "pins"
    example = materialize_example(root / "example")
    with use_env(home, pins):
        result = add(example.spec, AddOptions(package_mirror=example.mirror))
    return Harvested(home, pins, result.pin, result.path, example)


def _mint_into(harvested: Harvested, split: str, dest: Path) -> Minted:
    from corpora.ledger import Params, assign
    from corpora.store import load_tasks
    from harvester.mint.pipeline import MintOptions, mint

    home, pins = dest / "home", dest / "pins"
    shutil.copytree(harvested.home, home, symlinks=True)
    shutil.copytree(harvested.pins, pins)
    group = harvested.pin.id.split("@", 1)[0]
    with use_env(home, pins):
        if split == "train":
            assign(pins, Params(test=0, dev=0, seed=0))
        else:
            from corpora.ledger import SplitLedger
            from corpora.groups import explain_groups
            from harvester.pin import list_pins

            groups = [g.id for g in explain_groups(list_pins(pins))]
            assign(pins, Params(test=0, dev=1, seed=0, dev_groups=tuple(groups)))
        mint([harvested.pin], MintOptions(max_per_model=2, seed=0))
        tasks = load_tasks(split, home, pins, purpose="inspect")
    return Minted(home, pins, harvested.pin, tasks, split)


@pytest.fixture(scope="session")
def minted_example(example_harvest: Harvested, tmp_path_factory: pytest.TempPathFactory) -> Minted:
    """The example minted into the TRAIN split (max 2 tasks per model)."""
    return _mint_into(example_harvest, "train", tmp_path_factory.mktemp("minted-train"))

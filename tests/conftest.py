"""Shared fixtures: the embedded example harvested once per run, and minted once per run (each xdist
worker gets a private copy of both: tests/built_once.py).

Every fixture works in its own HARVEST_HOME and pins folder under pytest's tmp dirs; ``use_env``
points the harvester at them for the duration of a block (``core.home`` reads the environment
at call time).

The whole session runs with a Hugging Face home of its own (``HF_HOME`` in a fresh temporary folder,
set before any test imports ``datasets`` or ``huggingface_hub``, which read it at import): no test
reads or fills the user's caches, and no test passes because of what they hold.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# the order xdist workers take modules in: longest measured first (tests/scheduling.py); which tests a run
# plays: the default tier, or with --tier the deep one of second paths (tests/tiers.py)
pytest_plugins = ["tests.scheduling", "tests.tiers"]

# Property-test case counts (tests/property_budget.py): the default run draws a fifth of the deep one;
# `python -m pytest --hypothesis-profile=deep` draws them all. Registered here, before the hypothesis
# plugin loads the profile named on the command line.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

from tests.built_once import built_once  # noqa: E402
from tests.property_budget import DEEP_EXAMPLES, DEFAULT_EXAMPLES  # noqa: E402

_hypothesis_settings.register_profile("harvest", max_examples=DEFAULT_EXAMPLES)
_hypothesis_settings.register_profile("deep", max_examples=DEEP_EXAMPLES)
_hypothesis_settings.load_profile("harvest")

#: variables that would send Hugging Face caches somewhere else than HF_HOME
_HF_CACHE_VARIABLES = ("HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_XET_CACHE", "HF_ASSETS_CACHE")


def pytest_configure(config: pytest.Config) -> None:
    """A temporary HF_HOME for the session (removed at exit), and no cache variable overriding it; builds
    on the installed dbt only unless a test names the releases it may try."""
    import atexit
    import tempfile

    # `harvest add` tries older dbt releases when a project fails on the installed one, making their toolchains
    # with pip: a test that wants that says so (tests/harvester/test_toolchain.py); every other build stays on
    # the installed dbt, as a failing fixture's refusal did before toolchains
    from importlib import metadata

    os.environ["HARVEST_DBT_RELEASES"] = ".".join(metadata.version("dbt-core").split(".")[:2])
    home = tempfile.mkdtemp(prefix="harvest-tests-hf-home-")
    os.environ["HF_HOME"] = home
    for name in _HF_CACHE_VARIABLES:
        os.environ.pop(name, None)
    atexit.register(shutil.rmtree, home, True)


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
    pin: object  # core.pin.Pin
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
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.example import materialize_example

    def build(root: Path) -> Harvested:
        home, pins = root / "home", root / "pins"
        example = materialize_example(root / "example")
        with use_env(home, pins):
            result = add(example.spec, AddOptions(package_mirror=example.mirror))
        return Harvested(home, pins, result.pin, result.path, example)

    return built_once(tmp_path_factory, "example-harvest", build)


@pytest.fixture(scope="module")
def mint_world(example_harvest: Harvested, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the mint's unit-level tests read of the harvested example: pin, built state, lineage, gold,
    one model file's text, and a scratch folder of the module's own."""
    from dbt_harvest.harvester.gold import gold_path
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.state import load_state
    from dbt_harvest.harvester.workspace import template

    with example_harvest.env():
        pin = example_harvest.pin
        state = load_state(pin.id)
        gold = gold_path(pin.gold_sha256)
        original = (template(pin) / "models/marts/product_performance.sql").read_text()
    return {
        "pin": pin,
        "state": state,
        "nodes": models(state.manifest),
        "gold": gold,
        "original": original,
        "harvest": example_harvest,
        "scratch": tmp_path_factory.mktemp("mint-world"),
    }


def _mint_into(harvested: Harvested, dest: Path) -> Minted:
    """Copy a harvest, reserve its only repository to train, and mint one task per model."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.ledger import Params, assign
    from dbt_harvest.corpora.store import load_tasks, mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, mint

    home, pins = dest / "home", dest / "pins"
    shutil.copytree(harvested.home, home, symlinks=True)
    shutil.copytree(harvested.pins, pins)
    with use_env(home, pins):
        assign(pins, Params(test=0, dev=0, seed=0))
        mint([harvested.pin], MintOptions(max_per_model=1, seed=0), mint_target(harvest_home(), pins_dir()))
        tasks = load_tasks("train", home, pins, purpose="inspect")
    return Minted(home, pins, harvested.pin, tasks, "train")


@pytest.fixture(scope="session")
def minted_example(example_harvest: Harvested, tmp_path_factory: pytest.TempPathFactory) -> Minted:
    """The example minted into the TRAIN split (one task per model at most)."""
    return built_once(tmp_path_factory, "minted-train", lambda root: _mint_into(example_harvest, root))

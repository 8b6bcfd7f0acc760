"""Session baselines for the crash tests: the tiny project added, minted and built into a dataset, once.

Each stage records the world it started from (trials copy it), how many crash points its uninterrupted
run passed, how long it took, and its final artefacts. Trial counts: ``HARVEST_CRASH_TRIALS`` when set;
otherwise 20 per command when the run selects the ``crash`` marker (``pytest -m crash tests/crash``),
and 1 per command (at a seeded crash point) in the default suite.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dbt_harvest.harvester.gitrepos import make_git_repo
from tests.built_once import built_once
from tests.crash.harness import Baselines, Stage, World, final_artefacts, hash_file, run_cli

PROJECT = Path(__file__).resolve().parent / "project"
FULL_TRIALS = 20
SMOKE_TRIALS = 1
MINT_ARGS = ("mint", "--all", "--families", "time,null", "--max-per-model", "1", "--json")
DATASET_ARGS = (
    "dataset",
    "build",
    "--out",
    "dist/crash-shop",
    "--split",
    "train",
    "--private",
    "--overwrite",
    "--json",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "crash: fault-injection trials (20 per command with -m crash)")


def trial_count(config: pytest.Config) -> int:
    if os.environ.get("HARVEST_CRASH_TRIALS"):
        return int(os.environ["HARVEST_CRASH_TRIALS"])
    return FULL_TRIALS if "crash" in (config.option.markexpr or "") else SMOKE_TRIALS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "trial" in metafunc.fixturenames:
        metafunc.parametrize("trial", range(trial_count(metafunc.config)))


@pytest.fixture(scope="session")
def crash_seed() -> int:
    return int(os.environ.get("HARVEST_CRASH_SEED", "0"))


def _stage(name: str, args: tuple[str, ...], start: World, work: Path) -> tuple[Stage, World]:
    """Run ``args`` uninterrupted on a copy of ``start``; return the stage and the world it produced."""
    world = start.copy_to(work)
    counter = work / "crash-count.txt"
    run = run_cli(world, list(args), count_file=counter)
    assert run.returncode == 0, run.output
    final = final_artefacts(name, world)
    assert final, f"the uninterrupted {name} produced nothing to compare"
    return Stage(name, args, start, final, int(counter.read_text()), run.seconds), world


@pytest.fixture(scope="session")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> Baselines:
    """Built once per run (each xdist worker copies it: tests/built_once.py)."""
    return built_once(tmp_path_factory, "crash", _baselines)


def _baselines(root: Path) -> Baselines:
    repo = make_git_repo(PROJECT, root / "repos" / "crash_shop")
    spec = f"{repo.path}@{repo.head}"
    empty = World(root / "empty")
    empty.home.mkdir(parents=True)
    empty.pins.mkdir(parents=True)
    add, added = _stage("add", ("add", spec, "--json"), empty, root / "after-add")
    split = run_cli(added, ["split", "assign", "--test", "0", "--dev", "0", "--json"])
    assert split.returncode == 0, split.output
    from dbt_harvest.harvester.gold_digest import content_digest

    captures = sorted((added.home / "builds").glob("*/*/build*.captured/gold.duckdb"))
    golds = tuple(sorted(hash_file(p) for p in captures))
    names = tuple(sorted(content_digest(p) for p in captures))
    shutil.rmtree(added.home / "builds")  # logs of the baseline build; trials start without them
    mint, minted = _stage("mint", MINT_ARGS, added, root / "after-mint")
    dataset, finished = _stage("dataset", DATASET_ARGS, minted, root / "after-dataset")
    return Baselines(spec, add, mint, dataset, golds, finished, names)

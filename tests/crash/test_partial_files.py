"""A partial or altered artefact under its real name is refused when read, never taken for a whole one.

The crash trials show that a kill never leaves one; these tests show what happens if one appears anyway
(a disk fault, a hand edit): each reader re-hashes or re-parses and refuses, or, for the mint's own
bookkeeping, forgets the file so that the work is redone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dbt_harvest.core.errors import GoldError, PinError
from dbt_harvest.core.task_record import TaskRecordError, read_task
from dbt_harvest.corpora.build import read_manifest
from dbt_harvest.corpora.errors import DatasetBuildError
from tests.crash.harness import World, check_nothing_partial

pytestmark = pytest.mark.crash


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.fixture()
def world(baselines, tmp_path: Path):  # type: ignore[no-untyped-def]
    copy = baselines.finished.copy_to(tmp_path / "world")
    saved = {k: os.environ.get(k) for k in ("HARVEST_HOME", "HARVEST_PINS")}
    os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(copy.home), str(copy.pins)
    yield copy
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _only(paths: list[Path]) -> Path:
    assert paths, "the baseline has no such artefact"
    return paths[0]


def test_the_finished_world_is_whole(world: World) -> None:
    checked = check_nothing_partial(world)
    assert any(c.startswith("gold/") for c in checked) and "dataset" in checked
    assert any(c.startswith("task ") for c in checked) and any(c.startswith("pin ") for c in checked)


CASES: dict[str, tuple[Callable[[World], Path], type[Exception], Callable[[World, Path], object]]] = {
    "gold": (
        lambda w: _only(sorted((w.home / "gold").glob("*.duckdb"))),
        GoldError,
        lambda w, p: __import__("dbt_harvest.harvester.gold", fromlist=["gold_path"]).gold_path(p.stem),
    ),
    "built state": (
        lambda w: _only(sorted((w.home / "state").glob("*/build.duckdb"))),
        GoldError,
        lambda w, p: __import__("dbt_harvest.harvester.state", fromlist=["load_state"]).load_state(
            __import__("dbt_harvest.core.pin", fromlist=["list_pins"]).list_pins(w.pins)[0].id
        ),
    ),
    "pin": (
        lambda w: _only(sorted(w.pins.glob("*.toml"))),
        PinError,
        lambda w, p: __import__("dbt_harvest.core.pin", fromlist=["read_pin"]).read_pin(p),
    ),
    "task record": (
        lambda w: _only(sorted((w.home / "tasks").glob("*/*.json"))),
        TaskRecordError,
        lambda w, p: read_task(p),
    ),
    "dataset parquet": (
        lambda w: _only(sorted((w.dataset / "data").glob("*.parquet"))),
        DatasetBuildError,
        lambda w, p: read_manifest(w.dataset),
    ),
    "dataset gold": (
        lambda w: _only(sorted((w.dataset / "gold").glob("*.duckdb"))),
        DatasetBuildError,
        lambda w, p: read_manifest(w.dataset),
    ),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_half_file_is_refused_by_its_reader(world: World, kind: str) -> None:
    locate, error, read = CASES[kind]
    path = locate(world)
    _cut(path)
    with pytest.raises(error):
        read(world, path)


def test_a_half_mint_marker_or_report_makes_the_shard_redo(world: World) -> None:
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.core.pin import list_pins
    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, completed_keys, load_reports, plan

    pin = list_pins(world.pins)[0]
    options = MintOptions(families=("time", "null"), max_per_model=1)
    before_cut = {job.model: job for job in plan([pin], options, mint_target(harvest_home(), pins_dir()))}
    assert all(job.done_keys for job in before_cut.values())  # re-planned models skip what they decided
    markers = sorted((world.home / "mint").glob("*/shards/*.done"))
    finished = [m for m in markers if m.name[: -len(".done")] not in before_cut]
    assert finished, "the baseline kept a task for some model, so its shard is not planned again"
    model = finished[0].name[: -len(".done")]
    assert completed_keys(pin.id, model)
    _cut(finished[0])
    assert completed_keys(pin.id, model) == frozenset()
    redo = {job.model: job for job in plan([pin], options, mint_target(harvest_home(), pins_dir()))}
    assert model in redo and redo[model].done_keys == frozenset() and redo[model].already_kept == 0
    reports = sorted((world.home / "mint").glob("*/*.json"))
    before = len(load_reports(pin.id))
    _cut(reports[0])
    assert len(load_reports(pin.id)) == before - 1  # a torn report is dropped (and its candidate redone)

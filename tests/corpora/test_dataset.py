"""Dataset build: Hub-ready folder, load_dataset round trip, secrets withheld, bad input leaves nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from corpora_world import make_task

from dbt_harvest.cli import main
from dbt_harvest.core import atomic
from dbt_harvest.core.task_record import write_task
from dbt_harvest.corpora.build import build_dataset, read_manifest
from dbt_harvest.corpora.errors import DatasetBuildError, LintError, SealError
from dbt_harvest.corpora.features import task_features, to_row
from dbt_harvest.corpora.ledger import Params, assign, group_of
from dbt_harvest.corpora.sealed import sealed_dir
from dbt_harvest.corpora.store import store_task


def _populate(world, make, *, dev=True, unlicensed=True):
    pins = {n: make(n) for n in ("t/testrepo", "d/devrepo", "r/trainrepo", "s/secondtrain")}
    if unlicensed:
        pins["u/nolicense"] = make("u/nolicense", license="unknown")
    assign(world.pins, Params(0, 0, 0, test_groups=("t/testrepo",), dev_groups=("d/devrepo",)))
    tasks = []
    n = 0
    for name, pin in pins.items():
        split = {"t/testrepo": "test", "d/devrepo": "dev"}.get(name, "train")
        if split == "dev" and not dev:
            continue
        for _ in range(2):
            n += 1
            task = make_task(pin, split, group_of(pin.id, world.pins), n)
            store_task(task, world.home, world.pins)
            tasks.append(task)
    return pins, tasks


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".")) if parent.exists() else []


def test_build_writes_a_hub_folder_that_load_dataset_reads_back(world, make):
    from datasets import load_dataset, load_from_disk

    pins, tasks = _populate(world, make)
    out = world.root / "dist" / "dbt-repair-v1"
    result = build_dataset(out, home=world.home, pins=world.pins, shard_rows=3)
    assert result.splits == {"train": 4, "dev": 2}
    assert result.left_out_repos == 1 and result.left_out_tasks == 2
    names = sorted(
        p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and "dataset_dict" not in p.parts
    )
    fp = read_manifest(out)["facts"]["fingerprints"]
    assert [n for n in names if n.startswith("data/")] == [
        f"data/dev-{fp['dev']}-00000-of-00001.parquet",
        f"data/train-{fp['train']}-00000-of-00002.parquet",
        f"data/train-{fp['train']}-00001-of-00002.parquet",
    ]
    public = [t for t in tasks if t.split in ("train", "dev") and t.license != "unknown"]
    for t in public:
        gold = out / "gold" / f"{t.gold_sha256}.duckdb"
        assert gold.is_file() and atomic.sha256_file(gold) == t.gold_sha256
    test_gold = pins["t/testrepo"].gold_sha256
    assert not (out / "gold" / f"{test_gold}.duckdb").exists()

    loaded = load_dataset(str(out))
    assert sorted(loaded) == ["dev", "train"]
    assert loaded["train"].features == task_features()
    by_pin = {p.id: p for p in pins.values()}
    assert all(not p.compat_patch_sha256 for p in by_pin.values())
    by_split = {
        s: sorted((to_row(t, by_pin[t.pin]) for t in public if t.split == s), key=lambda r: r["instance_id"])
        for s in ("train", "dev")
    }
    assert all(r["origin_url"] and r["tree"] and r["clock"] for rows in by_split.values() for r in rows)
    for split in ("train", "dev"):
        assert sorted(loaded[split].to_list(), key=lambda r: r["instance_id"]) == by_split[split]
    assert load_from_disk(str(out / "dataset_dict"))["dev"].to_list() == loaded["dev"].to_list()

    blob = b"".join(p.read_bytes() for p in (out / "data").iterdir())
    assert b"WRONG-REPAIR-SECRET" not in blob and b"fingerprint" not in blob and b"ffffffffffffffff" not in blob
    assert b"nolicense" not in blob and b"testrepo" not in blob

    card = (out / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["license"] == "mit" and front["task_categories"] == ["text-generation"] and "dbt" in front["tags"]
    assert front["configs"][0]["data_files"] == [
        {"split": "train", "path": f"data/train-{fp['train']}-*"},
        {"split": "dev", "path": f"data/dev-{fp['dev']}-*"},
    ]
    assert "1 repositories (2 tasks) whose license does not permit redistribution" in card
    assert "Non-contamination statement" in card and "e12c5f1e6550" in card and "2 test tasks are sealed" in card
    assert "`patch` is the gold repair" in card
    # the corpus report of each built split's repositories: table in the card, chart beside it; no sealed repository
    assert "## Corpus report" in card
    for split in ("train", "dev"):
        assert f"(corpus_report-{split}.png)" in card and (out / f"corpus_report-{split}.png").stat().st_size > 0
    assert not (out / "corpus_report-test.png").exists() and "### test" not in card
    assert "testrepo" not in card.split("## Corpus report")[1].split("## Versions")[0]
    # tasks whose mutated lineage no dbt test covers are counted so users can filter them
    assert "Tasks with `local_tests` = 0, per split: train 4 of 4, dev 2 of 2." in card
    assert set(loaded["train"]["local_tests"]) == {0}
    for t in public:
        assert t.base_commit in card
    assert read_manifest(out)["facts"]["splits"] == {"train": 4, "dev": 2}
    assert _leftovers(out.parent) == []


def test_private_build_keeps_unlicensed_repos(world, make):
    _populate(world, make)
    result = build_dataset(world.root / "private", home=world.home, pins=world.pins, public=False)
    assert result.splits == {"train": 6, "dev": 2} and result.left_out_repos == 0
    assert "private build" in (world.root / "private" / "README.md").read_text()


def test_bad_inputs_fail_clearly_and_write_nothing(world, make):
    out = world.root / "dist" / "ds"
    with pytest.raises(DatasetBuildError, match="no tasks"):
        make("a/one"), make("b/two"), make("c/three")
        assign(world.pins, Params(1, 1, 0))
        build_dataset(out, home=world.home, pins=world.pins)
    assert not out.exists()


def test_empty_split_is_refused(world, make):
    _populate(world, make, dev=False)
    out = world.root / "dist" / "ds"
    with pytest.raises(DatasetBuildError, match="split 'dev' has no tasks; build only train with --split"):
        build_dataset(out, home=world.home, pins=world.pins)
    assert not out.exists() and _leftovers(out.parent) == []
    assert build_dataset(out, home=world.home, pins=world.pins, splits=["train"]).splits == {"train": 4}
    with pytest.raises(DatasetBuildError, match="sealed"):
        build_dataset(world.root / "t", home=world.home, pins=world.pins, splits=["train", "test"])
    with pytest.raises(DatasetBuildError, match="already exists"):
        build_dataset(out, home=world.home, pins=world.pins, splits=["train"])


def test_pin_without_split_is_refused(world, make):
    _populate(world, make)
    late = make("late/repo")
    write_task(make_task(late, "train", "late/repo", 99), world.home / "tasks" / "train")
    out = world.root / "dist" / "ds"
    with pytest.raises(LintError, match="unassigned"):
        build_dataset(out, home=world.home, pins=world.pins)
    assert not out.exists()


def test_tampered_sealed_store_is_refused(world, make):
    _populate(world, make)
    victim = sorted(sealed_dir(world.home).glob("*.json"))[0]
    victim.write_text(victim.read_text().replace("flip_literal", "flip_literals"))
    out = world.root / "dist" / "ds"
    with pytest.raises(SealError):
        build_dataset(out, home=world.home, pins=world.pins)
    assert not out.exists()


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_missing_or_corrupt_gold_is_refused_and_nothing_is_left(world, make, damage):
    pins, _ = _populate(world, make)
    gold = world.home / "gold" / f"{pins['r/trainrepo'].gold_sha256}.duckdb"
    if damage == "missing":
        gold.unlink()
    else:
        gold.write_bytes(gold.read_bytes() + b"x")
    out = world.root / "dist" / "ds"
    with pytest.raises(DatasetBuildError, match="missing" if damage == "missing" else "corrupted"):
        build_dataset(out, home=world.home, pins=world.pins)
    assert not out.exists() and _leftovers(out.parent) == []


def test_overwrite_swaps_only_a_finished_build(world, make):
    pins, _ = _populate(world, make)
    out = world.root / "dist" / "ds"
    build_dataset(out, home=world.home, pins=world.pins)
    before = (out / "build.json").read_bytes()
    (world.home / "gold" / f"{pins['d/devrepo'].gold_sha256}.duckdb").unlink()
    with pytest.raises(DatasetBuildError):
        build_dataset(out, home=world.home, pins=world.pins, overwrite=True)
    assert (out / "build.json").read_bytes() == before and _leftovers(out.parent) == []
    build_dataset(out, home=world.home, pins=world.pins, splits=["train"], overwrite=True)
    assert json.loads((out / "build.json").read_text())["facts"]["splits"] == {"train": 4}
    assert not list((out / "data").glob("dev-*")) and _leftovers(out.parent) == []


def test_cli_dataset_build(world, make):
    _populate(world, make)
    runner = CliRunner()
    result = runner.invoke(main, ["dataset", "build", "--out", str(world.root / "cli-ds"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output.strip().splitlines()[-1])
    assert data["splits"] == {"train": 4, "dev": 2} and data["left_out_repos"] == 1
    result = runner.invoke(main, ["dataset", "build", "--out", str(world.root / "cli-ds2"), "--split", "test"])
    assert result.exit_code == 1 and "sealed" in result.output


def test_rows_never_carry_secret_fields(world, make):
    pin = make("a/one")
    from dbt_harvest.core.task_record import Claim, LocalChecks, WrongRepairNote

    task = replace(
        make_task(pin, "train", "a/one", 1),
        wrong_repair_patches=("SECRET",),
        wrong_repair_notes=(WrongRepairNote("SECRET-INTENT", ("SECRET-FIX",)),),
        claims=(Claim("orders", "more_rows"),),
        broken_signature="SECRET-SIG",
        local_checks=LocalChecks(True, 4, 0, ("test.a", "test.b")),
    )
    row = to_row(task)
    assert "SECRET" not in json.dumps(row) and set(row) == set(task_features())
    assert row["local_tests"] == 2


def test_a_fork_minting_the_same_mutation_gives_one_row(world, make):
    pins, tasks = _populate(world, make, unlicensed=False)
    # a fork of r/trainrepo in its split group: the same file, the same broken patch, another pin
    fork = make("r/trainrepo-fork", fork_of="r/trainrepo")
    assign(world.pins, None)  # pinned after the reservation: it joins its parent's group
    original = next(t for t in tasks if t.pin == pins["r/trainrepo"].id)
    assert group_of(fork.id, world.pins) == original.split_group
    copy = make_task(fork, "train", original.split_group, 1)
    copy = replace(
        copy,
        file=original.file,
        broken_patch=original.broken_patch,
        fix_patch=original.fix_patch,
        problem_statement=original.problem_statement,
        instance_id=original.instance_id.replace("trainrepo", "trainrepo-fork"),
    )
    assert copy.instance_id != original.instance_id
    store_task(copy, world.home, world.pins)
    out = world.root / "dist" / "dedup"
    result = build_dataset(out, home=world.home, pins=world.pins)
    assert result.splits["train"] == 4  # the fork's copy is not a fifth row
    assert read_manifest(out)["facts"]["duplicate_tasks"] == 1
    assert "Duplicates: 1 tasks repeating another's mutation" in (out / "README.md").read_text()


def test_a_rebuilt_dataset_loads_its_new_rows_not_a_cached_folder_of_the_same_name(world, make):
    """`datasets` caches a folder by its name and data-file patterns: the rows' fingerprint in both keeps
    a rebuild (or another folder called the same) from being served the old rows."""
    import os

    import datasets.config
    from datasets import load_dataset

    # the session's own HF_HOME (tests/conftest.py), never the user's cache
    assert str(datasets.config.HF_DATASETS_CACHE).startswith(os.environ["HF_HOME"])
    assert "harvest-tests-hf-home-" in os.environ["HF_HOME"]
    pins, _ = _populate(world, make, unlicensed=False)
    first = world.root / "a" / "dbt-repair-v1"
    build_dataset(first, home=world.home, pins=world.pins)
    assert len(load_dataset(str(first))["train"]) == 4
    extra = make_task(pins["r/trainrepo"], "train", group_of(pins["r/trainrepo"].id, world.pins), 50)
    store_task(extra, world.home, world.pins)
    second = world.root / "b" / "dbt-repair-v1"  # same folder name, other place, one more row
    build_dataset(second, home=world.home, pins=world.pins)
    loaded = load_dataset(str(second))["train"]
    assert len(loaded) == 5 and extra.instance_id in loaded["instance_id"]
    build_dataset(first, home=world.home, pins=world.pins, overwrite=True)  # rebuilt in place
    assert len(load_dataset(str(first))["train"]) == 5


def test_a_split_left_empty_by_licenses_says_how_to_build_it(world, make):
    pins = {n: make(n, license="unknown") for n in ("r/trainrepo", "d/devrepo")}
    assign(world.pins, Params(0, 0, 0, dev_groups=("d/devrepo",)))
    for n, (name, pin) in enumerate(pins.items()):
        split = "dev" if name == "d/devrepo" else "train"
        store_task(make_task(pin, split, group_of(pin.id, world.pins), n), world.home, world.pins)
    result = CliRunner().invoke(main, ["dataset", "build", "--out", str(world.root / "ds")])
    assert result.exit_code == 1
    assert "without a redistributable license" in result.output and "--private" in result.output
    assert "--split" not in result.output  # building another split would not help: every split is unlicensed
    assert CliRunner().invoke(main, ["dataset", "build", "--out", str(world.root / "ds"), "--private"]).exit_code == 0


def test_min_local_tests_keeps_tasks_with_tested_lineages_and_the_card_shows_the_distribution(world, make):
    from datasets import load_dataset

    from dbt_harvest.core.task_record import LocalChecks

    pins = {n: make(n) for n in ("r/trainrepo", "d/devrepo")}
    assign(world.pins, Params(0, 0, 0, dev_groups=("d/devrepo",)))
    covering = {1: (), 2: ("test.a",), 3: ("test.a", "test.b", "test.c"), 4: tuple(f"test.{i}" for i in range(6))}
    for n, tests in covering.items():
        pin = pins["r/trainrepo" if n != 4 else "d/devrepo"]
        split = "train" if n != 4 else "dev"
        task = replace(
            make_task(pin, split, group_of(pin.id, world.pins), n), local_checks=LocalChecks(True, 6, 0, tests)
        )
        store_task(task, world.home, world.pins)
    full = build_dataset(world.root / "all", home=world.home, pins=world.pins)
    assert full.splits == {"train": 3, "dev": 1}
    card = (world.root / "all" / "README.md").read_text()
    assert "| covering dbt tests (`local_tests`) | train | dev |" in card
    assert (
        "| 0 | 1 | 0 |" in card and "| 1 | 1 | 0 |" in card and "| 2-4 | 1 | 0 |" in card and "| 5+ | 0 | 1 |" in card
    )
    tested = build_dataset(world.root / "tested", home=world.home, pins=world.pins, min_local_tests=2)
    assert tested.splits == {"train": 1, "dev": 1}
    assert set(load_dataset(str(world.root / "tested"))["train"]["local_tests"]) == {3}
    assert "at least 2 covering dbt test(s)" in (world.root / "tested" / "README.md").read_text()
    result = CliRunner().invoke(
        main,
        ["dataset", "build", "--out", str(world.root / "none"), "--min-local-tests", "9"],
        env={"HARVEST_HOME": str(world.home), "HARVEST_PINS": str(world.pins)},
    )
    assert result.exit_code == 1 and "9 or more covering dbt tests" in result.output
    assert not (world.root / "none").exists()

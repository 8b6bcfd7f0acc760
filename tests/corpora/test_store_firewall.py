"""The sealed store and the firewall, attacked: wrong splits, moved files, tampering, forged tokens."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from corpora.errors import FirewallError, SealError, UnsealError
from corpora.firewall import require_train
from corpora.ledger import Params, assign, group_of
from corpora.sealed import SEAL_NAME, UNSEALS_NAME, UnsealToken, sealed_dir, unseal, verify
from corpora.store import load_tasks, store_task
from corpora_world import make_task
from core import atomic


@pytest.fixture
def reserved(world, make):
    """Three repos reserved test/dev/train, two tasks each, stored through store_task."""
    pins = {name: make(name) for name in ("t/testrepo", "d/devrepo", "r/trainrepo")}
    assign(world.pins, Params(0, 0, 0, test_groups=("t/testrepo",), dev_groups=("d/devrepo",)))
    tasks = {}
    for split, name in (("test", "t/testrepo"), ("dev", "d/devrepo"), ("train", "r/trainrepo")):
        pin = pins[name]
        tasks[split] = [make_task(pin, split, group_of(pin.id, world.pins), n) for n in (1, 2)]
        for t in tasks[split]:
            store_task(t, world.home, world.pins)
    return pins, tasks


def _manifest(world, recipe="recipe-1", frozen=True):
    cfg = world.root / "recipe" / "config.toml"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text("lr = 0.0001\n")
    path = cfg.parent / f"{recipe}.json"
    path.write_text(json.dumps({"recipe": recipe, "frozen": frozen, "hashes": {"config.toml": atomic.sha256_file(cfg)}}))
    return path


def test_test_tasks_go_only_to_the_sealed_store(world, reserved):
    _, tasks = reserved
    assert sorted(p.name for p in (world.home / "tasks").iterdir()) == ["dev", "train"]
    assert len(list(sealed_dir(world.home).glob("*.json"))) == 2
    seal = json.loads((world.pins / SEAL_NAME).read_text())
    assert seal["count"] == 2 and "problem" not in json.dumps(seal).lower()
    assert [t.instance_id for t in load_tasks("train", world.home, world.pins, purpose="train")] == sorted(
        t.instance_id for t in tasks["train"])
    # storing the same sealed task again (only timings differ) is a no-op; different content is refused
    store_task(replace(tasks["test"][0], timings={"confirm": 9.0}), world.home, world.pins)
    with pytest.raises(SealError, match="already sealed"):
        store_task(replace(tasks["test"][0], effect="other"), world.home, world.pins)


def test_store_refuses_records_that_disagree_with_the_ledger(world, reserved, make):
    pins, tasks = reserved
    with pytest.raises(FirewallError, match="reserves"):
        store_task(replace(tasks["test"][0], split="train"), world.home, world.pins)
    with pytest.raises(FirewallError, match="split group"):
        store_task(replace(tasks["train"][0], split_group="somewhere/else"), world.home, world.pins)
    late = make("late/repo")
    with pytest.raises(FirewallError, match="no reserved split"):
        store_task(make_task(late, "train", "late/repo", 5), world.home, world.pins)


def test_training_purpose_reads_only_train(world, reserved):
    for split in ("dev", "test"):
        with pytest.raises(FirewallError, match="purpose 'train'"):
            load_tasks(split, world.home, world.pins, purpose="train")
    assert len(load_tasks("dev", world.home, world.pins, purpose="eval")) == 2


def test_require_train_rejects_dev_test_and_relabelled_records(world, reserved):
    _, tasks = reserved
    assert require_train(tasks["train"]) == tasks["train"]
    for split in ("dev", "test"):
        with pytest.raises(FirewallError, match="non-train"):
            require_train([*tasks["train"], tasks[split][0]])
    relabelled = replace(tasks["dev"][0], split="train")
    require_train([relabelled])  # the record alone looks like train...
    with pytest.raises(FirewallError, match="ledger reserves"):
        require_train([relabelled], pins=world.pins)  # ...the ledger knows better


def test_moved_task_file_is_caught(world, reserved):
    _, tasks = reserved
    src = sealed_dir(world.home) / f"{tasks['test'][0].instance_id}.json"
    shutil.copy(src, world.home / "tasks" / "train" / src.name)
    with pytest.raises(FirewallError, match="moved"):
        load_tasks("train", world.home, world.pins, purpose="train")
    (world.home / "tasks" / "train" / src.name).unlink()
    relabel = json.loads(src.read_text()) | {"split": "train"}
    (world.home / "tasks" / "train" / src.name).write_text(json.dumps(relabel))
    with pytest.raises(FirewallError, match="reserves"):
        load_tasks("train", world.home, world.pins, purpose="train")


def test_test_split_needs_the_audit_token(world, reserved):
    with pytest.raises(FirewallError, match="sealed"):
        load_tasks("test", world.home, world.pins, purpose="eval")
    forged = UnsealToken("recipe-x", "0" * 64, "0" * 64, "2024-01-01T00:00:00+00:00", "f" * 64)
    with pytest.raises(UnsealError, match="not issued"):
        load_tasks("test", world.home, world.pins, purpose="eval", token=forged)
    token = unseal(_manifest(world), home=world.home, pins=world.pins)
    got = load_tasks("test", world.home, world.pins, purpose="eval", token=token)
    assert len(got) == 2 and {t.split for t in got} == {"test"}
    with pytest.raises(FirewallError):
        load_tasks("test", world.home, world.pins, purpose="train", token=token)
    with pytest.raises(UnsealError, match="already unsealed"):
        unseal(_manifest(world), home=world.home, pins=world.pins)
    assert len((world.pins / UNSEALS_NAME).read_text().splitlines()) == 1


def test_unseal_refuses_unfrozen_or_changed_recipes(world, reserved):
    with pytest.raises(UnsealError, match="not frozen"):
        unseal(_manifest(world, "r2", frozen=False), home=world.home, pins=world.pins)
    manifest = _manifest(world, "r3")
    (manifest.parent / "config.toml").write_text("lr = 0.1\n")
    with pytest.raises(UnsealError, match="changed"):
        unseal(manifest, home=world.home, pins=world.pins)
    assert not (world.pins / UNSEALS_NAME).exists()


@pytest.mark.parametrize("how", ["edit", "delete", "add", "seal"])
def test_any_change_to_the_sealed_store_is_detected(world, reserved, how):
    _, tasks = reserved
    token = unseal(_manifest(world), home=world.home, pins=world.pins)
    folder = sealed_dir(world.home)
    victim = sorted(folder.glob("*.json"))[0]
    if how == "edit":
        victim.write_text(victim.read_text().replace("wrong values", "right values"))
    elif how == "delete":
        victim.unlink()
    elif how == "add":
        (folder / "extra.json").write_text(victim.read_text())
    else:
        (world.pins / SEAL_NAME).write_text(json.dumps({"count": 2, "root": "0" * 64}))
    with pytest.raises(SealError):
        verify(world.home, world.pins)
    with pytest.raises(SealError):
        load_tasks("test", world.home, world.pins, purpose="eval", token=token)
    with pytest.raises(SealError):
        store_task(make_task(reserved[0]["t/testrepo"], "test", "t/testrepo", 7), world.home, world.pins)

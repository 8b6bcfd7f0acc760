"""The sealed store and the firewall, attacked: wrong splits, moved files, tampering, forged tokens."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from corpora_world import make_task

from dbt_harvest.corpora.errors import FirewallError, SealError, UnsealError
from dbt_harvest.corpora.firewall import require_train
from dbt_harvest.corpora.recipe import ADAPTER_DIR, CONFIG_NAME, FROZEN_NAME, MANIFEST_NAME, verify_frozen
from dbt_harvest.corpora.sealed import SEAL_NAME, UNSEALS_NAME, UnsealToken, sealed_dir, unseal, verify
from dbt_harvest.corpora.store import load_tasks, store_task
from tests.recipes import finished_run, frozen_run


def _recipe(world, name="recipe-1", frozen=True):
    """A run folder (frozen by the real corpora.recipe.freeze unless ``frozen`` is False), made once per name."""
    run_dir = world.root / "runs" / name
    if (run_dir / FROZEN_NAME).exists():
        return run_dir
    return (frozen_run if frozen else finished_run)(world.root / "runs", name)


def test_test_tasks_go_only_to_the_sealed_store(world, reserved):
    _, tasks = reserved
    assert sorted(p.name for p in (world.home / "tasks").iterdir()) == ["dev", "train"]
    assert len(list(sealed_dir(world.home).glob("*.json"))) == 2
    seal = json.loads((world.pins / SEAL_NAME).read_text())
    assert seal["count"] == 2 and "problem" not in json.dumps(seal).lower()
    assert [t.instance_id for t in load_tasks("train", world.home, world.pins, purpose="train")] == sorted(
        t.instance_id for t in tasks["train"]
    )
    # storing the same sealed task again is a no-op; different content is refused
    store_task(tasks["test"][0], world.home, world.pins)
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
    token = unseal(_recipe(world), home=world.home, pins=world.pins)
    got = load_tasks("test", world.home, world.pins, purpose="eval", token=token)
    assert len(got) == 2 and {t.split for t in got} == {"test"}
    with pytest.raises(FirewallError):
        load_tasks("test", world.home, world.pins, purpose="train", token=token)
    with pytest.raises(UnsealError, match="already unsealed"):
        unseal(_recipe(world), home=world.home, pins=world.pins)
    assert len((world.pins / UNSEALS_NAME).read_text().splitlines()) == 1


def test_unseal_refuses_unfrozen_or_changed_recipes(world, reserved):
    with pytest.raises(UnsealError, match="not frozen; run `harvest train freeze"):
        unseal(_recipe(world, "r2", frozen=False), home=world.home, pins=world.pins)
    config = _recipe(world, "r3") / CONFIG_NAME
    config.write_text(config.read_text().replace("0.0001", "0.1"))
    with pytest.raises(UnsealError, match="config changed"):
        unseal(config.parent, home=world.home, pins=world.pins)
    weights = _recipe(world, "r4") / ADAPTER_DIR / "adapter_model.safetensors"
    weights.write_bytes(b"retrained after freezing")
    with pytest.raises(UnsealError, match="adapter changed"):
        unseal(
            weights.parent.parent / MANIFEST_NAME, home=world.home, pins=world.pins
        )  # the manifest path names the run too
    manifest = _recipe(world, "r5") / MANIFEST_NAME
    manifest.write_text(manifest.read_text().replace('"global_step": 1', '"global_step": 2'))
    with pytest.raises(UnsealError, match="altered after signing"):
        unseal(manifest.parent, home=world.home, pins=world.pins)
    assert not (world.pins / UNSEALS_NAME).exists()


def test_the_recipe_id_is_the_run_name_and_what_it_reproduces(world, reserved):
    """Same config, base and data in another folder is the same recipe (refused); new training data is not."""
    first = _recipe(world, "sft-a")
    token = unseal(first, home=world.home, pins=world.pins)
    assert token.recipe.startswith("sft-a@") and token.recipe == verify_frozen(first).recipe
    elsewhere = frozen_run(world.root / "elsewhere", "sft-a", weights=b"another seed")
    with pytest.raises(UnsealError, match="already unsealed"):
        unseal(elsewhere, home=world.home, pins=world.pins)
    more_data = frozen_run(world.root / "more-data", "sft-a", dataset="e" * 64)
    assert unseal(more_data, home=world.home, pins=world.pins).recipe != token.recipe


@pytest.mark.parametrize("how", ["edit", "delete", "add", "seal"])
def test_any_change_to_the_sealed_store_is_detected(world, reserved, how):
    _, tasks = reserved
    token = unseal(_recipe(world), home=world.home, pins=world.pins)
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


def test_a_fresh_home_rebuilds_the_sealed_store_only_when_asked_and_only_from_empty(world, reserved, tmp_path):
    """A fresh machine re-minting the corpus starts with an empty sealed store against a committed seal:
    refused with the way out unless asked; when asked, the same tasks give back the same seal; and a
    store that already holds tasks is still checked (a rebuild is not a way round tampering)."""
    _, tasks = reserved
    pins = tmp_path / "rebuild" / "pins"
    shutil.copytree(world.pins, pins)
    committed = (pins / SEAL_NAME).read_text()
    fresh = tmp_path / "rebuild" / "home"
    with pytest.raises(SealError, match="--rebuild-sealed"):
        store_task(tasks["test"][0], fresh, pins)
    for task in tasks["test"]:
        store_task(task, fresh, pins, rebuild_sealed=True)
    assert (pins / SEAL_NAME).read_text() == committed
    assert len(verify(fresh, pins)) == len(tasks["test"])
    victim = sealed_dir(fresh) / f"{tasks['test'][0].instance_id}.json"
    victim.write_text(victim.read_text().replace(tasks["test"][0].effect, "tampered", 1))
    with pytest.raises(SealError, match="does not match its committed seal"):
        store_task(tasks["test"][1], fresh, pins, rebuild_sealed=True)


def test_each_arm_of_a_recipe_is_unsealed_once_and_its_token_is_bound_to_its_arm(world, reserved):
    from dataclasses import replace as swap

    from dbt_harvest.corpora.sealed import check_token

    run = _recipe(world, "arms")
    trained = unseal(run, home=world.home, pins=world.pins)
    base = unseal(run, home=world.home, pins=world.pins, arm="base")
    assert (trained.arm, base.arm) == ("recipe", "base") and trained.recipe == base.recipe
    assert len(load_tasks("test", world.home, world.pins, purpose="eval", token=base)) == 2
    for arm in ("recipe", "base"):
        with pytest.raises(UnsealError, match="already unsealed"):
            unseal(run, home=world.home, pins=world.pins, arm=arm)
    with pytest.raises(UnsealError, match="unknown arm"):
        unseal(run, home=world.home, pins=world.pins, arm="other")
    # a token relabelled to the other arm is not the one the ledger issued
    with pytest.raises(UnsealError, match="not issued"):
        check_token(swap(base, arm="recipe"), world.home, world.pins)
    lines = [json.loads(line) for line in (world.pins / UNSEALS_NAME).read_text().splitlines()]
    assert [line.get("arm", "recipe") for line in lines if line["recipe"] == trained.recipe] == ["recipe", "base"]

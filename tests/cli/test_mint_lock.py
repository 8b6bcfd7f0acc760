"""`harvest mint --write-lock/--verify-lock` and `harvest corpus lock`: a fresh re-mint of the example, stopped
by a time budget and resumed until done, reproduces the lock task for task; a lock that says otherwise makes
the verify exit 1."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.corpora.tasklock import LOCK_NAME, read_lock, write_lock
from dbt_harvest.harvester.mint.tally import counts_line

#: The renamed-gold test's full mints: two families and one task per model keep its claims (lock re-keyed,
#: rebuild reproduced) on fewer candidates than a mint of every family (the lock is the mint's, whatever its size).
FEW = ("--max-per-model", "1", "--families", "time,null")


def _run(home: Path, pins: Path, *args: str) -> tuple[int, str, str]:
    """``harvest ARGS`` in ``home`` with a progress line per update (piped): (exit code, stdout, stderr)."""
    env = {"HARVEST_HOME": str(home), "HARVEST_PINS": str(pins), "HARVEST_PROGRESS_INTERVAL": "0"}
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_a_fresh_budgeted_mint_resumed_until_done_reproduces_the_lock_and_a_changed_lock_fails(
    minted_example, example_harvest, tmp_path: Path
) -> None:
    home, pins = tmp_path / "minted" / "home", tmp_path / "minted" / "pins"
    shutil.copytree(minted_example.home, home, symlinks=True)
    shutil.copytree(minted_example.pins, pins)
    pin = minted_example.pin.id
    code, out, err = _run(home, pins, "corpus", "lock", "--max-per-model", "1", "--json")
    assert code == 0, err
    written = json.loads(out)
    assert written["counts"]["train"] == len(minted_example.tasks) > 0 and written["partial"] == []
    # nothing left to mint: the same mint verifies against the lock it wrote
    code, out, err = _run(home, pins, "mint", pin, "--max-per-model", "1", "--verify-lock", "--json")
    assert code == 0 and json.loads(out)["lock"]["same"], err

    # the rebuild: the unminted harvest, the committed pins (ledger + lock), a fresh mint stopped by a time
    # budget and resumed as often as it takes (`--budget-s`): it must end with exactly the unstopped mint's
    # tasks, which the lock holds (the corpus is rebuilt this way, in budgeted runs)
    fresh_home, fresh_pins = tmp_path / "fresh" / "home", tmp_path / "fresh" / "pins"
    shutil.copytree(example_harvest.home, fresh_home, symlinks=True)
    shutil.copytree(pins, fresh_pins)
    budget, runs, left_after = 3.0, 0, []
    while runs < 40:
        code, out, err = _run(
            fresh_home, fresh_pins, "mint", "--all", "--max-per-model", "1", "--budget-s", str(budget), "--json"
        )
        assert code == 0, err[-2000:]
        summary = json.loads(out)  # stdout is exactly one JSON object; progress went to stderr
        if runs == 0:  # the first run mints repairs: its last progress line ends on this run's counts
            progress = [line for line in err.splitlines() if line.startswith("mint: ")]
            shape = r"mint: \d+/\d+ model shards, 0/1 pins done; repair \d+/\d+ shards(?: \(\d+ stopped\))?: (.*) \("
            last = re.match(shape, progress[-1]) if progress else None
            assert last is not None and last.group(1) == counts_line(summary["this_run"]), err[-2000:]
        runs += 1
        left = summary["unfinished"]["model_shards"]
        if left == 0:
            break
        if left_after:
            # resumed at least once: each further run gets more, so a loaded machine (where a run decides
            # one candidate past its budget) still finishes in a few runs; every run still resumes
            budget *= 2 if summary["this_run"]["candidates"] == 0 else 1.5
        left_after.append(left)
    assert left_after and runs < 40, "the first run finished inside the budget, so nothing was resumed"
    assert list((fresh_home / "mint").rglob("*.part")) == [], "a finished mint leaves no stopped-shard marker"
    expected = {p.name: p.read_text() for p in sorted((minted_example.home / "tasks" / "train").glob("*.json"))}
    assert (
        expected
        and {p.name: p.read_text() for p in sorted((fresh_home / "tasks" / "train").glob("*.json"))} == expected
    )
    code, out, err = _run(fresh_home, fresh_pins, "mint", "--all", "--max-per-model", "1", "--verify-lock", "--json")
    assert code == 0, err
    assert json.loads(out)["lock"] == {
        "same": True,
        "summary": "the rebuild reproduces the lock task for task",
        "missing": [],
        "extra": [],
        "changed": [],
        "renamed": [],
        "restated": [],
        "golds_renamed": [],
        "unfinished": [],
    }

    # a lock that lists one task fewer: the rebuild has one the lock does not, exit 1 with the id
    lock = read_lock(fresh_pins)
    assert lock is not None
    dropped = next(t for t in lock.tasks if t.split == "train")
    write_lock(replace(lock, tasks=tuple(t for t in lock.tasks if t != dropped)), fresh_pins)
    code, out, _ = _run(fresh_home, fresh_pins, "mint", "--all", "--max-per-model", "1", "--verify-lock")
    assert code == 1 and f"extra: train:{dropped.instance_id}" in out
    (fresh_pins / LOCK_NAME).unlink()
    code, _, err = _run(fresh_home, fresh_pins, "corpus", "lock", "--verify")
    assert code == 1 and "no _tasks.lock" in err


@pytest.mark.deep(
    covered_by=(
        "tests/cli/test_mint_lock.py::test_a_fresh_budgeted_mint_resumed_until_done_reproduces_the_lock_and_a_changed_lock_fails",
        "tests/harvester/test_add.py::test_a_pin_named_by_its_gold_file_bytes_keeps_that_name_while_a_rebuild_reproduces_them",
    )
)
def test_a_gold_renamed_by_a_rebuild_is_re_minted_from_the_lock_and_re_keyed(example_harvest, tmp_path: Path) -> None:
    """A pin that names its gold by the file's bytes (pins made before content naming), minted and locked,
    then rebuilt in a fresh home with --rename-gold: `--only-locked` re-mints just the locked tasks,
    `--verify-lock` finds each equal to its locked record once the old gold name is put back, `corpus lock
    --pin` re-keys them, and a lock that names another gold is a difference (exit 1)."""
    from dbt_harvest.core import atomic
    from dbt_harvest.core.pin import pin_path, read_pin, write_pin
    from dbt_harvest.corpora.ledger import Params, assign
    from tests.conftest import use_env

    home, pins = tmp_path / "old" / "home", tmp_path / "old" / "pins"
    shutil.copytree(example_harvest.home, home, symlinks=True)
    shutil.copytree(example_harvest.pins, pins)
    pin = example_harvest.pin
    stored = home / "gold" / f"{pin.gold_sha256}.duckdb"
    by_bytes = atomic.sha256_file(stored)
    shutil.copyfile(stored, home / "gold" / f"{by_bytes}.duckdb")
    write_pin(replace(pin, gold_sha256=by_bytes), pins)
    with use_env(home, pins):
        assign(pins, Params(test=0, dev=0, seed=0))
    code, out, err = _run(home, pins, "mint", pin.id, *FEW, "--write-lock", "--json")
    assert code == 0, err
    full = json.loads(out)["this_run"]
    locked = read_lock(pins)
    assert locked is not None and locked.gold_of(pin.id) == by_bytes
    ids = sorted(t.instance_id for t in locked.tasks)
    assert len(ids) == full["kept"] > 0 and full["candidates"] > len(ids)

    fresh_home, fresh_pins = tmp_path / "fresh" / "home", tmp_path / "fresh" / "pins"
    shutil.copytree(pins, fresh_pins)
    code, out, err = _run(
        fresh_home,
        fresh_pins,
        "add",
        example_harvest.example.spec,
        "--rebuild",
        "--rename-gold",
        "--package-mirror",
        str(example_harvest.example.mirror),
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["drift"] == [f"gold {by_bytes[:12]} -> {pin.gold_sha256[:12]}"]
    assert read_pin(pin_path(pin.id, fresh_pins)).versions == pin.versions

    code, out, err = _run(
        fresh_home, fresh_pins, "mint", pin.id, "--max-per-model", "1", "--only-locked", "--verify-lock", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["this_run"] == {"candidates": len(ids), "screened_out": 0, "confirm_rejected": 0, "kept": len(ids)}
    assert result["lock"]["same"] and result["lock"]["renamed"] == [f"train:{i}" for i in ids]
    assert result["lock"]["golds_renamed"] == [{"pin": pin.id, "locked": by_bytes, "rebuilt": pin.gold_sha256}]
    assert "under a renamed gold" in result["lock"]["summary"]

    # a lock that names some other gold for the pin: no task is the locked one under that name
    write_lock(replace(locked, golds=((pin.id, "0" * 64),)), fresh_pins)
    code, out, _ = _run(
        fresh_home, fresh_pins, "mint", pin.id, "--max-per-model", "1", "--only-locked", "--verify-lock"
    )
    assert code == 1 and f"changed: train:{ids[0]}" in out
    write_lock(locked, fresh_pins)

    code, out, err = _run(fresh_home, fresh_pins, "corpus", "lock", "--pin", pin.id, "--max-per-model", "1", "--json")
    assert code == 0, err
    rekeyed = read_lock(fresh_pins)
    assert rekeyed is not None and rekeyed.gold_of(pin.id) == pin.gold_sha256
    assert sorted(t.instance_id for t in rekeyed.tasks) == ids
    assert {t.sha256 for t in rekeyed.tasks}.isdisjoint({t.sha256 for t in locked.tasks})
    code, out, err = _run(fresh_home, fresh_pins, "mint", pin.id, *FEW, "--verify-lock", "--json")
    assert code == 0, err
    assert json.loads(out)["lock"]["summary"] == "the rebuild reproduces the lock task for task"

    (fresh_pins / LOCK_NAME).unlink()
    code, _, err = _run(fresh_home, fresh_pins, "mint", pin.id, "--only-locked")
    assert code == 2 and "_tasks.lock" in err

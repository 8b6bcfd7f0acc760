"""`harvest mint --write-lock/--verify-lock` and `harvest corpus lock`: a fresh re-mint of the example
reproduces the lock task for task; a lock that says otherwise makes the verify exit 1."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from cli import main
from corpora.tasklock import LOCK_NAME, read_lock, write_lock


def _run(home: Path, pins: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"HARVEST_HOME": str(home), "HARVEST_PINS": str(pins)})
    return result.exit_code, result.stdout, result.stderr


def test_a_fresh_mint_reproduces_the_lock_and_a_changed_lock_fails(minted_example, example_harvest, tmp_path: Path) -> None:
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

    # the rebuild: the unminted harvest, the committed pins (ledger + lock), a fresh mint
    fresh_home, fresh_pins = tmp_path / "fresh" / "home", tmp_path / "fresh" / "pins"
    shutil.copytree(example_harvest.home, fresh_home, symlinks=True)
    shutil.copytree(pins, fresh_pins)
    code, out, err = _run(fresh_home, fresh_pins, "mint", "--all", "--max-per-model", "1", "--verify-lock", "--json")
    assert code == 0, err
    assert json.loads(out)["lock"] == {"same": True, "summary": "the rebuild reproduces the lock task for task",
                                       "missing": [], "extra": [], "changed": [], "unfinished": []}

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

"""`harvest demo` works in a folder of its own: the user's pins, reservation and tasks stay untouched, so
the next steps of docs/CHAIN.md (add, split assign, mint) need no --force."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from dbt_harvest.cli import main


def test_the_demo_leaves_the_users_pins_and_reservation_alone(minted_example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home, pins = tmp_path / "home", tmp_path / "pins"
    # what an earlier demo run left in its own folder (the example pinned and minted), so this run is quick
    shutil.copytree(minted_example.home, home / "demo", symlinks=True)
    shutil.copytree(minted_example.pins, home / "demo" / "pins")
    env = {"HARVEST_HOME": str(home), "HARVEST_PINS": str(pins)}
    result = CliRunner().invoke(main, ["demo", "--json"], env=env)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["id"] == minted_example.pin.id and summary["demo_home"] == str(home / "demo")
    assert summary["mint"]["tasks_per_pin"][minted_example.pin.id] >= 1
    assert not pins.exists() or not any(pins.iterdir())  # no pin, no _splits.jsonl in the user's pins
    assert not (home / "tasks").exists()
    listed = CliRunner().invoke(main, ["list", "--json"], env=env)
    assert listed.exit_code == 0 and json.loads(listed.stdout)["pins"] == []
    text = CliRunner().invoke(main, ["demo"], env=env)
    assert text.exit_code == 0 and "your pins folder is not touched" in text.output
    assert f"HARVEST_HOME={home / 'demo'}" in text.output and "harvest add" in text.output

"""`harvest gc`: finds what killed runs leave, old enough, and nothing else; dry run unless --yes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner

from dbt_harvest.cli import main

DAY = 24 * 3600


def _make(path: Path, age_s: float, payload: int = 100) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "f.bin").write_bytes(b"x" * payload)
    stamp = time.time() - age_s
    for p in (path / "f.bin", path):
        os.utime(p, (stamp, stamp))
    return path


def _world(home: Path) -> tuple[list[Path], list[Path]]:
    """(leftovers, keep): a day-old leftover of each kind, and what must stay (finished or fresh)."""
    leftovers = [
        _make(home / "builds" / "acme__shop" / "20260101T000000" / "source", DAY).parent,
        _make(home / "templates" / "acme__shop_0123456789ab.old", DAY),
        _make(home / "templates" / ".acme__shop_0123456789ab.k2j3", DAY),
        _make(home / "datasets" / ".v1.building-abc123", DAY),
        _make(home / ".out.old-abc123", DAY),
        _make(home / "tmp" / "mint-xyz", DAY),
    ]
    keep = [
        _make(home / "builds" / "acme__shop" / "20260102T000000" / "build1", DAY).parent,  # finished add: logs stay
        _make(home / "templates" / "acme__shop_0123456789ab", DAY),
        _make(home / "gold", DAY),
        _make(home / "datasets" / "v1", DAY),
        _make(home / "tmp" / "mint-running", 60),  # a running mint's scratch: too young
        _make(home / "datasets" / ".v2.building-fresh", 60),
    ]
    for run in (leftovers[0], keep[0]):
        stamp = time.time() - DAY
        os.utime(run, (stamp, stamp))
    return leftovers, keep


def test_gc_lists_by_default_and_removes_with_yes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    leftovers, keep = _world(home)
    env = {"HARVEST_HOME": str(home), "HARVEST_PINS": str(tmp_path / "pins")}
    runner = CliRunner()

    dry = runner.invoke(main, ["gc", "--json"], env=env)
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert report["removed"] is False
    assert sorted(item["path"] for item in report["leftovers"]) == sorted(str(p) for p in leftovers)
    assert all(p.exists() for p in leftovers + keep)  # a dry run removes nothing

    human = runner.invoke(main, ["gc"], env=env)
    assert (
        human.exit_code == 0
        and "nothing removed (dry run)" in human.stdout
        and "templates/acme__shop_0123456789ab.old" in human.stdout
    )

    done = runner.invoke(main, ["gc", "--yes"], env=env)
    assert done.exit_code == 0 and f"removed {len(leftovers)} leftover(s)" in done.stdout, done.output
    assert not any(p.exists() for p in leftovers)
    assert all(p.exists() for p in keep)
    assert "nothing to collect" in runner.invoke(main, ["gc"], env=env).stdout

    young = runner.invoke(main, ["gc", "--older-than", "0", "--json"], env=env)
    assert {Path(item["path"]).name for item in json.loads(young.stdout)["leftovers"]} == {
        "mint-running",
        ".v2.building-fresh",
    }

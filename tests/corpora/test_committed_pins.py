"""CI, offline: the committed pins/ folder (the corpus) is sound, and each check fails on a tampered copy.

Nothing here fetches a repository or builds one: pins are facts (commits, origins, digests, table
shapes), the ledger and the task lock are hash-checked text. The full rebuild is a documented command
(docs/corpus/REBUILD.md), not a CI step.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.licenses import REDISTRIBUTABLE
from dbt_harvest.core.pin import PackageRecord, list_pins, pin_path, write_pin
from dbt_harvest.corpora.checks import check_pins_folder
from dbt_harvest.corpora.ledger import SplitLedger
from dbt_harvest.corpora.tasklock import read_lock, write_lock

PINS = Path(__file__).resolve().parents[2] / "pins"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A scratch copy of the committed pins/ to tamper with."""
    dest = tmp_path / "pins"
    shutil.copytree(PINS, dest)
    return dest


def test_the_committed_corpus_passes_every_offline_check() -> None:
    assert check_pins_folder(PINS) == []


def test_the_corpus_is_the_size_the_project_promises() -> None:
    pins = list_pins(PINS)
    owners = {p.url.removeprefix("https://github.com/").split("/")[0].lower() for p in pins}
    repositories = {p.url for p in pins if not p.augmentation_sha256}
    assert len(repositories) >= 30 and len(owners) >= 8, (len(repositories), sorted(owners))
    ledger = SplitLedger.load(PINS)
    groups: dict[str, set[str]] = {}
    for pin in pins:
        found = ledger.assignment(pin)
        assert found is not None, pin.id
        groups.setdefault(found.split, set()).add(found.group)
        if pin.license not in REDISTRIBUTABLE:
            assert found.split == "test", f"{pin.id} ({pin.license}) is in a public split"
    assert len(groups["test"]) >= 5 and len(groups["dev"]) >= 5, {k: len(v) for k, v in groups.items()}
    lock = read_lock(PINS)
    assert lock is not None and {t.pin for t in lock.tasks} <= {p.id for p in pins}
    assert len(lock.tasks) >= 300 and len({t.pin.split("+aug-")[0] for t in lock.tasks}) >= 20


def test_an_augmented_pin_needs_its_candidates_and_keeps_its_rows_out_of_the_commit(copy: Path) -> None:
    """An augmented pin's seed patch clones repository rows: it must not sit beside the compat patches
    (and git ignores its own folder); a pin that does not record the candidates it serves could not be
    minted again as it was."""
    import subprocess

    augmented = next(p for p in list_pins(copy) if p.augmentation_sha256)
    (copy / "patches" / f"{augmented.augmentation_sha256}.diff").write_text("+cloned row\n")
    write_pin(replace(augmented, recovers=()), copy)
    problems = check_pins_folder(copy)
    assert any("beside the compat patches" in p and augmented.id in p for p in problems), problems
    assert any("records no candidates" in p and augmented.id in p for p in problems), problems
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "pins/patches/augmentations/x.diff"], cwd=PINS.parent, capture_output=True
    )
    assert ignored.returncode == 0


def test_cli_check_exits_0_on_the_corpus_and_1_on_a_tampered_copy(copy: Path) -> None:
    ok = CliRunner().invoke(main, ["corpus", "check", "--json"], env={"HARVEST_PINS": str(PINS)})
    assert ok.exit_code == 0 and json.loads(ok.stdout)["problems"] == [], ok.output
    victim = sorted(copy.glob("*.toml"))[0]
    text = victim.read_text()
    victim.write_text(re.sub(r'(?m)^clock = ".*"$', 'clock = "1999-01-01 00:00:00"', text, count=1))
    assert victim.read_text() != text
    bad = CliRunner().invoke(main, ["corpus", "check"], env={"HARVEST_PINS": str(copy)})
    assert bad.exit_code == 1 and "digest mismatch" in bad.output


def test_a_machine_path_in_a_pin_is_caught(copy: Path) -> None:
    pin = list_pins(copy)[0]
    leaked = PackageRecord(
        name="dbt_utils",
        source="hub:dbt-labs/dbt_utils",
        requested=">=1.0.0",
        version="1.4.1",
        commit="a" * 40,
        url="/home/someone/pkgmirror/dbt-labs/dbt_utils",
    )
    write_pin(replace(pin, packages=(*pin.packages, leaked)), copy)  # a valid digest: only the path is wrong
    problems = check_pins_folder(copy)
    assert any(p.startswith("machine-path:") and pin.id in p for p in problems), problems


def test_a_public_split_holding_an_unlicensed_repository_is_caught(copy: Path) -> None:
    ledger = SplitLedger.load(copy)
    pin = next(p for p in list_pins(copy) if (a := ledger.assignment(p)) is not None and a.split != "test")
    write_pin(replace(pin, license="unknown"), copy)
    problems = check_pins_folder(copy)
    assert any(p.startswith("license:") and pin.id in p for p in problems), problems


def test_a_tampered_ledger_is_caught(copy: Path) -> None:
    path = copy / "_splits.jsonl"
    path.write_text(path.read_text().replace('"train"', '"dev"', 1))
    problems = check_pins_folder(copy)
    assert problems and problems[-1].startswith("ledger:"), problems


def test_a_lock_entry_moved_across_splits_is_caught(copy: Path) -> None:
    lock = read_lock(copy)
    assert lock is not None and lock.tasks
    first = next(t for t in lock.tasks if t.split == "train")
    moved = tuple(replace(t, split="dev") if t == first else t for t in lock.tasks)
    write_lock(replace(lock, tasks=moved), copy)
    assert any("locked as dev" in p for p in check_pins_folder(copy))


def test_a_missing_pin_behind_a_lock_entry_is_caught(copy: Path) -> None:
    lock = read_lock(copy)
    assert lock is not None
    gone = lock.tasks[0].pin
    pin_path(gone, copy).unlink()
    assert any(f"pin {gone} is not under" in p for p in check_pins_folder(copy))

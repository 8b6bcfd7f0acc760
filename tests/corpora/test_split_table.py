"""`harvest corpus splits`: tasks per split, kind, repository and owner from the committed lock, with the
targets the evaluation needs and the sealed split's minimum detectable effect (issue 58).

The committed corpus is read as it is (pins/ and its lock: nothing is unsealed, no home is needed); the
shares and shortfalls are also checked on a lock made here over committed pins, with counts chosen so each
target is just met or just missed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.corpora.split_table import TARGETS, UNRECORDED, SplitTarget, split_table
from dbt_harvest.corpora.tasklock import LockedTask, TaskLock, read_lock
from dbt_harvest.eval.audit.power import minimum_detectable_effect

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "pins"


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["corpus", "splits", *args], env={"HARVEST_PINS": str(PINS)})
    return result.exit_code, result.stdout


def test_the_committed_lock_is_counted_per_split_kind_and_repository() -> None:
    lock = read_lock(PINS)
    assert lock is not None
    table = split_table(lock, PINS)
    for split in ("train", "dev", "test"):
        assert table.total(split) == lock.count(split)
        assert sum(table.by(split, "repo").values()) == lock.count(split)
    # ids name the kind in train and dev; the sealed split's entries are a pin, a hash and the kind
    assert set(table.by("dev", "kind")) <= {"repair", "completion"}
    sealed_kinds = {t.kind for t in lock.tasks if t.split == "test"}
    assert set(table.by("test", "kind")) == {k or UNRECORDED for k in sealed_kinds}
    assert sealed_kinds == {"repair", "completion"}  # the committed test split is locked with both kinds
    completions = sum(1 for t in lock.tasks if t.split == "train" and ".complete." in t.instance_id)
    assert table.by("train", "kind")["completion"] == completions


def test_the_command_writes_the_table_and_states_the_sealed_mde(tmp_path: Path) -> None:
    code, out = _cli("--json", "--out", str(tmp_path))
    assert code == 0
    data = json.loads(out)
    lock = read_lock(PINS)
    assert lock is not None
    assert {s: v["tasks"] for s, v in data["splits"].items()} == {s: lock.count(s) for s in ("train", "dev", "test")}
    assert data["sealed_mde"]["0.3"] == minimum_detectable_effect(lock.count("test"), 0.3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["splits.json", "splits.md", "splits.png"]
    assert json.loads((tmp_path / "splits.json").read_text()) == data
    assert "## The sealed split's minimum detectable effect" in (tmp_path / "splits.md").read_text()


def test_the_committed_split_table_is_the_one_the_lock_gives_now(tmp_path: Path) -> None:
    """docs/corpus/splits.* are rewritten whenever the lock changes (`harvest corpus splits --out docs/corpus`)."""
    code, _ = _cli("--out", str(tmp_path))
    assert code == 0
    for name in ("splits.json", "splits.md"):
        assert (ROOT / "docs" / "corpus" / name).read_text() == (tmp_path / name).read_text(), name


def test_check_fails_while_a_split_misses_its_targets() -> None:
    code, out = _cli()
    data_code, data = _cli("--json")
    shortfalls = json.loads(data)["shortfalls"]
    assert code == data_code == 0  # without --check the table is a report
    assert ("NOT met" in out) == any(shortfalls.values())
    checked, _ = _cli("--check")
    assert checked == (1 if any(shortfalls.values()) else 0)


def _lock_over(counts: dict[tuple[str, str, str], int]) -> TaskLock:
    """A lock of ``counts`` tasks per (split, pin, operator) over committed pins."""
    tasks = []
    for (split, pin, operator), n in counts.items():
        for i in range(n):
            iid = "" if split == "test" else f"x.{pin[-12:-4]}.{operator}.{i:08x}"
            tasks.append(LockedTask(split, pin, f"{hash((split, pin, operator, i)) & (2**64 - 1):064x}", iid))
    return TaskLock("head", tuple(tasks))


def test_shares_and_targets_on_a_lock_made_here() -> None:
    pins = sorted(p.stem for p in PINS.glob("fivetran__*.toml") if "+aug" not in p.stem)
    others = sorted(
        p.stem for p in PINS.glob("*.toml") if not p.stem.startswith(("fivetran__", "_")) and "+aug" not in p.stem
    )
    assert len(pins) >= 8 and len(others) >= 4
    counts = {("dev", pin, "complete"): 10 for pin in pins[:4]}  # 40 completion tasks of one owner
    counts |= {("dev", pin, "filter"): 10 for pin in others[:4]}  # 40 repairs of four other owners
    table = split_table(_lock_over(counts), PINS)
    dev = next(t for t in TARGETS if t.split == "dev")
    assert table.largest("dev", "owner") == ("fivetran", 0.5)  # exactly the cap: allowed
    assert table.shortfalls(dev) == ["80 tasks, at least 150 wanted"]
    counts[("dev", pins[0], "complete")] = 11
    assert "owner fivetran holds 50%, at most 50% allowed" not in split_table(_lock_over(counts), PINS).shortfalls(dev)
    crowded = split_table(_lock_over(counts), PINS).shortfalls(SplitTarget("dev", 1, None, 0.12, 0.5, True))
    assert any(s.startswith("repo fivetran/") and "at most 12% allowed" in s for s in crowded)
    assert any(s.startswith("owner fivetran holds 5") for s in crowded)
    one_kind = split_table(_lock_over({("dev", pins[0], "filter"): 3}), PINS)
    assert one_kind.shortfalls(SplitTarget("dev", 1, both_kinds=True)) == [
        "kinds repair: both repair and completion wanted"
    ]


def test_a_lock_naming_a_missing_pin_is_refused(tmp_path: Path) -> None:
    from dbt_harvest.corpora.errors import CorporaError

    with pytest.raises(CorporaError, match="does not hold"):
        split_table(_lock_over({("train", "nobody__nothing@000000000000", "filter"): 1}), tmp_path)

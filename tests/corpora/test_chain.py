"""The hash-chained JSONL ledgers (unseal ledger, test-audit results): appends chain, and any edited,
dropped or reordered line is refused with the file and line named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbt_harvest.corpora.chain import append_entry, read_chain

FIELDS = ("recipe", "time", "prev")


class LedgerBroken(Exception):
    pass


def _ledger(path: Path, n: int = 3) -> list[dict]:
    entries: list[dict] = []
    for i in range(n):
        entries.append(
            append_entry(
                path, {"recipe": f"r{i}", "time": f"t{i}", "prev": entries[-1]["commitment"] if entries else ""}
            )
        )
    return entries


def test_appended_entries_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    assert read_chain(path, FIELDS, LedgerBroken, "test ledger") == []
    written = _ledger(path)
    assert read_chain(path, FIELDS, LedgerBroken, "test ledger") == written
    assert len({e["commitment"] for e in written}) == 3


@pytest.mark.parametrize("damage", ["edit", "drop", "swap", "garbage", "missing field"])
def test_a_damaged_ledger_is_refused_naming_the_line(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "ledger.jsonl"
    _ledger(path)
    lines = path.read_text().splitlines()
    if damage == "edit":
        entry = json.loads(lines[1])
        entry["recipe"] = "someone else"
        lines[1] = json.dumps(entry, sort_keys=True)
    elif damage == "drop":
        del lines[1]
    elif damage == "swap":
        lines[1], lines[2] = lines[2], lines[1]
    elif damage == "garbage":
        lines[1] = "{not json"
    else:
        entry = json.loads(lines[1])
        del entry["time"]
        lines[1] = json.dumps(entry, sort_keys=True)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerBroken, match=r"ledger\.jsonl:2: "):
        read_chain(path, FIELDS, LedgerBroken, "test ledger")

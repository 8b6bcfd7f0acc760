"""Append-only JSONL ledgers whose lines form a hash chain (the unseal ledger, the test-audit ledger).

Each line is a JSON object: its body (every field but ``commitment``, ``prev`` naming the previous
line's commitment) and ``commitment``, the sha256 of the canonical JSON of the body. Editing,
reordering or dropping a line breaks the chain, and reading refuses it. The file is rewritten whole
and atomically on append, so a crash leaves either the old ledger or the new one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic


def commitment(body: dict[str, Any]) -> str:
    """The sha256 of the body's canonical JSON."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_chain(path: Path, fields: tuple[str, ...], error: type[Exception], what: str) -> list[dict[str, Any]]:
    """Every entry of the ledger at ``path`` (none when it is missing), the chain checked.

    Each entry must hold ``fields`` (``prev`` among them); a malformed line or a broken chain raises
    ``error`` naming the file and line.
    """
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    prev = ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            entry = json.loads(line)
            body = {k: v for k, v in entry.items() if k != "commitment"}
            missing = [k for k in fields if k not in body]
        except (json.JSONDecodeError, AttributeError) as exc:
            raise error(f"{path}:{number}: malformed {what} entry ({exc}); restore the file from git") from None
        if missing:
            raise error(f"{path}:{number}: malformed {what} entry (no {', '.join(missing)}); restore the file from git")
        if body["prev"] != prev or commitment(body) != entry.get("commitment"):
            raise error(f"{path}:{number}: the {what}'s hash chain is broken (a line was edited or removed)")
        out.append(entry)
        prev = entry["commitment"]
    return out


def append_entry(path: Path, body: dict[str, Any]) -> dict[str, Any]:
    """Append ``body`` (its ``prev`` already set to the last commitment) with its commitment; -> the entry."""
    entry = {**body, "commitment": commitment(body)}
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    atomic.write_text(path, old + json.dumps(entry, sort_keys=True) + "\n")
    return entry

"""The sealed test store: test tasks are written only here, checked against a committed hash on every read.

Layout: ``HARVEST_HOME/sealed/test/<instance_id>.json``; the seal is ``pins/_sealed.json`` (committed),
holding the task count and a root hash (sha256 over the sorted ``name sha256`` lines of the store), so a
changed, added or removed sealed task is detected and nothing in ``pins/`` reveals a task's content.

Reading test tasks needs an :class:`UnsealToken`, which only :func:`unseal` issues: the audit hands it a
recipe manifest that is marked frozen and whose file hashes check out; the unseal is appended to
``pins/_unseals.jsonl`` (hash-chained), and a second unseal of the same recipe is refused.

The manifest contract (JSON, or TOML by suffix) that :func:`unseal` reads::

    {"recipe": "<id>", "frozen": true, "hashes": {"<path relative to the manifest>": "<sha256>", ...}}

(``files`` is accepted as another name for ``hashes``.)
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from corpora.chain import append_entry, read_chain
from corpora.digest import TaskDigest, digest
from corpora.errors import SealError, UnsealError
from corpora.locks import locked
from core import atomic
from core.task_record import TaskRecord, read_task, task_from_dict, write_task

SEAL_NAME = "_sealed.json"
UNSEALS_NAME = "_unseals.jsonl"
UNSEAL_FIELDS = ("recipe", "manifest_sha256", "seal_root", "time", "prev")


@dataclass(frozen=True)
class Seal:
    count: int
    root: str


@dataclass(frozen=True)
class UnsealToken:
    """Proof that the audit unsealed the test split for one frozen recipe; checked against the ledger."""

    recipe: str
    manifest_sha256: str
    seal_root: str
    issued_at: str
    commitment: str


def sealed_dir(home: Path) -> Path:
    return home / "sealed" / "test"


def root_of(entries: dict[str, str]) -> str:
    lines = "".join(f"{name} {sha}\n" for name, sha in sorted(entries.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def read_seal(pins: Path) -> Seal | None:
    path = pins / SEAL_NAME
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Seal(count=int(data["count"]), root=str(data["root"]))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise SealError(f"{path}: malformed seal ({exc}); restore it from git") from None


def _scan(home: Path) -> dict[str, str]:
    folder = sealed_dir(home)
    if not folder.is_dir():
        return {}
    return {p.name: atomic.sha256_file(p) for p in sorted(folder.glob("*.json"))}


def verify(home: Path, pins: Path) -> dict[str, str]:
    """Hash the store and compare with the committed seal; return name -> sha256 or raise SealError."""
    entries = _scan(home)
    seal = read_seal(pins)
    if seal is None:
        if entries:
            raise SealError(
                f"sealed store {sealed_dir(home)} holds {len(entries)} task(s) but {pins / SEAL_NAME} is missing; "
                "restore the seal from git or re-mint the test split"
            )
        return {}
    root = root_of(entries)
    if len(entries) != seal.count or root != seal.root:
        raise SealError(
            f"sealed store {sealed_dir(home)} does not match its committed seal: {len(entries)} task(s), root "
            f"{root[:12]}; the seal says {seal.count}, {seal.root[:12]}: a sealed task was changed, added or removed"
        )
    return entries


def _same_task(a: TaskRecord, b: TaskRecord) -> bool:
    return replace(a, timings={}) == replace(b, timings={})


def seal_task(record: TaskRecord, home: Path, pins: Path) -> Path:
    """Add one test task to the store and update the committed seal (under a lock; store verified first)."""
    if record.split != "test":
        raise SealError(f"{record.instance_id}: only test tasks go to the sealed store (split is {record.split!r})")
    folder = sealed_dir(home)
    with locked(folder):
        entries = verify(home, pins)
        path = folder / f"{record.instance_id}.json"
        if path.name in entries:
            if _same_task(read_task(path), record):
                return path
            raise SealError(f"{record.instance_id} is already sealed with different content; sealed tasks never change")
        write_task(record, folder)
        entries[path.name] = atomic.sha256_file(path)
        seal = {"count": len(entries), "root": root_of(entries), "format": 1}
        atomic.write_text(pins / SEAL_NAME, json.dumps(seal, sort_keys=True, indent=1) + "\n")
        return path


def sealed_digests(home: Path, pins: Path) -> list[TaskDigest]:
    """Digests of the sealed tasks for the contamination lint (verified; no task content leaves)."""
    verify(home, pins)
    return [digest(read_task(p)) for p in sorted(sealed_dir(home).glob("*.json"))]


def sealed_count(home: Path, pins: Path) -> int:
    return len(verify(home, pins))


# --- the audit's unseal path -------------------------------------------------------------------------

def _load_manifest(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UnsealError(f"no recipe manifest at {path}") from None
    try:
        data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UnsealError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(data, dict):
        raise UnsealError(f"{path}: manifest is not an object")
    return data


def check_manifest(path: Path) -> tuple[str, str]:
    """Refuse unless the manifest is frozen and every file it hashes still has that hash; -> (recipe, sha256)."""
    data = _load_manifest(path)
    if data.get("frozen") is not True:
        raise UnsealError(f"{path}: the recipe is not frozen; freeze it before unsealing the test split")
    recipe = data.get("recipe")
    if not isinstance(recipe, str) or not recipe:
        raise UnsealError(f"{path}: manifest names no recipe (field 'recipe')")
    hashes = data.get("hashes", data.get("files"))
    if not isinstance(hashes, dict) or not hashes:
        raise UnsealError(f"{path}: manifest lists no file hashes (field 'hashes'); a frozen recipe pins its files")
    for rel, expected in sorted(hashes.items()):
        target = (path.parent / rel).resolve()
        if not target.is_file():
            raise UnsealError(f"{path}: frozen file {rel} is missing")
        actual = atomic.sha256_file(target)
        if actual != expected:
            raise UnsealError(f"{path}: frozen file {rel} changed (sha256 {actual[:12]}, manifest says {str(expected)[:12]})")
    return recipe, atomic.sha256_file(path)


def _unseal_lines(pins: Path) -> list[dict[str, Any]]:
    return read_chain(pins / UNSEALS_NAME, UNSEAL_FIELDS, UnsealError, "unseal ledger")


def unseal(recipe_manifest_path: Path, *, home: Path, pins: Path, now: str | None = None) -> UnsealToken:
    """Issue the one token that reads the test split for a frozen recipe; record it; refuse a second time."""
    recipe, manifest_sha = check_manifest(recipe_manifest_path)
    entries = verify(home, pins)
    if not entries:
        raise UnsealError("the sealed test store is empty: nothing to unseal")
    with locked(pins):
        lines = _unseal_lines(pins)
        for entry in lines:
            if entry["recipe"] == recipe:
                raise UnsealError(f"recipe {recipe!r} was already unsealed at {entry['time']}; a test split is read once per recipe")
        body = {
            "recipe": recipe,
            "manifest_sha256": manifest_sha,
            "seal_root": root_of(entries),
            "time": now or datetime.now(UTC).replace(microsecond=0).isoformat(),
            "prev": lines[-1]["commitment"] if lines else "",
        }
        entry = append_entry(pins / UNSEALS_NAME, body)
    return UnsealToken(recipe, manifest_sha, body["seal_root"], body["time"], entry["commitment"])


def check_token(token: object, home: Path, pins: Path) -> dict[str, str]:
    """A token must be one the unseal ledger recorded, for the store as it is now; -> verified entries."""
    if not isinstance(token, UnsealToken):
        raise UnsealError("reading the test split needs an UnsealToken from corpora.sealed.unseal (the audit's path)")
    recorded = [e for e in _unseal_lines(pins) if e["commitment"] == token.commitment]
    if not recorded or any(
        recorded[0][k] != getattr(token, k) for k in ("recipe", "manifest_sha256", "seal_root")
    ) or recorded[0]["time"] != token.issued_at:
        raise UnsealError(f"unseal token for {token.recipe!r} is not in {pins / UNSEALS_NAME}; it was not issued by unseal()")
    entries = verify(home, pins)
    if root_of(entries) != token.seal_root:
        raise UnsealError("the sealed store changed since this token was issued; unseal again for a new recipe")
    return entries


def read_sealed(home: Path, pins: Path, token: UnsealToken) -> list[TaskRecord]:
    """The test tasks, for the audit only."""
    entries = check_token(token, home, pins)
    records = []
    for name, sha in sorted(entries.items()):
        raw = (sealed_dir(home) / name).read_bytes()
        if hashlib.sha256(raw).hexdigest() != sha:
            raise SealError(f"sealed task {name} changed while it was being read")
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SealError(f"sealed task {name} is not valid JSON ({exc})") from None
        records.append(task_from_dict(data, where=f"sealed/{name}"))
    return records

"""The sealed test store: test tasks are written only here, checked against a committed hash on every read.

Layout: ``HARVEST_HOME/sealed/test/<instance_id>.json``; the seal is ``pins/_sealed.json`` (committed),
holding the task count and a root hash (sha256 over the sorted ``name sha256`` lines of the store), so a
changed, added or removed sealed task is detected and nothing in ``pins/`` reveals a task's content.

Reading test tasks needs an :class:`UnsealToken`, which only :func:`unseal` issues: the audit hands it a
training run folder that `harvest train freeze` froze, and :func:`corpora.recipe.verify_frozen` (the same
check freezing made) must find the signed manifest, the adapter and the config unchanged; the unseal is
appended to ``pins/_unseals.jsonl`` (hash-chained) under the recipe's identity, and a second unseal of the
same recipe is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.core.task_record import TaskRecord, read_task, task_from_dict, write_task
from dbt_harvest.corpora.chain import append_entry, read_chain
from dbt_harvest.corpora.digest import TaskDigest, digest
from dbt_harvest.corpora.errors import FreezeError, ManifestError, SealError, UnsealError
from dbt_harvest.corpora.locks import locked
from dbt_harvest.corpora.recipe import FrozenRecipe, verify_frozen

SEAL_NAME = "_sealed.json"
UNSEALS_NAME = "_unseals.jsonl"
UNSEAL_FIELDS = ("recipe", "manifest_sha256", "seal_root", "time", "prev")
#: Who plays a recipe's sealed audit: the recipe itself (its adapter), or the untrained base it was trained
#: from, audited under the same frozen protocol as its control. Each arm is unsealed and audited once.
ARMS = ("recipe", "base")


def arm_of(entry: dict[str, Any]) -> str:
    """The arm a ledger entry is for (entries written before arms existed are the recipe's)."""
    return str(entry.get("arm") or "recipe")


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
    arm: str = "recipe"


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
    if not entries and seal.count:
        raise SealError(
            f"the sealed store {sealed_dir(home)} is empty but {pins / SEAL_NAME} seals {seal.count} task(s): this "
            "home has not minted the test split; mint it with `harvest mint --all --rebuild-sealed` (then "
            "`--verify-lock` checks each task against pins/_tasks.lock)"
        )
    if len(entries) != seal.count or root != seal.root:
        raise SealError(
            f"sealed store {sealed_dir(home)} does not match its committed seal: {len(entries)} task(s), root "
            f"{root[:12]}; the seal says {seal.count}, {seal.root[:12]}: a sealed task was changed, added or removed"
        )
    return entries


def _same_task(a: TaskRecord, b: TaskRecord) -> bool:
    return a == b


def seal_task(record: TaskRecord, home: Path, pins: Path, *, rebuild: bool = False) -> Path:
    """Add one test task to the store and update the committed seal (under a lock; store verified first).

    ``rebuild``: a fresh home re-minting a sealed corpus. Only an EMPTY store may start over against a
    seal that commits tasks (the seal is then rewritten from what is minted, task by task, so a resumed
    rebuild verifies as usual); a non-empty store that disagrees with its seal is refused either way.
    Whether the rebuild reproduced the sealed tasks is the task lock's check (its test hashes).
    """
    if record.split != "test":
        raise SealError(f"{record.instance_id}: only test tasks go to the sealed store (split is {record.split!r})")
    folder = sealed_dir(home)
    with locked(folder):
        entries = _scan(home) if rebuild and not _scan(home) else verify(home, pins)
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


def records_to_verify(home: Path, pins: Path) -> list[TaskRecord]:
    """The sealed tasks, for the harvester's own validity check (`harvest tasks verify --sealed`), read only
    after the store matches its seal. That check rebuilds each task from its pin and reports it by its lock
    hash and the names of the checks it fails, never by id, statement or check detail; training code never
    gets here (its records pass :func:`corpora.firewall.require_train`, which refuses a test record)."""
    verify(home, pins)
    return [read_task(p) for p in sorted(sealed_dir(home).glob("*.json"))]


def sealed_count(home: Path, pins: Path) -> int:
    return len(verify(home, pins))


# --- the audit's unseal path -------------------------------------------------------------------------


def check_recipe(recipe: Path) -> FrozenRecipe:
    """Refuse unless ``recipe`` (a run folder, or its manifest.json) is a frozen recipe that still verifies."""
    try:
        return verify_frozen(recipe)
    except (FreezeError, ManifestError) as exc:
        raise UnsealError(f"cannot unseal the test split: {exc}") from None


def _unseal_lines(pins: Path) -> list[dict[str, Any]]:
    return read_chain(pins / UNSEALS_NAME, UNSEAL_FIELDS, UnsealError, "unseal ledger")


def unseal(recipe_path: Path, *, home: Path, pins: Path, now: str | None = None, arm: str = "recipe") -> UnsealToken:
    """Issue the one token that reads the test split for one arm of a frozen recipe (ARMS); record it;
    refuse a second time for the same recipe and arm."""
    if arm not in ARMS:
        raise UnsealError(f"unknown arm {arm!r}; one of {', '.join(ARMS)}")
    frozen = check_recipe(recipe_path)
    recipe, manifest_sha = frozen.recipe, frozen.manifest_sha256
    entries = verify(home, pins)
    if not entries:
        raise UnsealError("the sealed test store is empty: nothing to unseal")
    with locked(pins):
        lines = _unseal_lines(pins)
        for entry in lines:
            if entry["recipe"] == recipe and arm_of(entry) == arm:
                who = "" if arm == "recipe" else f" for its {arm} arm"
                raise UnsealError(
                    f"recipe {recipe!r} was already unsealed{who} at {entry['time']}; a test split is read "
                    "once per recipe and arm"
                )
        body = {
            **({"arm": arm} if arm != "recipe" else {}),
            "recipe": recipe,
            "manifest_sha256": manifest_sha,
            "seal_root": root_of(entries),
            "time": now or datetime.now(UTC).replace(microsecond=0).isoformat(),
            "prev": lines[-1]["commitment"] if lines else "",
        }
        entry = append_entry(pins / UNSEALS_NAME, body)
    return UnsealToken(recipe, manifest_sha, body["seal_root"], body["time"], entry["commitment"], arm)


def check_token(token: object, home: Path, pins: Path) -> dict[str, str]:
    """A token must be one the unseal ledger recorded, for the store as it is now; -> verified entries."""
    if not isinstance(token, UnsealToken):
        raise UnsealError("reading the test split needs an UnsealToken from corpora.sealed.unseal (the audit's path)")
    recorded = [e for e in _unseal_lines(pins) if e["commitment"] == token.commitment]
    if (
        not recorded
        or any(recorded[0][k] != getattr(token, k) for k in ("recipe", "manifest_sha256", "seal_root"))
        or recorded[0]["time"] != token.issued_at
        or arm_of(recorded[0]) != token.arm
    ):
        raise UnsealError(
            f"unseal token for {token.recipe!r} is not in {pins / UNSEALS_NAME}; it was not issued by unseal()"
        )
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

"""The built state of a pin: the database dbt built and its manifest, kept for minting.

Stage 1 of minting re-runs compiled SQL against the pin's built database instead of rebuilding, and
reads models, compiled SQL and lineage from dbt's manifest. Both come from the first sandboxed build
of `harvest add`, are stored under HARVEST_HOME/state/<pin>/ with their sha256 in a meta file, and are
verified on every load.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import atomic
from core.errors import GoldError
from core.home import harvest_home

DB_FILE = "build.duckdb"


@dataclass(frozen=True)
class BuiltState:
    database: Path
    manifest: dict[str, Any]


def state_dir(pin_id: str) -> Path:
    return harvest_home() / "state" / pin_id.replace("@", "_")


def install_state(pin_id: str, workspace: Path, project_dir: str) -> None:
    """Copy the build's database and manifest into the pin's state folder (meta written last)."""
    folder = state_dir(pin_id)
    database = workspace / DB_FILE
    manifest = workspace / project_dir / "target" / "manifest.json"
    hashes = {}
    for src, name in ((database, DB_FILE), (manifest, "manifest.json")):
        if not src.is_file():
            raise GoldError(f"the build left no {src.name} to keep as minting state")
        atomic.install_file(src, folder / name)
        hashes[name] = atomic.sha256_file(folder / name)
    atomic.write_text(folder / "meta.json", json.dumps(hashes, sort_keys=True))


def load_state(pin_id: str) -> BuiltState:
    """The verified built state of a pin; GoldError when missing or altered."""
    folder = state_dir(pin_id)
    try:
        hashes = json.loads((folder / "meta.json").read_text())
    except (OSError, json.JSONDecodeError):
        raise GoldError(f"{pin_id}: no built state (re-run `harvest add --rebuild`)") from None
    for name, digest in hashes.items():
        if not (folder / name).is_file() or atomic.sha256_file(folder / name) != digest:
            raise GoldError(f"{pin_id}: built state file {name} is missing or altered")
    manifest = json.loads((folder / "manifest.json").read_text())
    return BuiltState(database=folder / DB_FILE, manifest=manifest)

"""The built state of a pin: the database dbt built and its manifest, kept for minting.

Stage 1 of minting re-runs compiled SQL against the pin's built database instead of rebuilding, and
reads models, compiled SQL and lineage from dbt's manifest. Both come from the first sandboxed build
of `harvest add`, are stored under HARVEST_HOME/state/<pin>/ with their sha256 in a meta file, and are
verified on every load. They are copied out of the build's workspace through ``safe_fs`` (beneath the
workspace, no link followed, regular files only, bounded): project code may have replaced either with a
link to a host file after the capture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.core.errors import GoldError
from dbt_harvest.core.home import state_dir
from dbt_harvest.core.pin import DEFAULT_DATABASE
from dbt_harvest.harvester.sandbox import safe_fs

DB_FILE = f"{DEFAULT_DATABASE}.duckdb"  # the database file of a pin whose SQL names no database
#: Bound of the copied manifest (the database is bounded by the build's own disk bound).
MANIFEST_BYTES = 1 << 30


@dataclass(frozen=True)
class BuiltState:
    database: Path
    manifest: dict[str, Any]


def install_state(
    pin_id: str, workspace: Path, project_dir: str, *, max_bytes: int = 4 << 30, db_file: str = DB_FILE
) -> None:
    """Copy the build's database (``db_file`` in the workspace; kept as ``DB_FILE``: a copy for a build is
    named after the pin's database, ``Pin.db_file``) and manifest into the pin's state folder (meta last).

    Both are read beneath ``workspace`` without following any link; a link or a non-regular file there
    is refused (GoldError), and nothing of it reaches the state folder."""
    folder = state_dir(pin_id)
    manifest = f"{project_dir}/target/manifest.json" if project_dir not in ("", ".") else "target/manifest.json"
    hashes = {}
    for rel, name, bound in ((db_file, DB_FILE, max_bytes), (manifest, "manifest.json", MANIFEST_BYTES)):
        try:
            hashes[name] = safe_fs.copy_out(workspace, rel, folder / name, max_bytes=bound)
        except safe_fs.UnsafePathError as exc:
            raise GoldError(f"the build left no usable {name} to keep as minting state: {exc}") from None
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

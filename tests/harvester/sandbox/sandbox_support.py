"""Helpers for the sandbox tests: fixture paths, small limits, workspaces, snapshots, canaries.

Every project used here (tests/harvester/sandbox/projects, tests/harvester/sandbox/attacks) is original. Runs use small
limits so that the whole sandbox suite stays within a few minutes on two shared cores.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from dbt_harvest.harvester.sandbox import Limits, write_profile

HERE = Path(__file__).parent
PROJECTS = HERE / "projects"
ATTACKS = HERE / "attacks"
CLOCK = "2024-06-30 12:00:00"
SECRET = "TOPSECRET-7c1e9a"

# Small bounds for attack runs: enough for dbt itself (about 300 MB resident), tight for the attacks.
ATTACK_LIMITS = Limits(
    wall_s=150.0,
    memory_bytes=2 << 30,
    file_bytes=512 << 20,
    workspace_bytes=256 << 20,
    duckdb_memory_limit="256MB",
    relation_rows=1_000_000,
)


def make_workspace(root: Path, source: Path, profile: str) -> Path:
    """Copy a fixture project into a fresh workspace folder and write the sandbox profile."""
    workspace = root / "ws"
    shutil.copytree(source, workspace)
    write_profile(workspace, ".", profile)
    return workspace


def snapshot(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder`` (symlinks recorded as their target)."""
    result = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            result[rel] = "link:" + str(path.readlink())
        elif path.is_file():
            result[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return result


def workspace_mentions(workspace: Path, needle: str) -> list[str]:
    """Files in the workspace whose bytes contain ``needle`` (symlinks not followed)."""
    hits = []
    for path in workspace.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes():
            hits.append(str(path.relative_to(workspace)))
    return hits

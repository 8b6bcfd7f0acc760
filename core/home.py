"""Where a run's artefacts live: HARVEST_HOME (default ./.harvest) and the committed pins folder.

One function per location so that no module builds these paths by hand.
"""

from __future__ import annotations

import os
from pathlib import Path


def harvest_home() -> Path:
    """The artefact root: $HARVEST_HOME, else ./.harvest (git-ignored)."""
    return Path(os.environ.get("HARVEST_HOME", ".harvest")).resolve()


def pins_dir() -> Path:
    """The committed pins folder: $HARVEST_PINS, else ./pins."""
    return Path(os.environ.get("HARVEST_PINS", "pins")).resolve()


def mirrors_dir() -> Path:
    """Bare git mirrors, one per repository URL."""
    return harvest_home() / "mirrors"


def gold_dir() -> Path:
    """Gold DuckDB files, content-addressed: gold/<sha256>.duckdb."""
    return harvest_home() / "gold"


def builds_dir() -> Path:
    """Build logs and the build workspaces of `harvest add`, kept for inspection."""
    return harvest_home() / "builds"


def packages_cache_dir() -> Path:
    """Vendored dbt package trees, keyed by commit."""
    return harvest_home() / "packages"


def tasks_dir() -> Path:
    """Minted task records (JSON), one file per task."""
    return harvest_home() / "tasks"


def tmp_dir() -> Path:
    """Scratch space on the same filesystem as the artefacts, so renames are atomic."""
    path = harvest_home() / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path

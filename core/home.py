"""Where a run's artefacts live: HARVEST_HOME (default ./.harvest) and the committed pins folder.

One function per location so that no module builds these paths by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

from dbt_harvest.core.errors import PinError


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


def toolchains_dir() -> Path:
    """Pin toolchains (virtualenvs with another dbt, ``harvester.toolchain``), one folder per toolchain name:
    $HARVEST_TOOLCHAINS, else HARVEST_HOME/toolchains."""
    given = os.environ.get("HARVEST_TOOLCHAINS")
    return Path(given).resolve() if given else harvest_home() / "toolchains"


def tasks_dir() -> Path:
    """Minted task records (JSON), one file per task."""
    return harvest_home() / "tasks"


def pin_folder_name(pin_id: str) -> str:
    """A pin's folder name under HARVEST_HOME (``owner__name@sha12`` -> ``owner__name_sha12``): one rule for
    every per-pin folder, so none is spelled by hand. A pin id that is not one plain path component (a
    dataset row may carry any string) is refused here, so no per-pin folder can be anywhere but beneath its
    parent, whatever validation a caller did or did not do."""
    name = pin_id.replace("@", "_")
    if (
        not name
        or name in (".", "..")
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or ".." in name
    ):
        raise PinError(f"{pin_id[:80]!r} is not a pin id (one path component: owner__name@<sha>)")
    return name


def state_dir(pin_id: str) -> Path:
    """The pin's built state (database + manifest) that minting and grading re-run SQL against."""
    return harvest_home() / "state" / pin_folder_name(pin_id)


def template_dir(pin_id: str) -> Path:
    """The pin's exported tree (packages vendored, compat patch applied) every workspace is copied from."""
    return harvest_home() / "templates" / pin_folder_name(pin_id)


def mint_dir(pin_id: str) -> Path:
    """The pin's mint folder (shards, reports, the kept-bugs index)."""
    return harvest_home() / "mint" / pin_folder_name(pin_id)


def tmp_dir() -> Path:
    """Scratch space on the same filesystem as the artefacts, so renames are atomic."""
    path = harvest_home() / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path

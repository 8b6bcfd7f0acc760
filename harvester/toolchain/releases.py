"""The dbt releases a pin may build under, and choosing one from what a project and its packages require.

Why it exists: issue 61 asks for an explicit set of supported versions. Each release is one exact
dbt-core, the dbt-duckdb release made for it, and a DuckDB no newer than this process's (so the host reads
every database a toolchain writes: DuckDB reads the storage of every older release from 0.9 on) and no
older than 1.4, so that a toolchain's builds get the same DuckDB lockdown as today's: 1.1 has no
``allowed_directories``/``allowed_paths``, and in 1.2 and 1.3 a directory allowed inside another (the
lockdown's temporary folder inside the workspace) refuses every file of the outer one that sorts after it
(measured: a seed's ``COPY`` is refused). Each release was measured to build a seed and a model under the
lockdown and to be read back by this process's DuckDB (DESIGN.md, "Toolchains"). DuckDB 1.4 is its
long-term-support release. The newest is the dbt this process has installed: a pin on it
records no toolchain.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from dbt_harvest.core.errors import ToolchainError


@dataclass(frozen=True)
class Release:
    """One supported dbt release: ``minor`` (``1.7``) and the exact versions its toolchain installs."""

    minor: str
    dbt_core: str
    dbt_duckdb: str
    duckdb: str
    installed: bool = False  # the dbt this process has: no toolchain is made for it

    @property
    def requirements(self) -> tuple[str, ...]:
        return (f"dbt-core=={self.dbt_core}", f"dbt-duckdb=={self.dbt_duckdb}", f"duckdb=={self.duckdb}")

    @property
    def label(self) -> str:
        return f"dbt {self.minor} (dbt-core {self.dbt_core}, dbt-duckdb {self.dbt_duckdb}, DuckDB {self.duckdb})"


#: The toolchain releases, newest first (the installed dbt, newer still, comes before them).
TOOLCHAIN_RELEASES: tuple[Release, ...] = (
    Release("1.10", "1.10.23", "1.10.1", "1.4.5"),
    Release("1.9", "1.9.11", "1.9.6", "1.4.5"),
    Release("1.8", "1.8.10", "1.8.4", "1.4.5"),
    Release("1.7", "1.7.20", "1.7.5", "1.4.5"),
    Release("1.6", "1.6.19", "1.6.2", "1.4.5"),
    Release("1.5", "1.5.12", "1.5.2", "1.4.5"),
)


def installed_release() -> Release:
    """The dbt this process has installed, as a release (a pin on it records no toolchain)."""
    core, adapter, duckdb = (metadata.version(name) for name in ("dbt-core", "dbt-duckdb", "duckdb"))
    return Release(".".join(core.split(".")[:2]), core, adapter, duckdb, installed=True)


def supported() -> tuple[Release, ...]:
    """Every release a pin may build under, newest first: the installed dbt, then the toolchains."""
    return (installed_release(), *TOOLCHAIN_RELEASES)


#: The releases `harvest add` may try, as a comma-separated list of minors (``1.11,1.7``) or ``all`` (the
#: default): a machine that cannot make toolchains, or a run that must not, names the installed one alone.
RELEASES_ENV = "HARVEST_DBT_RELEASES"


def walk_releases() -> tuple[Release, ...]:
    """The supported releases `harvest add` may try when none is named (``$HARVEST_DBT_RELEASES``), newest
    first; ToolchainError naming an unknown one."""
    wanted = os.environ.get(RELEASES_ENV, "").strip()
    if not wanted or wanted == "all":
        return supported()
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    chosen = {release_named(name).minor for name in names}
    return tuple(release for release in supported() if release.minor in chosen)


def release_named(version: str) -> Release:
    """The release ``version`` names (``1.7`` or an exact ``1.7.20``); ToolchainError listing the supported."""
    for release in supported():
        if version in (release.minor, release.dbt_core):
            return release
    names = ", ".join(release.minor for release in supported())
    raise ToolchainError(f"dbt {version} is not a supported toolchain; use one of: {names} (or its exact version)")


def _specifiers(required: Any, where: str) -> list[Any]:
    from dbt_common import semver

    # a string may name several ranges separated by commas ('>=1.10.0,<2.0.0'), as dbt reads it
    wanted = required if isinstance(required, list) else str(required).split(",")
    try:
        return [semver.VersionSpecifier.from_version_string(str(value).strip()) for value in wanted]
    except Exception as exc:  # dbt's own parser refuses it: so would dbt
        raise ToolchainError(
            f"{where}: require-dbt-version {required!r} is not a version range dbt reads ({exc})"
        ) from None


def version_meets(dbt_core: str, required: Any, where: str = "dbt_project.yml") -> bool:
    """Whether dbt-core ``dbt_core`` meets a ``require-dbt-version`` value (a string or a list; empty: any),
    read with dbt's own semantics; ToolchainError when dbt could not read the value."""
    if not required:
        return True
    from dbt_common import semver

    version = semver.VersionSpecifier.from_version_string(dbt_core)
    return bool(semver.versions_compatible(version, *_specifiers(required, where)))


def satisfies(release: Release, required: Any, where: str = "dbt_project.yml") -> bool:
    """Whether ``release``'s dbt-core meets a ``require-dbt-version`` value (``version_meets``)."""
    return version_meets(release.dbt_core, required, where)


def choose(requirements: Sequence[tuple[str, Any]], candidates: Sequence[Release] | None = None) -> Release:
    """The newest of ``candidates`` (default: every supported release) that meets every
    ``(where, require-dbt-version)``; ToolchainError naming the requirements when none does."""
    pool = tuple(candidates) if candidates is not None else supported()
    for release in pool:
        if all(satisfies(release, required, where) for where, required in requirements):
            return release
    stated = "; ".join(f"{where} requires {required!r}" for where, required in requirements if required)
    names = ", ".join(release.minor for release in pool)
    raise ToolchainError(f"no supported dbt ({names}) meets what the project requires: {stated}")

"""The toolchain a pin's builds run under: which dbt-core, dbt-duckdb and DuckDB, and every package resolved.

Why it exists: a commit written for dbt 1.6 often does not build on today's dbt (its packages refuse the
version, its macros dispatch to names later releases dropped), so a pin may name the toolchain its commit
was written for (issue 61). This module is the record only: pure, so that the pin, the sandbox's profile
and the toolchain maker read one definition. Making a toolchain is ``harvester.toolchain``.

A pin without a toolchain builds under the dbt this process has installed (today's default), so every
pin written before toolchains existed keeps its bytes and digest.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from dbt_harvest.core.errors import PinError

_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
#: one resolved package as pip writes it: ``name==version`` (names normalised: lower case, ``-``)
_LOCK_LINE = re.compile(r"^[a-z0-9][a-z0-9-]*==[A-Za-z0-9.+!-]+$")
_NAME = re.compile(r"^dbt-core-\d+\.\d+\.\d+_dbt-duckdb-\d+\.\d+\.\d+_duckdb-\d+\.\d+\.\d+_[0-9a-f]{12}$")


@dataclass(frozen=True)
class Toolchain:
    """dbt-core, dbt-duckdb and DuckDB versions (exact), and the lock: every package of the toolchain's
    virtualenv as ``name==version``, sorted, so that a toolchain made on another machine gets the same
    versions or says which one differs. An empty lock is a toolchain known only by its three versions (a
    dataset row's: rows carry no lock), made by resolving them anew."""

    dbt_core: str
    dbt_duckdb: str
    duckdb: str
    lock: tuple[str, ...]

    def __post_init__(self) -> None:
        for what, value in (("dbt_core", self.dbt_core), ("dbt_duckdb", self.dbt_duckdb), ("duckdb", self.duckdb)):
            if not _VERSION.match(value):
                raise PinError(f"toolchain {what} must be an exact version like 1.7.19, got {value!r}")
        bad = next((line for line in self.lock if not _LOCK_LINE.match(line)), None)
        if bad is not None:
            raise PinError(f"toolchain lock line {bad!r} is not 'name==version'")
        if tuple(sorted(set(self.lock))) != self.lock:
            raise PinError("toolchain lock must be sorted and without repeats")
        pinned = dict(line.split("==", 1) for line in self.lock)
        named = (("dbt-core", self.dbt_core), ("dbt-duckdb", self.dbt_duckdb), ("duckdb", self.duckdb))
        for dist, version in named if self.lock else ():
            if pinned.get(dist) != version:
                raise PinError(f"toolchain lock has {dist}=={pinned.get(dist, '(none)')}, the toolchain says {version}")

    @property
    def lock_sha256(self) -> str:
        return hashlib.sha256("\n".join(self.lock).encode()).hexdigest()

    @property
    def name(self) -> str:
        """The toolchain's folder name under HARVEST_HOME/toolchains: its three versions and its lock's digest."""
        return f"dbt-core-{self.dbt_core}_dbt-duckdb-{self.dbt_duckdb}_duckdb-{self.duckdb}_{self.lock_sha256[:12]}"

    @property
    def label(self) -> str:
        """How people read it: ``dbt-core 1.7.19, dbt-duckdb 1.7.5, DuckDB 1.2.2``."""
        return f"dbt-core {self.dbt_core}, dbt-duckdb {self.dbt_duckdb}, DuckDB {self.duckdb}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "dbt_core": self.dbt_core,
            "dbt_duckdb": self.dbt_duckdb,
            "duckdb": self.duckdb,
            "lock": list(self.lock),
        }


def toolchain_from_dict(data: Any, where: str) -> Toolchain:
    """A toolchain read back from a pin or a toolchain's own record; PinError naming what is wrong."""
    if not isinstance(data, dict):
        raise PinError(f"{where}: toolchain must be a table")
    keys = {"dbt_core", "dbt_duckdb", "duckdb", "lock"}
    if set(data) != keys:
        raise PinError(f"{where}: toolchain needs exactly {sorted(keys)}, got {sorted(data)}")
    lock = data["lock"]
    if not isinstance(lock, list) or not all(isinstance(line, str) for line in lock):
        raise PinError(f"{where}: toolchain lock must be a list of 'name==version' strings")
    for key in ("dbt_core", "dbt_duckdb", "duckdb"):
        if not isinstance(data[key], str):
            raise PinError(f"{where}: toolchain {key} must be a string")
    try:
        return Toolchain(data["dbt_core"], data["dbt_duckdb"], data["duckdb"], tuple(lock))
    except PinError as exc:
        raise PinError(f"{where}: {exc}") from None


def is_toolchain_name(name: str) -> bool:
    """Whether ``name`` is a toolchain folder name (``Toolchain.name``): nothing else is ever resolved to a path."""
    return bool(_NAME.match(name))

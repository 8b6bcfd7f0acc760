"""A dbt-duckdb plugin that locks every DuckDB connection of a build to the workspace (or less).

dbt-duckdb calls ``Plugin.configure_connection`` on each new database connection before any model runs.
The lock is the project's one locked-down DuckDB (``core/locked_duckdb.py``, bound into the sandbox on
its own and loaded by the child before this module): file access confined, external access off
(no read_csv('/etc/…'), no ATTACH or COPY elsewhere, no extension downloads), memory, threads and
spill space bounded, and ``lock_configuration`` last so SQL from the project cannot undo any of it.

Two scopes. ``workspace`` (harvest add, the mint): DuckDB may touch any file of the workspace, as a
project reading its own CSV files through external sources needs. ``database`` (agent and reward builds):
only what the database needs: the spill folder, the gold file a capture attaches, and the CSV files that
already exist in the workspace (dbt-duckdb loads seeds with ``COPY … FROM`` the file). The build
database itself is opened before the lock and needs no grant. No folder of the workspace is allowed, so
SQL cannot create a file anywhere (no ``COPY … TO 'models/x.py'``).

The settings come from ``LOCKDOWN``, filled once by the sandbox child (child.py) from its request before
dbt starts. A connection opened without them (someone running dbt with this profile by hand) is refused:
the plugin fails closed. Stdlib, dbt and duckdb only: this module is imported inside the sandbox.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import locked_duckdb
from dbt.adapters.duckdb.plugins import BasePlugin

SCOPES = ("workspace", "database")
#: Folders of the workspace whose CSV files are never granted in the database scope (dbt's own output
#: and the sandbox's files are not inputs).
_NOT_INPUTS = ("target", "logs")
#: The files DuckDB 1.5 touches for an attached database: the file, its WAL, the WAL's checkpoint copy.
ATTACHED_SUFFIXES = ("", ".wal", ".wal.checkpoint")


@dataclass(frozen=True)
class Lockdown:
    """What one build's DuckDB connections may touch and use."""

    workspace: str
    temp_directory: str
    memory_limit: str
    threads: int
    max_temp_directory_size: str
    scope: str = "workspace"
    database: str = ""  # the build database (granted by path in the "database" scope)

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"unknown DuckDB scope {self.scope!r}; use one of {SCOPES}")


LOCKDOWN: Lockdown | None = None


def existing_csv_files(workspace: str) -> list[str]:
    """Every regular .csv file under the workspace now (links not followed; the sandbox's own files,
    target/ and logs/ left out): the inputs a seed may be loaded from."""
    found: list[str] = []
    for folder, dirs, files in os.walk(workspace, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".harvest") and d not in _NOT_INPUTS)
        for name in sorted(files):
            path = os.path.join(folder, name)
            if name.lower().endswith(".csv") and os.path.isfile(path) and not os.path.islink(path):
                found.append(path)
    return found


def lock_of(lock: Lockdown, extra_paths: tuple[str, ...] = ()) -> locked_duckdb.Lock:
    """The connection lock for ``lock``'s scope; ``extra_paths`` are files our own steps write (gold)."""
    if lock.scope == "workspace":
        directories: tuple[str, ...] = (lock.workspace,)
        paths: tuple[str, ...] = ()
    else:
        # the connection's own database file (and its WAL) is opened before the lock and not checked;
        # a database our steps ATTACH (the gold capture) is, with its WAL and checkpoint file
        directories = (lock.temp_directory,)
        attached = tuple(f"{path}{suffix}" for path in extra_paths for suffix in ATTACHED_SUFFIXES)
        paths = (*attached, *existing_csv_files(lock.workspace))
    return locked_duckdb.Lock(
        allowed_directories=directories,
        allowed_paths=paths,
        temp_directory=lock.temp_directory,
        max_temp_directory_size=lock.max_temp_directory_size,
        memory_limit=lock.memory_limit,
        threads=int(lock.threads),
    )


def lockdown_statements(lock: Lockdown) -> list[str]:
    """The SET statements of ``lock``, lock last (for tests and the log)."""
    return locked_duckdb.lock_statements(lock_of(lock))


def apply_lockdown(conn: Any, lock: Lockdown, extra_paths: tuple[str, ...] = (), setup: tuple[str, ...] = ()) -> None:
    """Lock a DuckDB connection (also used by the capture and query steps); ``setup`` are our own
    statements run before the lock (the capture's settings)."""
    locked_duckdb.apply_lock(conn, lock_of(lock, extra_paths), setup)


class Plugin(BasePlugin):
    """dbt-duckdb entry point: lock each connection, refuse if the sandbox did not configure us."""

    def initialize(self, plugin_config: dict[str, Any]) -> None:
        if LOCKDOWN is None:
            raise RuntimeError(
                "harvest_lockdown: no lockdown configured; this profile only works inside the harvest "
                "sandbox child (harvester.sandbox.run_steps)"
            )

    def configure_connection(self, conn: Any) -> None:
        if LOCKDOWN is None:
            raise RuntimeError("harvest_lockdown: no lockdown configured")
        apply_lockdown(conn, LOCKDOWN)

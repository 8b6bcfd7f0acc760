"""A dbt-duckdb plugin that locks every DuckDB connection of a build to the workspace.

dbt-duckdb calls ``Plugin.configure_connection`` on each new database connection before any model runs.
We confine file access to the workspace (`allowed_directories`, `enable_external_access=false`: no
read_csv('/etc/…'), no ATTACH or COPY outside it, no extension downloads), bound memory, threads and
spill space, and finally set `lock_configuration` so SQL from the project cannot undo any of it.

The settings come from ``LOCKDOWN``, filled once by the sandbox child (child.py) from its request before
dbt starts. A connection opened without them (someone running dbt with this profile by hand) is refused:
the plugin fails closed. Stdlib, dbt and duckdb only: this module is imported inside the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin


@dataclass(frozen=True)
class Lockdown:
    """What one build's DuckDB connections may touch and use."""

    workspace: str
    temp_directory: str
    memory_limit: str
    threads: int
    max_temp_directory_size: str


LOCKDOWN: Lockdown | None = None


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def lockdown_statements(lock: Lockdown) -> list[str]:
    """The SET statements, in an order DuckDB accepts: paths first, external access off, lock last."""
    workspace = lock.workspace.rstrip("/") + "/"
    return [
        f"SET temp_directory = {_sql_string(lock.temp_directory)}",
        f"SET max_temp_directory_size = {_sql_string(lock.max_temp_directory_size)}",
        f"SET memory_limit = {_sql_string(lock.memory_limit)}",
        f"SET threads = {int(lock.threads)}",
        f"SET allowed_directories = [{_sql_string(workspace)}]",
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        "SET enable_external_access = false",
        "SET lock_configuration = true",
    ]


def apply_lockdown(conn: Any, lock: Lockdown) -> None:
    """Run the lockdown statements on a DuckDB connection (also used by the capture and query steps)."""
    for statement in lockdown_statements(lock):
        conn.execute(statement)


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

"""Checking a captured gold file from outside the sandbox before anyone trusts it.

The capture writes base tables only, but project code runs in the same child and could rewrite the file
afterwards (a leftover thread, say) with a view or macro that reads host files when the harvester
queries it. The runner first copies the file out of the workspace (``safe_fs``); we open that copy
read-only through the project's locked-down DuckDB and refuse anything but the base tables the child
reported.
"""

from __future__ import annotations

from pathlib import Path


def gold_problem(path: Path, expected_tables: list[str]) -> str:
    """'' when ``path`` holds exactly ``expected_tables`` ("schema.name") as base tables, else why not."""
    import duckdb

    from dbt_harvest.core.locked_duckdb import LockedDuckDBError, connect_locked

    if path.is_symlink() or not path.is_file():
        return f"gold file {path.name} is missing or not a regular file"
    try:
        conn = connect_locked(str(path), read_only=True)
    except (duckdb.Error, LockedDuckDBError) as exc:
        return f"gold file {path.name} cannot be opened: {' '.join(str(exc).split())[:200]}"
    try:
        catalog = conn.execute("select current_database()").fetchone()[0]
        views = conn.execute(
            "select count(*) from duckdb_views() where not internal and database_name = ?", [catalog]
        ).fetchone()[0]
        macros = conn.execute(
            "select count(*) from duckdb_functions() where not internal and database_name = ?", [catalog]
        ).fetchone()[0]
        sequences = conn.execute(
            "select count(*) from duckdb_sequences() where database_name = ?", [catalog]
        ).fetchone()[0]
        tables = sorted(
            f"{schema}.{name}"
            for schema, name in conn.execute(
                "select schema_name, table_name from duckdb_tables() where database_name = ?", [catalog]
            ).fetchall()
        )
    finally:
        conn.close()
    if views or macros or sequences:
        return f"gold file {path.name} holds {views} views, {macros} macros, {sequences} sequences; only tables allowed"
    if tables != sorted(expected_tables):
        return f"gold file {path.name} does not hold exactly the captured tables"
    return ""

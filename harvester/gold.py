"""Gold storage: content-addressed DuckDB files, verified by hash on every read.

Gold is the hidden answer, so a corrupted or swapped file must never be mistaken for it: files live at
``HARVEST_HOME/gold/<sha256>.duckdb``, are installed atomically, and ``gold_path`` re-hashes the file
before handing it out (a mismatch is a GoldError, never a silent 0).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from core import atomic
from core.errors import GoldError
from core.home import gold_dir
from core.locked_duckdb import connect_locked

_verified: dict[tuple[str, int, int], bool] = {}


def install_gold(src: Path) -> str:
    """Copy a captured gold file into the store; return its sha256."""
    _check_tables_only(src)
    digest = atomic.sha256_file(src)
    dest = gold_dir() / f"{digest}.duckdb"
    if not dest.exists() or atomic.sha256_file(dest) != digest:
        atomic.install_file(src, dest)
    return digest


def gold_path(sha256: str, *, verify: bool = True) -> Path:
    """The stored gold file for ``sha256``, re-hashed unless its size and mtime were verified before."""
    path = gold_dir() / f"{sha256}.duckdb"
    if not path.is_file():
        raise GoldError(f"gold {sha256[:12]} is missing from {gold_dir()} (re-run `harvest add --rebuild`)")
    if verify:
        stat = path.stat()
        key = (sha256, stat.st_size, stat.st_mtime_ns)
        if not _verified.get(key):
            actual = atomic.sha256_file(path)
            if actual != sha256:
                raise GoldError(f"gold {sha256[:12]} is corrupted: its content hashes to {actual[:12]}")
            _verified[key] = True
    return path


def _check_tables_only(path: Path) -> None:
    """Gold is opened outside the sandbox: it must hold base tables only, no views or macros."""
    con = connect_locked(str(path), read_only=True)
    try:
        views = con.execute(
            "select schema_name || '.' || view_name from duckdb_views() where not internal"
        ).fetchall()
        macros = con.execute("select function_name from duckdb_functions() where not internal and function_type like '%macro%'").fetchall()
    finally:
        con.close()
    if views or macros:
        raise GoldError(f"captured gold holds views or macros ({[v[0] for v in views + macros][:3]}); refusing it")


# -- comparing two captures of the same project ------------------------------------------------------

def _open_capture(path: Path) -> duckdb.DuckDBPyConnection:
    """A capture of a sandboxed build, opened on the host: the one locked-down DuckDB (no file access)."""
    return connect_locked(str(path), read_only=True)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _relation(table: str) -> str:
    schema, _, name = table.partition(".")
    return f"{_quote(schema)}.{_quote(name)}"


def column_signatures(con: duckdb.DuckDBPyConnection, relation: str) -> dict[str, tuple[str, int, int]]:
    """Per column name (lower-cased): (type, non-null count, sum of value hashes), an order-independent
    multiset signature of the column, computed in one query."""
    described = con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    if not described:
        return {}
    parts = ", ".join(f"count({_quote(str(d[0]))}), sum(hash({_quote(str(d[0]))}))::HUGEINT" for d in described)
    row = con.execute(f"SELECT {parts} FROM {relation}").fetchone() or ()
    return {str(d[0]).lower(): (str(d[1]), int(row[2 * i] or 0), int(row[2 * i + 1] or 0))
            for i, d in enumerate(described)}


def differing_columns(first: Path, second: Path, tables: list[str]) -> dict[str, tuple[str, ...] | None]:
    """For each table (``schema.name``) present in both captures: the columns whose values differ
    (in their multiset, any amount), ``()`` when none, or None when the row counts differ or a table is
    missing from one side (the whole table is unstable then)."""
    out: dict[str, tuple[str, ...] | None] = {}
    a, b = _open_capture(first), _open_capture(second)
    try:
        for table in tables:
            try:
                rows_a = a.execute(f"SELECT count(*) FROM {_relation(table)}").fetchone()[0]
                rows_b = b.execute(f"SELECT count(*) FROM {_relation(table)}").fetchone()[0]
            except duckdb.Error:
                out[table] = None
                continue
            if rows_a != rows_b:
                out[table] = None
                continue
            sig_a, sig_b = column_signatures(a, _relation(table)), column_signatures(b, _relation(table))
            out[table] = tuple(sorted(c for c in sig_a if sig_b.get(c) != sig_a[c]))
    finally:
        a.close()
        b.close()
    return out

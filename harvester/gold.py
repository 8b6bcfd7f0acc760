"""Gold storage: DuckDB files named by their content, verified on every read.

Gold is the hidden answer, so a corrupted or swapped file must never be mistaken for it: files live at
``HARVEST_HOME/gold/<name>.duckdb``, are installed atomically, and ``gold_path`` checks the file against
its name before handing it out (a mismatch is a GoldError, never a silent 0).

A gold's name (the ``gold_sha256`` of pins, task records and published rows) is its content digest
(``harvester.gold_digest``): a rebuild whose DuckDB file has other bytes but the same tables has the same
name. Pins made before 2026-12-02 named their gold by the sha256 of the file's bytes; such a name is kept
as long as a rebuild reproduces those bytes (or, where the old file is still in the store, its content),
so no pin or task changes behind a user's back. The committed corpus was moved to content names on
2026-12-03 (`harvest add --rebuild --rename-gold`, tasks re-keyed with `harvest mint --only-locked`); byte
names stay readable for homes, pins and published datasets made before. A file matches a name when either
digest equals it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from dbt_harvest.core import atomic
from dbt_harvest.core.errors import GoldError
from dbt_harvest.core.home import gold_dir
from dbt_harvest.core.locked_duckdb import LockedDuckDBError, connect_locked
from dbt_harvest.harvester.gold_digest import content_digest

_verified: dict[tuple[str, int, int], bool] = {}


def matches(path: Path, name: str) -> bool:
    """Whether the gold file at ``path`` is the gold called ``name``: its bytes hash to it (a pin from
    before content naming) or its content digest does."""
    if atomic.sha256_file(path) == name:
        return True
    try:
        return content_digest(path) == name
    except (LockedDuckDBError, duckdb.Error):  # a file DuckDB cannot read is no gold at all
        return False


def install_gold(src: Path, *, previous: str = "") -> str:
    """Copy a captured gold file into the store; return its name: ``previous`` (the name a rebuilt pin
    had) when the capture is that gold (same bytes, same content digest, or the same content as the file
    stored under that name), else the capture's content digest."""
    _check_tables_only(src)
    name = content_digest(src)
    if previous and previous != name:
        stored = gold_dir() / f"{previous}.duckdb"
        if atomic.sha256_file(src) == previous:
            name = previous
        elif stored.is_file() and atomic.sha256_file(stored) == previous and content_digest(stored) == name:
            return previous  # the store already holds that gold under its old (byte) name
    dest = gold_dir() / f"{name}.duckdb"
    if not dest.exists() or not matches(dest, name):
        atomic.install_file(src, dest)
    return name


def gold_path(name: str, *, verify: bool = True) -> Path:
    """The stored gold file called ``name``, checked (:func:`matches`) unless its size and mtime were
    checked before in this process."""
    path = gold_dir() / f"{name}.duckdb"
    if not path.is_file():
        raise GoldError(f"gold {name[:12]} is missing from {gold_dir()} (re-run `harvest add --rebuild`)")
    if verify:
        stat = path.stat()
        key = (name, stat.st_size, stat.st_mtime_ns)
        if not _verified.get(key):
            if not matches(path, name):
                raise GoldError(
                    f"gold {name[:12]} is corrupted: neither its bytes nor its tables hash to its name "
                    f"(bytes {atomic.sha256_file(path)[:12]}); re-run `harvest add --rebuild` for its pin"
                )
            _verified[key] = True
    return path


def _check_tables_only(path: Path) -> None:
    """Gold is opened outside the sandbox: it must hold base tables only, no views or macros."""
    con = connect_locked(str(path), read_only=True)
    try:
        views = con.execute("select schema_name || '.' || view_name from duckdb_views() where not internal").fetchall()
        macros = con.execute(
            "select function_name from duckdb_functions() where not internal and function_type like '%macro%'"
        ).fetchall()
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


def _row_count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """The number of rows of ``table`` (``schema.name``); duckdb.Error when it is missing."""
    row = con.execute(f"SELECT count(*) FROM {_relation(table)}").fetchone()
    assert row is not None  # an aggregate without GROUP BY always returns one row
    return int(row[0])


def column_signatures(con: duckdb.DuckDBPyConnection, relation: str) -> dict[str, tuple[str, int, int]]:
    """Per column name (lower-cased): (type, non-null count, sum of value hashes), an order-independent
    multiset signature of the column, computed in one query."""
    described = con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    if not described:
        return {}
    parts = ", ".join(f"count({_quote(str(d[0]))}), sum(hash({_quote(str(d[0]))}))::HUGEINT" for d in described)
    row = con.execute(f"SELECT {parts} FROM {relation}").fetchone() or ()
    return {
        str(d[0]).lower(): (str(d[1]), int(row[2 * i] or 0), int(row[2 * i + 1] or 0)) for i, d in enumerate(described)
    }


def differing_columns(first: Path, second: Path, tables: list[str]) -> dict[str, tuple[str, ...] | None]:
    """For each table (``schema.name``) present in both captures: the columns whose values differ
    (in their multiset, any amount), ``()`` when none, or None when the row counts differ or a table is
    missing from one side (the whole table is unstable then)."""
    out: dict[str, tuple[str, ...] | None] = {}
    a, b = _open_capture(first), _open_capture(second)
    try:
        for table in tables:
            try:
                rows_a, rows_b = _row_count(a, table), _row_count(b, table)
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

"""The content digest of a gold file: what its tables hold, independent of how DuckDB laid out the bytes.

Two builds of one pin give the same tables, but not always the same file: DuckDB 1.5 lays some tables out
differently on each write (fivetran/dbt_facebook_ads' creative JSON and dbt-labs/dbt-project-evaluator gave
a new file sha256 on a rebuild, with identical rows, row order and types; multi-threaded writes of large
tables do the same). A gold named by its bytes could then
never be rebuilt. Gold is named by this digest instead: sha256 over a canonical serialization of every
table (sorted by ``schema.name``), its columns (name and type, in order), its row count and its rows in
stored order, each value encoded with its Python type so ``1``, ``1.0``, ``'1'`` and NULL all differ.

The values are read through the Python client, not cast to text inside DuckDB, so the digest does not
depend on how a DuckDB version renders a float or a timestamp; a TIMESTAMPTZ is encoded as its UTC instant,
whatever the session's time zone.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import math
import uuid
from pathlib import Path
from typing import Any

from dbt_harvest.core.locked_duckdb import connect_locked

#: changes whenever the serialization below does, so two digests of different layouts never agree
DIGEST_FORMAT = b"harvest-gold-content/1\n"
_BATCH = 4096


def content_digest(path: Path) -> str:
    """sha256 hex of the canonical content of the gold file at ``path`` (opened read-only, locked)."""
    con = connect_locked(str(path), read_only=True)
    try:
        h = hashlib.sha256(DIGEST_FORMAT)
        tables = con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal ORDER BY schema_name, table_name"
        ).fetchall()
        for schema, name in tables:
            _table(con, str(schema), str(name), h)
        return h.hexdigest()
    finally:
        con.close()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(con: Any, schema: str, name: str, h: hashlib._Hash) -> None:
    columns = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = ? AND table_name = ? "
        "ORDER BY column_index",
        [schema, name],
    ).fetchall()
    h.update(_text("table", f"{schema}.{name}"))
    for column, type_ in columns:
        h.update(_text("column", f"{column} {type_}"))
    cursor = con.execute(f"SELECT * FROM {_quote(schema)}.{_quote(name)}")
    count = 0
    while batch := cursor.fetchmany(_BATCH):
        for row in batch:
            h.update(b"(" + b",".join(encode(v) for v in row) + b")\n")
        count += len(batch)
    h.update(_text("rows", str(count)))


def _text(tag: str, value: str) -> bytes:
    data = value.encode()
    return f"{tag} {len(data)}:".encode() + data + b"\n"


def encode(value: Any) -> bytes:
    """One value, tagged with its type and length-prefixed where it is free text (so no two differ by a
    separator that a value itself could contain)."""
    if value is None:
        return b"N"
    if isinstance(value, bool):
        return b"b1" if value else b"b0"
    if isinstance(value, int):
        return b"i" + str(value).encode()
    if isinstance(value, float):
        return b"f" + (b"nan" if math.isnan(value) else value.hex().encode())
    if isinstance(value, decimal.Decimal):
        return b"d" + str(value).encode()
    if isinstance(value, str):
        data = value.encode()
        return b"s" + str(len(data)).encode() + b":" + data
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"x" + bytes(value).hex().encode()
    if isinstance(value, dt.datetime):  # before date: a datetime is a date
        if value.tzinfo is not None:
            return b"Z" + value.astimezone(dt.UTC).isoformat().encode()
        return b"T" + value.isoformat().encode()
    if isinstance(value, dt.date):
        return b"D" + value.isoformat().encode()
    if isinstance(value, dt.time):
        return b"t" + value.isoformat().encode()
    if isinstance(value, dt.timedelta):
        return b"I" + f"{value.days},{value.seconds},{value.microseconds}".encode()
    if isinstance(value, uuid.UUID):
        return b"u" + str(value).encode()
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(encode(v) for v in value) + b"]"
    if isinstance(value, dict):  # a STRUCT keeps its field order; a MAP comes back as keys/values lists
        return b"{" + b",".join(encode(str(k)) + b"=" + encode(v) for k, v in value.items()) + b"}"
    return b"?" + type(value).__name__.encode() + b":" + encode(str(value))


__all__ = ["DIGEST_FORMAT", "content_digest", "encode"]

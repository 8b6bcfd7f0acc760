"""Opening a gold or submitted DuckDB safely and loading one table as the official check would see it.

Why this module exists: the official check runs ``SELECT * FROM <name>`` (name unquoted, so DuckDB's
case-insensitive resolution in schema ``main``, views accepted), turns the result into a pandas frame
and reads each column as Python values from ``frame.transpose().values.tolist()``. Which Python type a
value ends up as (int, float, bool, str, Timestamp, datetime; NaN, None, pd.NA or NaT for NULL) depends
on the dtypes of the whole frame, and it changes the string sort key the comparison uses. Rather than
re-deriving pandas' rules by hand, we ask pandas itself: a two-row *probe* frame with the same dtypes as
the real one (one non-NULL value per column, and a NULL where the column has NULLs) goes through the real
``transpose().values.tolist()``; the types it yields classify each column. The probe, the row count and
each column's NULL count come from one scan. The bulk data is then read columnar in one Arrow query (text,
timestamps as microseconds, and the numeric types whose pandas values are exactly their Arrow values:
ints, bools, IEEE floats), plus one fetchdf() for DECIMAL and HUGEINT, whose conversion to float is
DuckDB's own; never one Python object per value.

Files are opened read-only through the project's one locked-down DuckDB (``core.locked_duckdb``: no
file but the database itself, no extensions, configuration locked), so a VIEW in an untrusted file that
reads ``/etc/passwd`` fails (and the submission scores 0) instead of leaking the file; reading a
submission is interrupted after ``SUBMISSION_SECONDS`` (a view that runs for ever scores 0).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dbt_harvest.core.locked_duckdb import Lock, LockedDuckDBError, bounded, connect_locked
from dbt_harvest.core.scorer.errors import GoldFileError, GoldTableError

#: The lock of every connection the scorer opens itself: no file access, no extensions, locked; DuckDB's
#: own memory and thread defaults (scoring is not the place to slow down).
SCORER_LOCK = Lock(memory_limit="", threads=0)
#: Wall-time bound of reading one submission file (its views run then).
SUBMISSION_SECONDS = 600.0

Source = str | Path | duckdb.DuckDBPyConnection

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}$")

_NUMERIC_TYPES = {
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "HUGEINT",
    "FLOAT",
    "DOUBLE",
}
_TS_TYPES = {"DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS"}
_TSTZ_TYPES = {"TIMESTAMP WITH TIME ZONE"}
# Python datetime bounds: outside them the string form stops sorting chronologically.
_TS_MIN_US = -62135596800 * 1_000_000  # 0001-01-01
_TS_MAX_US = 253402300799 * 1_000_000  # 9999-12-31 23:59:59


class SubmissionFailure(Exception):
    """Internal: the submission side failed; ``reason`` is the verdict's reason (score 0)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """A chunked column as one array; no copy when it already is one chunk (``combine_chunks`` copies)."""
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()


def is_plain_identifier(name: str) -> bool:
    """Whether ``name`` is a bare or dotted SQL identifier the scorer will interpolate into ``SELECT * FROM``."""
    return bool(_IDENT.match(name))


def fetch_frame(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    """``con.execute(sql).fetchdf()`` without duckdb's internal pandas deprecation warning."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*inplace keyword.*")
        return con.execute(sql).fetchdf()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@contextmanager
def open_source(src: Source, *, gold: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a connection for ``src``; files are opened read-only and locked down, then closed.

    A connection passed in is used as is (its owner decides its settings) and left open.
    """
    if isinstance(src, duckdb.DuckDBPyConnection):
        yield src
        return
    path = Path(src)
    if not path.is_file():
        if gold:
            raise GoldFileError(f"gold file {path} does not exist: check the task's gold path")
        raise SubmissionFailure("missing file")
    try:
        con = connect_locked(str(path), SCORER_LOCK, read_only=True)
    except (duckdb.Error, LockedDuckDBError) as exc:
        if gold:
            raise GoldFileError(f"gold file {path} is not a readable DuckDB database: {_first_line(exc)}") from None
        raise SubmissionFailure(f"unreadable file: {_first_line(exc)}") from None
    try:
        with bounded(con, SUBMISSION_SECONDS):
            yield con
    finally:
        con.close()


@dataclass(frozen=True)
class ColumnInfo:
    """One column as the official comparison sees it.

    kind: "num" (int/float/bool values, compared with tolerance), "str", "ts" (naive Timestamp or
    datetime), "tstz" (UTC Timestamp), "null" (every value NA), "exotic" (anything else: compared by the
    literal per-value path). pytype: the Python type name of its non-NA values. na_key: the official sort
    key of its NA representation, or None when it has none.
    """

    index: int
    name: str
    duck_type: str
    kind: str
    pytype: str
    na_key: tuple[bool, str, bool] | None
    n_na: int


@dataclass
class LoadedTable:
    """A table read once: its columns, and their values in canonical Arrow form (v<j> / k<j>)."""

    name: str
    n_rows: int
    columns: list[ColumnInfo]
    data: pa.Table
    #: the official per-column Python values, filled only when a column is exotic
    literal_values: list[list[Any]] | None = None

    @property
    def has_exotic(self) -> bool:
        return self.literal_values is not None


def sort_key(value: Any) -> tuple[bool, str, bool]:
    """The official per-value sort key."""
    return (value is None, str(value), isinstance(value, (int, float)))


def _classify(value: Any, duck_type: str) -> tuple[str, str]:
    base = duck_type.split("(")[0]
    if isinstance(value, bool):
        kind = "num" if base in _NUMERIC_TYPES else "exotic"
        return kind, "bool"
    if isinstance(value, int):
        return ("num" if base in _NUMERIC_TYPES else "exotic"), "int"
    if isinstance(value, float):
        return ("num" if base in _NUMERIC_TYPES or base == "DECIMAL" else "exotic"), "float"
    if isinstance(value, str):
        return ("str" if base in {"VARCHAR", "ENUM"} or duck_type.startswith("ENUM") else "exotic"), "str"
    if isinstance(value, _dt.datetime):
        tz = value.tzinfo
        if tz is None:
            return ("ts" if base in _TS_TYPES else "exotic"), type(value).__name__
        offset = value.utcoffset()
        if base in _TSTZ_TYPES and offset == _dt.timedelta(0) and str(tz) in {"UTC", "Etc/UTC", "utc"}:
            return "tstz", type(value).__name__
        return "exotic", type(value).__name__
    return "exotic", type(value).__name__


def _missing_table(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.CatalogException) and "does not exist" in str(exc)


def _probe_sql(src: str, aliases: list[str]) -> str:
    """One scan of the table: the two-row probe, and the row and non-NULL counts.

    Row one holds any non-NULL value of each column; row two the same value, or NULL where the column
    has NULLs, so the frame gets the dtypes of the real one. The count columns (``__n``, ``__n<j>``)
    are plain BIGINT and are dropped before the probe frame is transposed.
    """
    aggregates = [f"any_value({a}) AS {a}" for a in aliases]
    aggregates.append("count(*) AS __n")
    aggregates += [f"count({a}) AS __n{j}" for j, a in enumerate(aliases)]
    extras = ["__n"] + [f"__n{j}" for j in range(len(aliases))]
    second = [f"CASE WHEN __n{j} < __n THEN NULL ELSE {a} END AS {a}" for j, a in enumerate(aliases)]
    return (
        f"WITH __one AS MATERIALIZED (SELECT {', '.join(aggregates)} FROM {src}) "
        f"SELECT * FROM __one UNION ALL SELECT {', '.join(second + extras)} FROM __one"
    )


def load_table(con: duckdb.DuckDBPyConnection, name: str, *, gold: bool) -> LoadedTable:
    """Read table ``name`` from ``con`` as the official check would; see the module docstring."""
    import pandas as pd

    if not is_plain_identifier(name):
        raise GoldTableError(f"table name {name!r} is not a plain SQL identifier: fix condition_tabs")
    try:
        rel = con.sql(f"SELECT * FROM {name}")
        names = list(rel.columns)
        types = [str(t) for t in rel.types]
    except duckdb.Error as exc:
        if gold:
            raise GoldTableError(f"gold table {name} cannot be read: {_first_line(exc)}") from None
        if _missing_table(exc):
            raise SubmissionFailure(f"missing table {name}") from None
        raise SubmissionFailure(f"unreadable table {name}: {_first_line(exc)}") from None
    width = len(names)
    try:
        head = fetch_frame(con, f"SELECT * FROM {name} LIMIT {SMALL_TABLE_ROWS + 1}")
    except duckdb.Error as exc:
        if gold:
            raise GoldTableError(f"gold table {name} cannot be read: {_first_line(exc)}") from None
        raise SubmissionFailure(f"unreadable table {name}: {_first_line(exc)}") from None
    except Exception as exc:
        if gold:
            raise GoldTableError(f"gold table {name} cannot be converted: {_first_line(exc)}") from None
        raise SubmissionFailure(f"unreadable table {name}: {_first_line(exc)}") from None
    if len(head) <= SMALL_TABLE_ROWS:
        return _load_small(name, names, types, head)
    aliases = [f"c{j}" for j in range(width)]
    src = f"(SELECT * FROM {name}) AS __src({', '.join(aliases)})"
    try:
        probe = fetch_frame(con, _probe_sql(src, aliases))
        n_rows = int(probe["__n"].iloc[0])
        nulls = [n_rows - int(probe[f"__n{j}"].iloc[0]) for j in range(width)]
        probe_values = probe.iloc[:, :width].transpose().values.tolist() if width else []
    except duckdb.Error as exc:
        if gold:
            raise GoldTableError(f"gold table {name} cannot be read: {_first_line(exc)}") from None
        raise SubmissionFailure(f"unreadable table {name}: {_first_line(exc)}") from None
    except Exception as exc:  # pandas conversion failures: the official fetchdf() would fail too
        if gold:
            raise GoldTableError(f"gold table {name} cannot be converted: {_first_line(exc)}") from None
        raise SubmissionFailure(f"unreadable table {name}: {_first_line(exc)}") from None

    columns: list[ColumnInfo] = []
    for j in range(width):
        if n_rows == 0:
            columns.append(ColumnInfo(j, names[j], types[j], "null", "", None, 0))
            continue
        first, second = probe_values[j][0], probe_values[j][1]
        na_key = sort_key(second) if nulls[j] else None
        if nulls[j] == n_rows:
            columns.append(ColumnInfo(j, names[j], types[j], "null", "", na_key, n_rows))
            continue
        kind, pytype = _classify(first, types[j])
        if kind == "num" and pytype == "float" and nulls[j] and na_key != (False, "nan", True):
            kind = "exotic"  # NULL not shown as NaN next to NaN values: leave it to the literal path
        columns.append(ColumnInfo(j, names[j], types[j], kind, pytype, na_key, nulls[j]))

    try:
        data, columns = _canonical(con, src, n_rows, columns)
        literal = None
        if any(c.kind == "exotic" for c in columns):
            frame = fetch_frame(con, f"SELECT * FROM {name}")
            literal = frame.transpose().values.tolist() if n_rows else [[] for _ in range(width)]
    except duckdb.Error as exc:
        if gold:
            raise GoldTableError(f"gold table {name} cannot be read: {_first_line(exc)}") from None
        raise SubmissionFailure(f"unreadable table {name}: {_first_line(exc)}") from None
    except (ValueError, TypeError, OverflowError, pd.errors.OutOfBoundsDatetime) as exc:
        if gold:
            raise GoldTableError(f"gold table {name} cannot be converted: {_first_line(exc)}") from None
        raise SubmissionFailure(f"unreadable table {name}: {_first_line(exc)}") from None
    return LoadedTable(name, n_rows, columns, data, literal)


#: Tables up to this many rows are read with one fetchdf() (the real frame is its own probe).
SMALL_TABLE_ROWS = 256


def _is_na_value(x: Any) -> bool:
    import pandas as pd

    return x is None or x is pd.NA or x is pd.NaT or (isinstance(x, float) and x != x)


def _load_small(name: str, names: list[str], types: list[str], frame: Any) -> LoadedTable:
    """A small table straight from its real frame: exact values, no probe needed."""
    import pandas as pd

    n_rows = len(frame)
    width = len(names)
    values = frame.transpose().values.tolist() if n_rows else [[] for _ in range(width)]
    columns: list[ColumnInfo] = []
    arrays: dict[str, pa.Array] = {}
    for j in range(width):
        col = values[j]
        na = [_is_na_value(x) for x in col]
        n_na = sum(na)
        na_key = next((sort_key(x) for x, m in zip(col, na) if m), None)
        if n_rows == 0 or n_na == n_rows:
            columns.append(ColumnInfo(j, names[j], types[j], "null", "", na_key, n_na))
            continue
        first = next(x for x, m in zip(col, na) if not m)
        kind, pytype = _classify(first, types[j])
        live = [x for x, m in zip(col, na) if not m]
        if kind == "num" and any(type(x) is not type(first) for x in live):
            kind = "exotic"
        mask = np.array(na, dtype=bool)
        try:
            if kind == "num":
                if pytype == "float":
                    arrays[f"v{j}"] = pa.array(
                        [0.0 if m else float(x) for x, m in zip(col, na)], pa.float64(), mask=mask
                    )
                else:
                    ints = [0 if m else int(x) for x, m in zip(col, na)]
                    typ = pa.bool_() if pytype == "bool" else (pa.uint64() if max(ints) >= 1 << 63 else pa.int64())
                    key = [bool(x) for x in ints] if pytype == "bool" else ints
                    arrays[f"k{j}"] = pa.array(key, typ, mask=mask)
                    arrays[f"v{j}"] = pa.array([float(x) for x in ints], pa.float64(), mask=mask)
            elif kind == "str":
                arrays[f"v{j}"] = pa.array([None if m else x for x, m in zip(col, na)], pa.string())
            elif kind in {"ts", "tstz"}:
                us = [0 if m else pd.Timestamp(x).value // 1000 for x, m in zip(col, na)]
                live_us = [u for u, m in zip(us, na) if not m]
                if min(live_us) < _TS_MIN_US or max(live_us) > _TS_MAX_US:
                    kind = "exotic"
                else:
                    arrays[f"v{j}"] = pa.array(us, pa.int64(), mask=mask)
        except (OverflowError, ValueError, TypeError):
            kind = "exotic"
        columns.append(ColumnInfo(j, names[j], types[j], kind, pytype, na_key, n_na))
    data = pa.table(arrays) if arrays else pa.table({"__n": pa.nulls(n_rows, pa.int8())})
    exotic = any(c.kind == "exotic" for c in columns)
    return LoadedTable(name, n_rows, columns, data, values if exotic else None)


#: Numeric types whose pandas values are exactly their Arrow values (ints, bools, IEEE floats): they are
#: read through Arrow. DECIMAL and HUGEINT become floats inside DuckDB's pandas conversion, so those are
#: read with fetchdf() to get that conversion's own rounding.
_ARROW_NUMERIC = {
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "FLOAT",
    "DOUBLE",
}


def _numeric_from_arrow(arr: pa.Array, pytype: str) -> tuple[pa.Array, pa.Array | None]:
    """(v, k) of a plain numeric column as pandas would give its values, from its Arrow array.

    v: float64 with NA (NULL, and NaN for floats) as null. pytype float: the values as float64 (an int
    column in an all-numeric frame is upcast by the same IEEE round-to-nearest conversion numpy uses). int:
    k holds the exact ints, as int64, or uint64 for unsigned types (pandas keeps uintN). bool: k holds
    the bools. No copy where the types already agree.
    """
    if pytype == "float":
        v = arr.cast(pa.float64(), safe=False)
        if v.null_count < len(v) and pc.any(pc.is_nan(v)).as_py():
            v = pc.if_else(pc.is_nan(v), pa.scalar(None, pa.float64()), v)
        return v, None
    if pytype == "int":
        k = arr.cast(pa.uint64() if pa.types.is_unsigned_integer(arr.type) else pa.int64())
    else:
        k = arr.cast(pa.bool_())
    return k.cast(pa.float64(), safe=False), k


def _numeric_from_pandas(series: Any, pytype: str) -> tuple[pa.Array, pa.Array | None]:
    """(v, k) as in ``_numeric_from_arrow``, from a column's pandas Series (DECIMAL, HUGEINT, ...)."""
    mask = series.isna().to_numpy()
    if pytype == "float":
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        return pa.array(values, mask=mask | np.isnan(values)), None
    if pytype == "int":
        unsigned = str(series.dtype).lower().startswith("uint")
        ints = series.to_numpy(dtype=np.uint64 if unsigned else np.int64, na_value=0)
        return pa.array(ints.astype(np.float64), mask=mask), pa.array(ints, mask=mask)
    bools = series.to_numpy(dtype=bool, na_value=False)
    return pa.array(bools.astype(np.float64), mask=mask), pa.array(bools, mask=mask)


def _canonical(
    con: duckdb.DuckDBPyConnection, src: str, n_rows: int, columns: list[ColumnInfo]
) -> tuple[pa.Table, list[ColumnInfo]]:
    """Values in canonical Arrow columns: num -> v<j> float64 (+ k<j> int/bool key source), str -> v<j>
    string, ts/tstz -> v<j> int64 microseconds. NA (NULL, and NaN in floats) is an Arrow null.

    One Arrow query reads text, timestamps and plain numbers; one fetchdf() the other numbers."""
    arrays: dict[str, pa.Array] = {}
    out = list(columns)
    num = [c for c in columns if c.kind == "num"]
    via_pandas = [c for c in num if c.duck_type.split("(")[0] not in _ARROW_NUMERIC]
    arrow_cols = [c for c in columns if c.kind in {"str", "ts", "tstz"} or (c.kind == "num" and c not in via_pandas)]
    numeric: dict[int, tuple[pa.Array, pa.Array | None]] = {}
    if via_pandas:
        frame = fetch_frame(con, f"SELECT {', '.join(f'c{c.index}' for c in via_pandas)} FROM {src}")
        for c in via_pandas:
            numeric[c.index] = _numeric_from_pandas(frame[f"c{c.index}"], c.pytype)
    if arrow_cols:
        exprs = []
        for c in arrow_cols:
            if c.kind == "num":
                exprs.append(f"c{c.index} AS v{c.index}")
            elif c.kind == "str":
                exprs.append(f"CAST(c{c.index} AS VARCHAR) AS v{c.index}")
            elif c.kind == "ts":
                exprs.append(f"epoch_us(CAST(c{c.index} AS TIMESTAMP)) AS v{c.index}")
            else:
                exprs.append(f"epoch_us(c{c.index}) AS v{c.index}")
        table = con.execute(f"SELECT {', '.join(exprs)} FROM {src}").to_arrow_table()
        for c in arrow_cols:
            arr = one_array(table.column(f"v{c.index}"))
            if c.kind == "num":
                numeric[c.index] = _numeric_from_arrow(arr, c.pytype)
                continue
            if c.kind in {"ts", "tstz"} and len(arr) - arr.null_count:
                lo, hi = pc.min_max(arr).values()
                if lo.as_py() < _TS_MIN_US or hi.as_py() > _TS_MAX_US:
                    out[c.index] = ColumnInfo(c.index, c.name, c.duck_type, "exotic", c.pytype, c.na_key, c.n_na)
            arrays[f"v{c.index}"] = arr
    for c in num:
        v, k = numeric[c.index]
        arrays[f"v{c.index}"] = v
        if k is not None:
            arrays[f"k{c.index}"] = k
        n_na = v.null_count
        if n_na != c.n_na:
            na_key = c.na_key if c.na_key is not None else (False, "nan", True)
            c = ColumnInfo(c.index, c.name, c.duck_type, c.kind, c.pytype, na_key, n_na)
        if n_na == n_rows:
            c = ColumnInfo(c.index, c.name, c.duck_type, "null", c.pytype, c.na_key, n_na)
        out[c.index] = c
    if not arrays:
        return pa.table({"__n": pa.nulls(n_rows, pa.int8())}), out
    return pa.table(arrays), out

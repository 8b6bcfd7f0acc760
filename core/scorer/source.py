"""Opening a gold or submitted DuckDB safely and loading one table as the official check would see it.

Why this module exists: the official check runs ``SELECT * FROM <name>`` (name unquoted, so DuckDB's
case-insensitive resolution in schema ``main``, views accepted), turns the result into a pandas frame
and reads each column as Python values from ``frame.transpose().values.tolist()``. Which Python type a
value ends up as (int, float, bool, str, Timestamp, datetime; NaN, None, pd.NA or NaT for NULL) depends
on the dtypes of the whole frame, and it changes the string sort key the comparison uses. Rather than
re-deriving pandas' rules by hand, we ask pandas itself: a two-row *probe* frame with the same dtypes as
the real one (one non-NULL value per column, and a NULL where the column has NULLs) goes through the real
``transpose().values.tolist()``; the types it yields classify each column. The bulk data is then read
columnar (Arrow for text and timestamps, pandas numeric arrays for numbers, i.e. pandas' own values),
never one Python object per value.

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

from core.locked_duckdb import Lock, LockedDuckDBError, bounded, connect_locked
from core.scorer.errors import GoldFileError, GoldTableError

#: The lock of every connection the scorer opens itself: no file access, no extensions, locked; DuckDB's
#: own memory and thread defaults (scoring is not the place to slow down).
SCORER_LOCK = Lock(memory_limit="", threads=0)
#: Wall-time bound of reading one submission file (its views run then).
SUBMISSION_SECONDS = 600.0

Source = str | Path | duckdb.DuckDBPyConnection

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}$")

_NUMERIC_TYPES = {
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "HUGEINT", "FLOAT", "DOUBLE",
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
        counts = con.execute(
            f"SELECT count(*), {', '.join(f'count({a})' for a in aliases)} FROM {src}"
        ).fetchone()
        assert counts is not None
        n_rows = int(counts[0])
        nulls = [n_rows - int(c) for c in counts[1:]]
        if n_rows == 0:
            probe = fetch_frame(con, f"SELECT * FROM {src} LIMIT 0")
        else:
            firsts = ", ".join(f"any_value({a}) AS {a}" for a in aliases)
            second = ", ".join(
                f"CASE WHEN FALSE THEN {a} END AS {a}" if nulls[j] else a for j, a in enumerate(aliases)
            )
            probe = fetch_frame(
                con,
                f"WITH __one AS (SELECT {firsts} FROM {src}) "
                f"SELECT * FROM __one UNION ALL SELECT {second} FROM __one",
            )
        probe_values = probe.transpose().values.tolist() if width else []
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
                    arrays[f"v{j}"] = pa.array([0.0 if m else float(x) for x, m in zip(col, na)], pa.float64(), mask=mask)
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


def _canonical(
    con: duckdb.DuckDBPyConnection, src: str, n_rows: int, columns: list[ColumnInfo]
) -> tuple[pa.Table, list[ColumnInfo]]:
    """Values in canonical Arrow columns: num -> v<j> float64 (+ k<j> int/bool key source), str -> v<j>
    string, ts/tstz -> v<j> int64 microseconds. NA (NULL, and NaN in floats) is an Arrow null."""
    arrays: dict[str, pa.Array] = {}
    out = list(columns)
    num = [c for c in columns if c.kind == "num"]
    arrow_cols = [c for c in columns if c.kind in {"str", "ts", "tstz"}]
    if num:
        frame = fetch_frame(con, f"SELECT {', '.join(f'c{c.index}' for c in num)} FROM {src}")
        for c in num:
            series = frame[f"c{c.index}"]
            mask = series.isna().to_numpy()
            if c.pytype == "float":
                values = series.to_numpy(dtype=np.float64, na_value=np.nan)
                mask = mask | np.isnan(values)
                arrays[f"v{c.index}"] = pa.array(values, mask=mask)
            elif c.pytype == "int":
                unsigned = str(series.dtype).lower().startswith("uint")
                dtype = np.uint64 if unsigned else np.int64
                ints = series.to_numpy(dtype=dtype, na_value=0)
                arrays[f"v{c.index}"] = pa.array(ints.astype(np.float64), mask=mask)
                arrays[f"k{c.index}"] = pa.array(ints, mask=mask)
            else:  # bool
                bools = series.to_numpy(dtype=bool, na_value=False)
                arrays[f"v{c.index}"] = pa.array(bools.astype(np.float64), mask=mask)
                arrays[f"k{c.index}"] = pa.array(bools, mask=mask)
            n_na = int(mask.sum())
            if n_na != c.n_na:
                na_key = c.na_key if c.na_key is not None else (False, "nan", True)
                c = ColumnInfo(c.index, c.name, c.duck_type, c.kind, c.pytype, na_key, n_na)
            if n_na == n_rows:
                c = ColumnInfo(c.index, c.name, c.duck_type, "null", c.pytype, c.na_key, n_na)
            out[c.index] = c
    if arrow_cols:
        exprs = []
        for c in arrow_cols:
            if c.kind == "str":
                exprs.append(f"CAST(c{c.index} AS VARCHAR) AS v{c.index}")
            elif c.kind == "ts":
                exprs.append(f"epoch_us(CAST(c{c.index} AS TIMESTAMP)) AS v{c.index}")
            else:
                exprs.append(f"epoch_us(c{c.index}) AS v{c.index}")
        table = con.execute(f"SELECT {', '.join(exprs)} FROM {src}").to_arrow_table()
        for c in arrow_cols:
            arr = table.column(f"v{c.index}").combine_chunks()
            if c.kind in {"ts", "tstz"} and len(arr) - arr.null_count:
                import pyarrow.compute as pc

                lo, hi = pc.min_max(arr).values()
                if lo.as_py() < _TS_MIN_US or hi.as_py() > _TS_MAX_US:
                    out[c.index] = ColumnInfo(c.index, c.name, c.duck_type, "exotic", c.pytype, c.na_key, c.n_na)
            arrays[f"v{c.index}"] = arr
    if not arrays:
        return pa.table({"__n": pa.nulls(n_rows, pa.int8())}), out
    return pa.table(arrays), out

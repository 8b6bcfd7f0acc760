"""The vectorized per-column comparison: sort each column by the official string key, compare aligned.

Why DuckDB for sorting and numpy for comparing (measured on this machine, 1,000,000 doubles):
- The sort key is Python's ``str(x)``. DuckDB's ``CAST(DOUBLE AS VARCHAR)`` produced exactly Python's
  ``repr`` on 1,000,000 random doubles across magnitudes 1e-12..1e25 plus edge values (1e16, 1e-05,
  -0.0, inf, 5e-324); pyarrow's cast did not (326,513 mismatches: '3.62e+10' vs '36240254526.79').
- Cast + sort of 1M doubles by that key: DuckDB 0.20 s; numpy ``astype(str)`` 0.39 s + ``argsort``
  0.21-0.29 s; Python ``repr`` loop 0.33 s + ``sorted`` 0.34 s. DuckDB also sorts in parallel.
- Comparing two aligned float64 arrays with the isclose rule is ~5 ms in numpy, and numpy keeps IEEE
  semantics (inf - inf = nan) where DuckDB raises on double overflow; so comparison stays in numpy.
Cheap necessary conditions (NA counts, finite min/max/sum bounds under the tolerance, and a
hash-sum fingerprint for exact kinds) reject almost every non-matching column pair before any sort.
A pair that survives is first tested for an identical multiset of sort keys (same kind and Python type,
same NA representation, equal value-sorted arrays: float bit patterns, ints, timestamps, or shared
dictionary codes for strings); then both key-sorted sequences are identical and the pair passes with a
numeric sort only. Only pairs that differ yet might match within the tolerance (or by type mixes such as
3 vs 3.0) pay the string-key sort. Measured at 1,000,000 rows x 12 mixed columns: 19 s with a string
sort per column, 2.4 s with the shortcut (tests/benchmarks/bench_scorer.py).

Sort keys per kind (official key: (value is None, str(value), isinstance(value, (int, float)))):
- num: non-NA -> (False, repr/str of the Python int, float or bool, True); NA -> its representation's key.
- str: non-NA -> (False, the string, False); NA -> its key ('nan' sorts among the strings).
- ts/tstz: every NA key ('None' first-flagged, 'NaT', 'nan', '<NA>') sorts after any 'YYYY-...' string,
  and for years 1..9999 (enforced when loading) the string order of Timestamps/datetimes (naive, or all
  in UTC) is chronological; so microseconds with NULLS LAST is the same order.
Equal keys imply equal values within one column, so the unstable sort cannot change a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.scorer.source import ColumnInfo, LoadedTable

ABS_TOL = 0.01
REL_TOL = 1e-9


@dataclass(frozen=True)
class Vec:
    """One column's values in comparison order (sorted or original)."""

    kind: str
    na: np.ndarray
    values: Any  # float64 / int64 numpy array, or a pyarrow string array


@dataclass(frozen=True)
class NumStats:
    n_na: int
    n_posinf: int
    n_neginf: int
    fmin: float
    fmax: float
    fsum: float
    abssum: float
    maxabs: float


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _order_by(col: ColumnInfo) -> str:
    v = f"v{col.index}"
    if col.kind in {"ts", "tstz"}:
        return f"{v} NULLS LAST"
    none, na_str, na_num = col.na_key if col.na_key is not None else (False, "", False)
    if col.kind == "num":
        if col.pytype == "float":
            key = f"CAST({v} AS VARCHAR)"
        elif col.pytype == "int":
            key = f"CAST(k{col.index} AS VARCHAR)"
        else:
            key = f"CASE WHEN k{col.index} THEN 'True' ELSE 'False' END"
        live_num = 1
    else:
        key = v
        live_num = 0
    return (
        f"CASE WHEN {v} IS NULL THEN {int(none)} ELSE 0 END, "
        f"CASE WHEN {v} IS NULL THEN {_sql_str(na_str)} ELSE {key} END, "
        f"CASE WHEN {v} IS NULL THEN {int(na_num)} ELSE {live_num} END"
    )


#: Tables with at most this many rows are sorted in-process (keys from Python's own str()); larger
#: ones in DuckDB (keys from CAST AS VARCHAR, verified equal to repr). Tests lower it to 0 to cover both.
IN_PROCESS_SORT_MAX_ROWS = 2048


class Scratch:
    """A lazily opened, locked-down in-memory DuckDB shared by both sides of one grading."""

    def __init__(self) -> None:
        self._con: duckdb.DuckDBPyConnection | None = None

    def get(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            from core.locked_duckdb import connect_locked
            from core.scorer.source import SCORER_LOCK

            self._con = connect_locked(":memory:", SCORER_LOCK)
        return self._con

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def _py_key(col: ColumnInfo, value: Any) -> tuple[bool, str, bool]:
    if col.pytype == "bool":
        return (False, str(bool(value)), True)
    if col.pytype == "int":
        return (False, str(int(value)), True)
    if col.kind == "num":
        return (False, repr(float(value)), True)
    return (False, value, False)


def _in_process_order(col: ColumnInfo, data: pa.Table) -> np.ndarray:
    """Row order by the official key, computed with Python's str() (small tables)."""
    v = data.column(f"v{col.index}").combine_chunks()
    na = v.is_null().to_numpy(zero_copy_only=False)
    if col.kind in {"ts", "tstz"}:
        vals = v.fill_null(0).to_numpy(zero_copy_only=False)
        return np.lexsort((vals, na))
    src = data.column(f"k{col.index}") if col.pytype in {"int", "bool"} else v
    values = src.to_pylist()
    na_key = col.na_key if col.na_key is not None else (False, "nan", True)
    keys = [na_key if na[i] else _py_key(col, x) for i, x in enumerate(values)]
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


class Side:
    """One loaded table registered in a scratch DuckDB, with its columns' vectors built on demand."""

    def __init__(self, scratch: Scratch, alias: str, table: LoadedTable) -> None:
        self._scratch = scratch
        self._registered = False
        self.alias = alias
        self.table = table
        self.in_process = table.n_rows <= IN_PROCESS_SORT_MAX_ROWS
        self._vecs: dict[tuple[int, bool], Vec] = {}
        self._num: dict[int, NumStats] = {}
        self._fingerprints: dict[int, int] | None = None
        self._live: dict[int, np.ndarray] = {}

    @property
    def scratch(self) -> duckdb.DuckDBPyConnection:
        con = self._scratch.get()
        if not self._registered:
            con.register(self.alias, self.table.data)
            self._registered = True
        return con

    @property
    def n(self) -> int:
        return self.table.n_rows

    def column(self, j: int) -> ColumnInfo:
        return self.table.columns[j]

    def vec(self, j: int, ordered: bool) -> Vec:
        """Column j's values, sorted by the official key when ``ordered`` (else in row order)."""
        key = (j, ordered)
        if key in self._vecs:
            return self._vecs[key]
        col = self.column(j)
        if col.kind == "null":
            vec = Vec("null", np.ones(self.n, dtype=bool), None)
        elif self.in_process or col.kind in {"ts", "tstz"}:
            arr = self.table.data.column(f"v{j}").combine_chunks()
            if ordered:
                arr = arr.take(pa.array(_in_process_order(col, self.table.data)))
            vec = _vec_from(col, arr)
        else:
            order = f" ORDER BY {_order_by(col)}" if ordered else ""
            arr = self.scratch.execute(f"SELECT v{j} FROM {self.alias}{order}").to_arrow_table().column(0)
            arr = arr.combine_chunks()
            na = arr.is_null().to_numpy(zero_copy_only=False)
            if col.kind == "num":
                values = arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            elif col.kind == "str":
                values = arr
            else:
                values = arr.fill_null(0).to_numpy(zero_copy_only=False)
            vec = Vec(col.kind, na, values)
        self._vecs[key] = vec
        return vec

    def live_sorted(self, j: int) -> np.ndarray:
        """The non-NA values' exact identities, sorted by value (for the equal-multiset shortcut).

        Floats are compared as bit patterns so -0.0 and 0.0 (different keys) never count as equal.
        """
        if j not in self._live:
            col = self.column(j)
            src = self.table.data.column(f"k{j}" if col.pytype in {"int", "bool"} and col.kind == "num" else f"v{j}")
            arr = src.combine_chunks().drop_null().to_numpy(zero_copy_only=False)
            if col.kind == "num" and col.pytype == "float":
                arr = np.sort(arr.astype(np.float64, copy=False)).view(np.int64)
            else:
                arr = np.sort(arr)
            self._live[j] = arr
        return self._live[j]

    def num_stats(self, j: int) -> NumStats:
        if j not in self._num:
            arr = self.table.data.column(f"v{j}")
            vals = arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            live = ~np.isnan(vals)
            live_vals = vals[live]
            finite = live_vals[np.isfinite(live_vals)]
            with np.errstate(over="ignore", invalid="ignore"):
                self._num[j] = NumStats(
                    n_na=int((~live).sum()),
                    n_posinf=int((live_vals == np.inf).sum()),
                    n_neginf=int((live_vals == -np.inf).sum()),
                    fmin=float(finite.min()) if finite.size else 0.0,
                    fmax=float(finite.max()) if finite.size else 0.0,
                    fsum=float(finite.sum()) if finite.size else 0.0,
                    abssum=float(np.abs(finite).sum()) if finite.size else 0.0,
                    maxabs=float(np.abs(finite).max()) if finite.size else 0.0,
                )
        return self._num[j]

    def fingerprint(self, j: int) -> int:
        """Sum of DuckDB hashes of the non-NA values (exact kinds): equal multisets, equal sums."""
        if self._fingerprints is None:
            exact = [c.index for c in self.table.columns if c.kind in {"str", "ts", "tstz"}]
            self._fingerprints = {}
            if exact and self.in_process:
                for i in exact:
                    vals = self.table.data.column(f"v{i}").to_pylist()
                    self._fingerprints[i] = sum(hash(x) for x in vals if x is not None) % (1 << 64)
            elif exact:
                row = self.scratch.execute(
                    "SELECT "
                    + ", ".join(f"coalesce(sum(hash(v{i})) FILTER (WHERE v{i} IS NOT NULL), 0)" for i in exact)
                    + f" FROM {self.alias}"
                ).fetchone()
                assert row is not None
                self._fingerprints = {i: int(x) for i, x in zip(exact, row)}
        return self._fingerprints[j]


def maybe_match(g: Side, gj: int, p: Side, pj: int) -> bool | None:
    """Cheap verdict on a column pair: False when it cannot match, True when it surely does, None if unsure.

    Assumes equal row counts. Every False here is implied by a failed official comparison.
    """
    gc, pcol = g.column(gj), p.column(pj)
    n = g.n
    if n == 0:
        return True
    g_na = gc.n_na if gc.kind != "num" else g.num_stats(gj).n_na
    p_na = pcol.n_na if pcol.kind != "num" else p.num_stats(pj).n_na
    if g_na != p_na:
        return False
    if g_na == n:
        return True  # every pair is NA / NA
    if gc.kind != pcol.kind:
        return False
    if gc.kind == "num":
        a, b = g.num_stats(gj), p.num_stats(pj)
        if a.n_posinf != b.n_posinf or a.n_neginf != b.n_neginf:
            return False
        bound = max(REL_TOL * max(a.maxabs, b.maxabs), ABS_TOL) * (1 + 1e-6) + 1e-300
        if n - g_na - a.n_posinf - a.n_neginf > 0:
            if abs(a.fmin - b.fmin) > bound or abs(a.fmax - b.fmax) > bound:
                return False
            total = a.fsum - b.fsum
            if np.isfinite(total):
                slack = (n - g_na) * bound + 1e-9 * (a.abssum + b.abssum)
                if abs(total) > slack:
                    return False
        return None
    if g.fingerprint(gj) != p.fingerprint(pj):
        return False
    return None


def vectors_match(gv: Vec, pv: Vec) -> bool:
    """The official pairwise walk over two aligned vectors of equal length, vectorized."""
    mismatch = mismatches(gv, pv)
    return not bool(mismatch.any())


def mismatches(gv: Vec, pv: Vec) -> np.ndarray:
    """Boolean mask of aligned positions where the official pairwise test fails."""
    both_na = gv.na & pv.na
    live = ~gv.na & ~pv.na
    bad = ~(both_na | live)  # NA against a value never matches
    if not live.any():
        return bad
    if gv.kind != pv.kind:
        return bad | live
    if gv.kind == "num":
        a = gv.values
        b = pv.values
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - b)
            close = (a == b) | (
                np.isfinite(a)
                & np.isfinite(b)
                & ((diff <= np.abs(REL_TOL * b)) | (diff <= np.abs(REL_TOL * a)) | (diff <= ABS_TOL))
            )
        return bad | (live & ~close)
    if gv.kind == "str":
        eq = pc.equal(gv.values, pv.values).fill_null(False).to_numpy(zero_copy_only=False)
        return bad | (live & ~eq)
    return bad | (live & (gv.values != pv.values))


def same_key_multiset(g: Side, gj: int, p: Side, pj: int) -> bool:
    """True when both columns hold exactly the same multiset of official sort keys (NA included).

    Then both sorted sequences are identical, so the official test passes without sorting by string.
    Requires: same kind and Python type (3 and 3.0 have different keys), same NA representation.
    """
    gc, pcol = g.column(gj), p.column(pj)
    if gc.kind != pcol.kind or gc.kind not in {"num", "str", "ts", "tstz"}:
        return False
    if gc.kind == "num" and gc.pytype != pcol.pytype:
        return False
    if (gc.n_na or pcol.n_na) and gc.na_key != pcol.na_key:
        return False
    if gc.kind == "str":
        a = g.table.data.column(f"v{gj}").combine_chunks().drop_null()
        b = p.table.data.column(f"v{pj}").combine_chunks().drop_null()
        if len(a) != len(b):
            return False
        codes = pc.dictionary_encode(pa.concat_arrays([a, b])).indices.to_numpy(zero_copy_only=False)
        return bool(np.array_equal(np.sort(codes[: len(a)]), np.sort(codes[len(a):])))
    return bool(np.array_equal(g.live_sorted(gj), p.live_sorted(pj)))


def table_pair_match(g: Side, gj: int, p: Side, pj: int, ordered: bool) -> bool:
    """Does submitted column pj satisfy gold column gj (official rule)? Row counts must already agree."""
    quick = maybe_match(g, gj, p, pj)
    if quick is not None:
        return quick
    if ordered and same_key_multiset(g, gj, p, pj):
        return True
    return vectors_match(g.vec(gj, ordered), p.vec(pj, ordered))


def render(vec: Vec, col: ColumnInfo, i: int) -> str:
    """A human-readable form of one value of a vector (for explanations)."""
    if vec.na[i]:
        return col.na_key[1] if col.na_key else "NULL"
    if vec.kind == "num":
        value = float(vec.values[i])
        if col.pytype == "int" and value.is_integer():
            return str(int(value))
        if col.pytype == "bool":
            return str(bool(value))
        return repr(value)
    if vec.kind == "str":
        return repr(vec.values[i].as_py())
    if vec.kind in {"ts", "tstz"}:
        import pandas as pd

        ts = pd.Timestamp(int(vec.values[i]), unit="us", tz="UTC" if vec.kind == "tstz" else None)
        return str(ts)
    return "?"


def strict_rows_match(g: Side, gcols: list[int], p: Side, pcols: list[int]) -> bool:
    """Row-aligned multiset equality of gold columns ``gcols`` vs submitted ``pcols`` (same order).

    Both sides are sorted by the same column sequence (exact kinds first, then numbers, NULLS LAST)
    and compared row by row with the official value test.
    """
    pairs = list(zip(gcols, pcols))
    exact = [(a, b) for a, b in pairs if g.column(a).kind in {"str", "ts", "tstz"}]
    rest = [(a, b) for a, b in pairs if g.column(a).kind not in {"str", "ts", "tstz"}]
    order = exact + rest
    sortable = [(a, b) for a, b in order if g.column(a).kind != "null" and p.column(b).kind != "null"]
    if not sortable:
        return True
    g_tab = _sorted_rows(g.table.data, [a for a, _ in sortable])
    p_tab = _sorted_rows(p.table.data, [b for _, b in sortable])
    for i, (a, b) in enumerate(sortable):
        gv = _vec_from(g.column(a), g_tab.column(i).combine_chunks())
        pv = _vec_from(p.column(b), p_tab.column(i).combine_chunks())
        if not vectors_match(gv, pv):
            return False
    return True


def _sorted_rows(data: pa.Table, cols: list[int]) -> pa.Table:
    names = [f"s{i}" for i in range(len(cols))]
    part = pa.table({n: data.column(f"v{j}") for n, j in zip(names, cols)})
    order = pc.sort_indices(part, sort_keys=[(n, "ascending", "at_end") for n in names])
    return part.take(order)


def _vec_from(col: ColumnInfo, arr: pa.Array) -> Vec:
    na = arr.is_null().to_numpy(zero_copy_only=False)
    if col.kind == "num":
        return Vec("num", na, arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False))
    if col.kind == "str":
        return Vec("str", na, arr)
    return Vec(col.kind, na, arr.fill_null(0).to_numpy(zero_copy_only=False))

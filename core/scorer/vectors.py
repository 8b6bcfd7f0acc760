"""The per-column comparison: exact multisets where they decide, else the official string-key sort and a
vectorized aligned walk.

Why DuckDB for sorting and numpy for comparing (measured on this machine, 1,000,000 doubles):
- The sort key is Python's ``str(x)``. DuckDB's ``CAST(DOUBLE AS VARCHAR)`` produced exactly Python's
  ``repr`` on 1,000,000 random doubles across magnitudes 1e-12..1e25 plus edge values (1e16, 1e-05,
  -0.0, inf, 5e-324); pyarrow's cast did not (326,513 mismatches: '3.62e+10' vs '36240254526.79').
- Cast + sort of 1M doubles by that key: DuckDB 0.20 s; numpy ``astype(str)`` 0.39 s + ``argsort``
  0.21-0.29 s; Python ``repr`` loop 0.33 s + ``sorted`` 0.34 s. DuckDB also sorts in parallel.
- Comparing two aligned float64 arrays with the isclose rule is ~5 ms in numpy, and numpy keeps IEEE
  semantics (inf - inf = nan) where DuckDB raises on double overflow; so comparison stays in numpy.
How a column pair is decided, cheapest first (``TablePair.match``):
1. Necessary conditions (``maybe_match``): equal NA counts, same kind, and for numbers equal infinity
   counts and finite min/max/sum within the tolerance's bound. They reject almost every non-matching pair.
2. Order-ignoring pairs are then decided from exact value multisets where that is provably the official
   verdict (``TablePair.multiset_verdict``; forms in ``multiset``): the same multiset of sort keys passes
   (both key-sorted sequences are identical), and for text and timestamps a different multiset fails
   (their pairs pass only when equal). A multiset form costs O(n) for ints, bools, timestamps (counts per
   value after removing the minimum and the common step) and text (value counts), a numeric sort for
   floats and wide ints. Once one distinct-valued pair is equal, the row pairing it defines is kept:
   later pairs that are identical under it pass without any form (the pairing is the proof), and so does
   the strict check (``TablePair.rows_agree``). Nothing here is probabilistic: no hash decides a verdict.
3. Only pairs these cannot decide (numbers that differ yet might match within the tolerance, type mixes
   such as 3 vs 3.0, differing NA representations, row-order-sensitive tables) pay the official
   string-key sort and the vectorized pairwise walk (``vectors_match``).
Measured at 100,000 and 1,000,000 rows x 12 mixed columns: see tests/benchmarks/bench_scorer.py and the
numbers in docs/DESIGN.md.

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
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dbt_harvest.core.scorer.multiset import (
    Form,
    Identity,
    TextForm,
    agree_on_sample,
    agree_under,
    float_form,
    identity,
    int_form,
    pair_rows,
    same_multiset_under,
    text_form,
)
from dbt_harvest.core.scorer.source import ColumnInfo, LoadedTable, one_array

ABS_TOL = 0.01
REL_TOL = 1e-9


@dataclass(frozen=True)
class Vec:
    """One column's values in comparison order (sorted or original)."""

    kind: str
    na: npt.NDArray[np.bool_]
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
            from dbt_harvest.core.locked_duckdb import connect_locked
            from dbt_harvest.core.scorer.source import SCORER_LOCK

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
    v = one_array(data.column(f"v{col.index}"))
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
        self._forms: dict[int, Form | TextForm] = {}
        self._identities: dict[int, Identity] = {}

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
            arr = one_array(self.table.data.column(f"v{j}"))
            if ordered:
                arr = arr.take(pa.array(_in_process_order(col, self.table.data)))
            vec = _vec_from(col, arr)
        else:
            order = f" ORDER BY {_order_by(col)}" if ordered else ""
            arr = self.scratch.execute(f"SELECT v{j} FROM {self.alias}{order}").to_arrow_table().column(0)
            arr = one_array(arr)
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

    def form(self, j: int) -> Form | TextForm:
        """The exact multiset form of column j's non-NA values (see ``multiset``), built once.

        The values are the sort keys' sources: ``k<j>`` for ints and bools, ``v<j>`` otherwise (floats
        compared bit-exactly, so -0.0 and 0.0, which have different keys, never count as equal).
        """
        if j not in self._forms:
            col = self.column(j)
            name = f"k{j}" if col.kind == "num" and col.pytype in {"int", "bool"} else f"v{j}"
            arr = one_array(self.table.data.column(name)).drop_null()
            if col.kind == "str":
                self._forms[j] = text_form(arr)
            elif col.kind == "num" and col.pytype == "float":
                self._forms[j] = float_form(arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False))
            else:
                self._forms[j] = int_form(arr.to_numpy(zero_copy_only=False))
        return self._forms[j]

    def has_form(self, j: int) -> bool:
        """Whether column j's multiset form is already built."""
        return j in self._forms

    def identity(self, j: int) -> Identity:
        """Column j's exact value identities in row order (see ``multiset.Identity``), built once."""
        if j not in self._identities:
            col = self.column(j)
            name = f"k{j}" if col.kind == "num" and col.pytype in {"int", "bool"} else f"v{j}"
            arr = one_array(self.table.data.column(name))
            self._identities[j] = identity(arr, float_bits=col.kind == "num" and col.pytype == "float")
        return self._identities[j]

    def num_stats(self, j: int) -> NumStats:
        """NA and infinity counts and finite bounds of numeric column j (for cheap rejections)."""
        if j not in self._num:
            arr = one_array(self.table.data.column(f"v{j}"))
            live = arr.drop_null().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            nan = np.isnan(live)
            if nan.any():  # NaN is stored as null when loading; kept here so the stats never depend on it
                live = live[~nan]
            finite_mask = np.isfinite(live)
            all_finite = bool(finite_mask.all())
            finite = live if all_finite else live[finite_mask]
            n_posinf = 0 if all_finite else int(np.count_nonzero(live == np.inf))
            n_neginf = 0 if all_finite else int(np.count_nonzero(live == -np.inf))
            with np.errstate(over="ignore", invalid="ignore"):
                if finite.size:
                    magnitude = np.abs(finite)
                    bounds = (
                        float(finite.min()),
                        float(finite.max()),
                        float(finite.sum()),
                        float(magnitude.sum()),
                        float(magnitude.max()),
                    )
                else:
                    bounds = (0.0, 0.0, 0.0, 0.0, 0.0)
            self._num[j] = NumStats(len(arr) - live.size, n_posinf, n_neginf, *bounds)
        return self._num[j]


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
    return None


def vectors_match(gv: Vec, pv: Vec) -> bool:
    """The official pairwise walk over two aligned vectors of equal length, vectorized."""
    mismatch = mismatches(gv, pv)
    return not bool(mismatch.any())


def mismatches(gv: Vec, pv: Vec) -> npt.NDArray[np.bool_]:
    """Boolean mask of aligned positions where the official pairwise test fails."""
    both_na = gv.na & pv.na
    live = ~gv.na & ~pv.na
    bad = ~(both_na | live)  # NA against a value never matches
    if not live.any():
        return bad
    if gv.kind != pv.kind:
        return bad | live
    if gv.kind == "num":
        a: npt.NDArray[np.float64] = gv.values
        b: npt.NDArray[np.float64] = pv.values
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - b)
            close: npt.NDArray[np.bool_] = (a == b) | (
                np.isfinite(a)
                & np.isfinite(b)
                & ((diff <= np.abs(REL_TOL * b)) | (diff <= np.abs(REL_TOL * a)) | (diff <= ABS_TOL))
            )
        return bad | (live & ~close)
    if gv.kind == "str":
        # pyarrow is untyped here: an equality mask of two string arrays, its nulls filled, as numpy booleans
        eq: npt.NDArray[np.bool_] = pc.equal(gv.values, pv.values).fill_null(False).to_numpy(zero_copy_only=False)
        return bad | (live & ~eq)
    differ: npt.NDArray[np.bool_] = gv.values != pv.values  # numpy arrays of one kind: elementwise
    return bad | (live & differ)


#: Kinds whose values pass the official pairwise test only when equal (no tolerance, no type mixes).
EXACT_KINDS = frozenset({"str", "ts", "tstz"})


def same_keys_possible(gc: ColumnInfo, pcol: ColumnInfo) -> bool:
    """Can equal value multisets mean equal multisets of official sort keys (NA keys included)?

    Requires the same kind and, for numbers, the same Python type (3 and 3.0 have different keys), and
    the same NA representation when there are NAs.
    """
    if gc.kind != pcol.kind or gc.kind not in {"num", "str", "ts", "tstz"}:
        return False
    if gc.kind == "num" and gc.pytype != pcol.pytype:
        return False
    return not ((gc.n_na or pcol.n_na) and gc.na_key != pcol.na_key)


#: How many distinct-valued column pairs a table pair tries to learn a row pairing from.
MAX_PAIRING_TRIES = 2


class TablePair:
    """The gold and submitted sides of one graded table, and a row pairing learnt from their columns.

    Once an order-ignoring pair of columns without NA and with all-distinct values is found to hold the
    same multiset, its values pair every gold row with the one submitted row holding the same value: a
    permutation (``multiset.pair_rows`` checks it). A later pair is compared under that permutation: if
    its values are identical row by row, it holds the same multiset (the permutation is the proof);
    otherwise only the rows where it differs need a multiset form, since the agreeing rows put equal
    values on both sides and cancel (``multiset.same_multiset_under``). A nearly aligned pair (a shuffled
    correct answer, or one with a few wrong values) so costs one gather instead of two sorts or counts.
    Pairs whose sample of rows already differs under the permutation use their whole-column forms.
    """

    def __init__(self, g: Side, p: Side) -> None:
        self.g = g
        self.p = p
        self.rows: np.ndarray | None = None
        self._tries = 0

    def match(self, gj: int, pj: int, ordered: bool) -> bool:
        """Does submitted column pj satisfy gold column gj (official rule)? Row counts must agree."""
        quick = maybe_match(self.g, gj, self.p, pj)
        if quick is not None:
            return quick
        if ordered:
            verdict = self.multiset_verdict(gj, pj)
            if verdict is not None:
                return verdict
        return vectors_match(self.g.vec(gj, ordered), self.p.vec(pj, ordered))

    def multiset_verdict(self, gj: int, pj: int) -> bool | None:
        """The order-ignoring official verdict decided from exact value multisets, or None when they cannot.

        Assumes ``maybe_match`` returned None (equal row and NA counts, same kind).
        - True when both columns hold the same multiset of sort keys (``same_keys_possible`` and equal
          value multisets): both key-sorted sequences are then identical, and identical values pass.
        - False for text and timestamps whose value multisets differ: their pairs pass only when equal
          and NA pairs only with NA, so a passing walk would pair the non-NA values one-to-one with
          equal values, i.e. prove the multisets equal.
        Numbers whose multisets differ may still pass within the tolerance: None.
        """
        g, p = self.g, self.p
        gc, pcol = g.column(gj), p.column(pj)
        comparable = same_keys_possible(gc, pcol)
        exact = gc.kind == pcol.kind and gc.kind in EXACT_KINDS
        if not (comparable or exact):
            return None
        same: bool | None = None
        if self.rows is not None and not (g.has_form(gj) and p.has_form(pj)):
            gi, pi = g.identity(gj), p.identity(pj)
            if agree_on_sample(gi, pi, self.rows):
                floats = gc.kind == "num" and gc.pytype == "float"
                same = same_multiset_under(gi, pi, self.rows, floats)
        if same is None:
            same = g.form(gj).same(p.form(pj))
            if same and comparable:
                self._learn(gj, pj)
        if same and comparable:
            return True
        if not same and exact:
            return False
        return None

    def _learn(self, gj: int, pj: int) -> None:
        if self.rows is not None or self._tries >= MAX_PAIRING_TRIES or self.g.column(gj).n_na:
            return
        if not self.g.form(gj).distinct() or self.g.n < 2:
            return
        self._tries += 1
        self.rows = pair_rows(self.g.identity(gj), self.p.identity(pj))

    def rows_agree(self, gcols: list[int], pcols: list[int]) -> bool:
        """True when the learnt pairing maps every gold row to a submitted row with identical values in
        each (gold, submitted) column pair: then the rows are equal as multisets (strict passes)."""
        if self.rows is None:
            return False
        for gj, pj in zip(gcols, pcols):
            gc, pcol = self.g.column(gj), self.p.column(pj)
            if gc.kind != pcol.kind or gc.kind not in {"num", "str", "ts", "tstz"}:
                return False
            if gc.kind == "num" and gc.pytype != pcol.pytype:
                return False
            if not agree_on_sample(self.g.identity(gj), self.p.identity(pj), self.rows):
                return False
        return all(agree_under(self.g.identity(gj), self.p.identity(pj), self.rows) for gj, pj in zip(gcols, pcols))


def table_pair_match(g: Side, gj: int, p: Side, pj: int, ordered: bool) -> bool:
    """Does submitted column pj satisfy gold column gj (official rule)? Row counts must already agree."""
    return TablePair(g, p).match(gj, pj, ordered)


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
        gv = _vec_from(g.column(a), one_array(g_tab.column(i)))
        pv = _vec_from(p.column(b), one_array(p_tab.column(i)))
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

"""Exact multiset equality of two columns' values, in linear time where the values allow it.

The official comparison passes a column pair without any string-key sort when both columns hold the same
multiset of sort keys (vectors.same_key_multiset). This module decides that multiset equality exactly,
over the non-NA values of one column in canonical form: ints / bools (``k<j>``), float64 values,
timestamps as int64 microseconds, text as Arrow strings. Each column gets a *form*, built once per side
and reused for every candidate pair; two columns hold the same multiset if and only if their forms are
``same``. No hash decides a verdict here: every claim of equality rests on an explicit comparison of
values.

Why each form is exact (a multiset M of n values):
- ``int_form``: with lo = min(M), hi = max(M) and step = gcd of (x - lo) over M, the map
  x -> (x - lo) / step is injective, so M is fixed by (lo, step) and the multiset of images, which lie in
  [0, (hi - lo) / step]. The images are stored canonically: a count per value (``np.bincount``) when that
  range is at most ``BINCOUNT_FACTOR`` times n (linear time), else sorted (as uint32 when they fit, which
  sorts faster). n, lo, hi and step are functions of M, so they go into the signature: equal multisets
  give equal signatures and equal bodies, and equal signatures plus equal bodies give equal multisets.
  The subtraction is done modulo 2**64 on uint64 views, exact because 0 <= x - lo <= hi - lo < 2**64.
- ``float_form``: NaN never reaches it (NaN is NA). If every value is finite, integral, within 2**53 in
  magnitude and none is -0.0, then ``astype(int64)`` is injective on M and ``int_form`` applies (tagged,
  so it never meets a true int form; the branch taken is itself a function of M). Otherwise -0.0 is
  counted (signature) and replaced by 0.0, after which equal values have equal bit patterns (only the
  zeros differ in sign among non-NaN floats), so the value-sorted array is canonical.
- bools: (n, number of True) is the multiset.
- ``text_form``: the distinct values with their counts (``pc.value_counts``, exact equality of bytes).
  Two forms are the same when they have as many distinct values and every distinct value of one is found
  in the other (``pc.index_in``, exact) with the same count: distinct values map to distinct values, so
  this is a count-preserving bijection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Count per value (linear) when the images' range is at most this many times the number of values.
BINCOUNT_FACTOR = 16
_U32 = 1 << 32
_EXACT_FLOAT_INT = float(1 << 53)


@dataclass(frozen=True)
class Form:
    """A canonical form of a multiset of numbers: equal forms if and only if equal multisets."""

    signature: tuple[object, ...]
    body: np.ndarray | None = None
    #: body holds a count per value (else the values, sorted)
    counted: bool = False

    def same(self, other: Form | TextForm) -> bool:
        """True exactly when both forms describe the same multiset."""
        if not isinstance(other, Form) or self.signature != other.signature:
            return False
        if self.body is None or other.body is None:
            return self.body is None and other.body is None
        return bool(np.array_equal(self.body, other.body))

    def distinct(self) -> bool:
        """True when every value occurs once (never claimed for bools; -0.0 and 0.0 count as one)."""
        if self.body is None:
            return self.signature[0] != "bool" and len(self.signature) > 1 and self.signature[1] == 1
        if self.counted:
            return bool(self.body.max() <= 1)
        return not bool(np.any(self.body[1:] == self.body[:-1]))


@dataclass(frozen=True)
class TextForm:
    """Distinct strings and their counts (order arbitrary); compared through an exact lookup."""

    size: int
    values: pa.Array
    counts: np.ndarray

    def distinct(self) -> bool:
        """True when every string occurs once."""
        return len(self.values) == self.size

    def same(self, other: Form | TextForm) -> bool:
        """True exactly when both forms describe the same multiset of strings."""
        if not isinstance(other, TextForm) or self.size != other.size or len(self.values) != len(other.values):
            return False
        if self.size == 0:
            return True
        where = pc.index_in(other.values, value_set=self.values)
        if where.null_count:
            return False
        return bool(np.array_equal(other.counts, self.counts[where.to_numpy(zero_copy_only=False)]))


def int_form(values: np.ndarray, tag: str = "int") -> Form:
    """The form of a 1-D integer array (any signed or unsigned width, or bool)."""
    n = int(values.size)
    if values.dtype == np.bool_:
        return Form(("bool", n, int(np.count_nonzero(values))))
    if n == 0:
        return Form((tag, 0))
    if values.dtype not in (np.dtype(np.int64), np.dtype(np.uint64)):
        values = values.astype(np.uint64 if values.dtype.kind == "u" else np.int64)
    lo, hi = int(values.min()), int(values.max())
    if lo == hi:
        return Form((tag, n, lo, hi))
    shifted = np.ascontiguousarray(values).view(np.uint64) - np.uint64(lo % (1 << 64))
    step = int(np.gcd.reduce(shifted))
    span = (hi - lo) // step
    if step > 1:
        shifted //= np.uint64(step)
    if span <= BINCOUNT_FACTOR * n:
        return Form((tag, n, lo, hi, step), np.bincount(shifted.astype(np.int64), minlength=span + 1), True)
    if span < _U32:
        return Form((tag, n, lo, hi, step), np.sort(shifted.astype(np.uint32)))
    return Form((tag, n, lo, hi, step), np.sort(shifted))


def float_form(values: np.ndarray) -> Form:
    """The form of a 1-D float64 array without NaN (bit-exact: -0.0 and 0.0 differ)."""
    n = int(values.size)
    if n == 0:
        return Form(("float", 0))
    zero = values == 0
    neg_zero = int(np.count_nonzero(zero & np.signbit(values))) if zero.any() else 0
    with np.errstate(invalid="ignore"):
        integral = (
            neg_zero == 0
            and bool(np.isfinite(values).all())
            and bool((np.abs(values) <= _EXACT_FLOAT_INT).all())
            and bool(np.array_equal(np.trunc(values), values))
        )
    if integral:
        return int_form(values.astype(np.int64), "float-int")
    if neg_zero:
        values = np.where(zero, 0.0, values)
    return Form(("float", n, neg_zero), np.sort(values))


def text_form(values: pa.Array) -> TextForm:
    """The form of an Arrow string array without nulls."""
    if len(values) == 0:
        return TextForm(0, pa.array([], pa.string()), np.zeros(0, dtype=np.int64))
    counted = pc.value_counts(values)
    return TextForm(
        len(values),
        counted.field("values"),
        counted.field("counts").to_numpy(zero_copy_only=False),
    )


@dataclass(frozen=True)
class Identity:
    """A column's values in row order as exact identities, and its NA mask (None when it has no NA).

    values: numpy ints / bools / timestamps, float64 as their int64 bit patterns (so -0.0 and 0.0
    differ), or an Arrow string array. Values at NA positions are meaningless.
    """

    values: np.ndarray | pa.Array
    na: np.ndarray | None


def identity(arr: pa.Array, float_bits: bool) -> Identity:
    """The Identity of one canonical column (``float_bits``: a float64 column)."""
    na = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return Identity(arr, na)
    filled = arr.fill_null(False if pa.types.is_boolean(arr.type) else 0) if arr.null_count else arr
    values = filled.to_numpy(zero_copy_only=False)
    if float_bits:
        values = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    return Identity(values, na)


def disagreements(g: Identity, p: Identity, rows: np.ndarray) -> np.ndarray | None:
    """The gold rows i whose value differs from submitted row ``rows[i]`` (NA-ness included), or None
    when the two columns' identities are of different types (they are then never compared here)."""
    n = len(rows)
    if len(g.values) != n or len(p.values) != n:
        return None
    if isinstance(g.values, np.ndarray) and isinstance(p.values, np.ndarray):
        if g.values.dtype != p.values.dtype:
            return None
        differ = g.values != p.values[rows]
    elif isinstance(g.values, pa.Array) and isinstance(p.values, pa.Array) and g.values.type == p.values.type:
        equal = pc.equal(g.values, p.values.take(pa.array(rows))).fill_null(False)
        differ = ~equal.to_numpy(zero_copy_only=False)
    else:
        return None
    if g.na is not None or p.na is not None:
        g_na = g.na if g.na is not None else np.zeros(n, dtype=bool)
        p_na = p.na[rows] if p.na is not None else np.zeros(n, dtype=bool)
        differ = (differ & ~(g_na | p_na)) | (g_na != p_na)
    return np.flatnonzero(differ)


def agree_under(g: Identity, p: Identity, rows: np.ndarray) -> bool:
    """True when gold row i and submitted row ``rows[i]`` hold identical values (or both NA), for all i.

    With ``rows`` a permutation this is a bijection between equal values: the two columns hold the same
    multiset. False proves nothing (the values may still be the same multiset in another pairing).
    """
    differ = disagreements(g, p, rows)
    return differ is not None and differ.size == 0


def same_multiset_under(g: Identity, p: Identity, rows: np.ndarray, floats: bool) -> bool | None:
    """Exact equality of the two columns' non-NA value multisets, computed on the rows where they differ
    under the permutation ``rows`` (None when the identities are of different types).

    Why only those rows: the rows where gold row i and submitted row rows[i] agree contribute the same
    values to both sides (rows is a permutation, so it splits the submitted rows the same way), and a
    multiset equality is unchanged when equal parts are removed from both sides. ``floats``: the values
    are float64 bit patterns (their form keeps -0.0 apart from 0.0).
    """
    differ = disagreements(g, p, rows)
    if differ is None:
        return None
    if differ.size == 0:
        return True
    return _live_form(_take(g, differ), floats).same(_live_form(_take(p, rows[differ]), floats))


def _live_form(ident: Identity, floats: bool) -> Form | TextForm:
    values = ident.values
    if isinstance(values, pa.Array):
        return text_form(values if ident.na is None else values.filter(pa.array(~ident.na)))
    if ident.na is not None:
        values = values[~ident.na]
    if floats:
        return float_form(np.ascontiguousarray(values).view(np.float64))
    return int_form(values)


#: Rows looked at by ``agree_on_sample`` before a whole column is compared under a pairing.
SAMPLE_ROWS = 64


def agree_on_sample(g: Identity, p: Identity, rows: np.ndarray) -> bool:
    """``agree_under`` on SAMPLE_ROWS evenly spread rows only: a cheap filter, never a verdict.

    A pair that fails here would fail ``agree_under`` too; one that passes still needs the full check.
    """
    n = len(rows)
    if n <= SAMPLE_ROWS:
        return True
    at = np.linspace(0, n - 1, SAMPLE_ROWS).astype(np.int64)
    return agree_under(_take(g, at), _take(p, rows[at]), np.arange(SAMPLE_ROWS, dtype=np.int64))


def _take(ident: Identity, at: np.ndarray) -> Identity:
    na = None if ident.na is None else ident.na[at]
    if isinstance(ident.values, np.ndarray):
        return Identity(ident.values[at], na)
    return Identity(ident.values.take(pa.array(at)), na)


def is_permutation(rows: np.ndarray, n: int) -> bool:
    """True when ``rows`` holds each of 0..n-1 exactly once."""
    if rows.shape != (n,) or n == 0:
        return rows.shape == (n,)
    if rows.min() < 0 or rows.max() >= n:
        return False
    return bool((np.bincount(rows, minlength=n) == 1).all())


def pair_rows(g: Identity, p: Identity) -> np.ndarray | None:
    """A permutation pairing each gold row with the submitted row of the same value, or None.

    Meant for a column pair without NA whose values are all distinct and equal as sets. The result is
    checked (a permutation under which the two columns agree), so a wrong premise gives None, never a
    wrong pairing.
    """
    if g.na is not None or p.na is not None:
        return None
    n = len(g.values)
    if len(p.values) != n:
        return None
    if isinstance(g.values, np.ndarray) and isinstance(p.values, np.ndarray):
        if g.values.dtype != p.values.dtype or g.values.dtype == np.bool_ or n == 0:
            return None
        lo, hi = int(g.values.min()), int(g.values.max())
        span = hi - lo
        if span <= BINCOUNT_FACTOR * n:
            offset = np.uint64(lo % (1 << 64))
            g_at = (np.ascontiguousarray(g.values).view(np.uint64) - offset).astype(np.int64)
            p_at = (np.ascontiguousarray(p.values).view(np.uint64) - offset).astype(np.int64)
            if p_at.min() < 0 or p_at.max() > span:
                return None
            position = np.full(span + 1, -1, dtype=np.int64)
            position[p_at] = np.arange(n, dtype=np.int64)
            rows = position[g_at]
        else:
            found = pc.index_in(pa.array(g.values), value_set=pa.array(p.values))
            if found.null_count:
                return None
            rows = found.to_numpy(zero_copy_only=False).astype(np.int64)
    elif isinstance(g.values, pa.Array) and isinstance(p.values, pa.Array):
        found = pc.index_in(g.values, value_set=p.values)
        if found.null_count:
            return None
        rows = found.to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        return None
    if not is_permutation(rows, n) or not agree_under(g, p, rows):
        return None
    return rows

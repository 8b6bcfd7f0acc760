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

    def same(self, other: "Form | TextForm") -> bool:
        """True exactly when both forms describe the same multiset."""
        if not isinstance(other, Form) or self.signature != other.signature:
            return False
        if self.body is None or other.body is None:
            return self.body is None and other.body is None
        return bool(np.array_equal(self.body, other.body))


@dataclass(frozen=True)
class TextForm:
    """Distinct strings and their counts (order arbitrary); compared through an exact lookup."""

    size: int
    values: pa.Array
    counts: np.ndarray

    def same(self, other: "Form | TextForm") -> bool:
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
        body = np.bincount(shifted.astype(np.int64), minlength=span + 1)
    elif span < _U32:
        body = np.sort(shifted.astype(np.uint32))
    else:
        body = np.sort(shifted)
    return Form((tag, n, lo, hi, step), body)


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

"""The exact multiset forms and row pairings of core/scorer/multiset.py against naive Counter oracles.

Each property draws a column, derives a second one (a shuffle, a changed value, a swapped zero sign, a
duplicated value, an independent draw) and checks ``form(a).same(form(b))`` against ``Counter`` equality of
the exact identities (ints, float bit patterns, strings), on every form the module builds: counts, sorted
uint32 / uint64, floats that are integers, floats with -0.0 / inf, bools, text. Pairings must be
permutations under which the columns agree, and only exist when the values are distinct.
"""

from __future__ import annotations

import struct
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbt_harvest.core.scorer.multiset import (
    BINCOUNT_FACTOR,
    Identity,
    agree_on_sample,
    agree_under,
    float_form,
    identity,
    int_form,
    is_permutation,
    pair_rows,
    same_multiset_under,
    text_form,
)


def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


INT_SOURCES = {
    "small": st.integers(-20, 20),
    "stepped": st.integers(-50, 50).map(lambda x: x * 86_400_000_000),
    "wide32": st.integers(0, 3_000_000_000),
    "wide64": st.integers(-(1 << 63), (1 << 63) - 1),
}
FLOATS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 3.0, 2.0**53, 2.0**53 + 2, float("inf"), float("-inf"), 1e300, 5e-324]),
    st.integers(-1000, 1000).map(float),
    st.floats(allow_nan=False, allow_infinity=True, width=64),
)
TEXT = st.sampled_from(["", "a", "A", "a ", "nan", "None", "10", "9", "é", "x" * 40])


@st.composite
def derived(draw: st.DrawFn, values: st.SearchStrategy) -> tuple[list, list]:  # type: ignore[type-arg]
    a = draw(st.lists(values, max_size=60))
    op = draw(st.sampled_from(["shuffle", "change", "dup", "fresh", "negzero"]))
    b = list(a)
    if op == "shuffle":
        b = draw(st.permutations(b))
    elif op == "change" and b:
        b[draw(st.integers(0, len(b) - 1))] = draw(values)
        b = draw(st.permutations(b))
    elif op == "dup" and len(b) > 1:
        b[draw(st.integers(1, len(b) - 1))] = b[0]
    elif op == "fresh":
        b = draw(st.lists(values, min_size=len(a), max_size=len(a)))
    elif op == "negzero":
        b = [(-x if isinstance(x, float) and x == 0 else x) for x in b]
    return a, b


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(INT_SOURCES)).flatmap(lambda k: derived(INT_SOURCES[k])), st.booleans())
def test_int_form_is_exact(pair: tuple[list[int], list[int]], unsigned: bool) -> None:
    a, b = pair
    if unsigned:
        a = [x % (1 << 64) for x in a]
        b = [x % (1 << 64) for x in b]
    dtype = np.uint64 if unsigned else np.int64
    fa, fb = int_form(np.array(a, dtype=dtype)), int_form(np.array(b, dtype=dtype))
    assert fa.same(fb) == (Counter(a) == Counter(b))
    assert fa.same(fa)


@settings(max_examples=400, deadline=None)
@given(derived(FLOATS))
def test_float_form_is_exact_bitwise(pair: tuple[list[float], list[float]]) -> None:
    a, b = pair
    fa = float_form(np.array(a, dtype=np.float64))
    fb = float_form(np.array(b, dtype=np.float64))
    assert fa.same(fb) == (Counter(map(_bits, a)) == Counter(map(_bits, b)))


@settings(max_examples=300, deadline=None)
@given(derived(TEXT))
def test_text_form_is_exact(pair: tuple[list[str], list[str]]) -> None:
    a, b = pair
    assert text_form(pa.array(a, pa.string())).same(text_form(pa.array(b, pa.string()))) == (Counter(a) == Counter(b))


@settings(max_examples=200, deadline=None)
@given(derived(st.booleans()))
def test_bool_form_is_exact(pair: tuple[list[bool], list[bool]]) -> None:
    a, b = pair
    assert int_form(np.array(a, dtype=bool)).same(int_form(np.array(b, dtype=bool))) == (Counter(a) == Counter(b))


def test_forms_of_different_kinds_never_match() -> None:
    ints = int_form(np.array([1, 2, 3], dtype=np.int64))
    floats = float_form(np.array([1.0, 2.0, 3.0]))
    text = text_form(pa.array(["1", "2", "3"]))
    assert not ints.same(floats) and not floats.same(ints)
    assert not ints.same(text) and not text.same(ints)
    assert int_form(np.array([], dtype=np.int64)).same(int_form(np.array([], dtype=np.int64)))


def test_each_int_body_is_used() -> None:
    n = 50
    counted = int_form(np.arange(n, dtype=np.int64))
    stepped = int_form(np.arange(n, dtype=np.int64) * 86_400_000_000)
    sorted32 = int_form(np.arange(n, dtype=np.int64) ** 3)
    sorted64 = int_form(np.array([0, (1 << 40) + 1, -(1 << 62)] * 10, dtype=np.int64))
    assert counted.counted and stepped.counted and stepped.signature[-1] == 86_400_000_000
    assert not sorted32.counted and sorted32.body is not None and sorted32.body.dtype == np.uint32
    assert not sorted64.counted and sorted64.body is not None and sorted64.body.dtype == np.uint64
    assert (n**3) > BINCOUNT_FACTOR * n


def test_negative_zero_is_not_zero() -> None:
    assert not float_form(np.array([0.0, 1.5])).same(float_form(np.array([-0.0, 1.5])))
    assert not float_form(np.array([0.0, 1.0])).same(float_form(np.array([-0.0, 1.0])))  # integral branch
    assert float_form(np.array([-0.0, 0.0, 2.5])).same(float_form(np.array([0.0, 2.5, -0.0])))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-1000, 1000), unique=True, max_size=40), st.randoms(use_true_random=False))
def test_pair_rows_of_distinct_values_is_a_checked_permutation(values: list[int], rnd) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(values)
    rnd.shuffle(shuffled)
    for make in (
        lambda v: Identity(np.array(v, dtype=np.int64), None),
        lambda v: Identity(pa.array([str(x) for x in v], pa.string()), None),
        lambda v: Identity(np.array([x * 1e6 + 0.5 for x in v]).view(np.int64), None),
    ):
        g, p = make(values), make(shuffled)
        rows = pair_rows(g, p)
        if len(values) == 0:
            continue
        assert rows is not None and is_permutation(rows, len(values))
        assert agree_under(g, p, rows)


def test_pair_rows_refuses_duplicates_and_different_sets() -> None:
    assert pair_rows(Identity(np.array([1, 1, 2]), None), Identity(np.array([1, 2, 1]), None)) is None
    assert pair_rows(Identity(np.array([1, 2, 3]), None), Identity(np.array([1, 2, 4]), None)) is None
    assert (
        pair_rows(Identity(np.array([1, 2, 3]), np.array([False, True, False])), Identity(np.array([1, 2, 3]), None))
        is None
    )
    assert pair_rows(Identity(pa.array(["a", "b"]), None), Identity(pa.array(["b", "c"]), None)) is None


def test_agree_under_sees_na_values_and_types() -> None:
    rows = np.array([1, 0])
    with_na = identity(pa.array([1.0, None]), float_bits=True)
    swapped = identity(pa.array([None, 1.0]), float_bits=True)
    assert agree_under(with_na, swapped, rows)
    assert not agree_under(with_na, identity(pa.array([1.0, 2.0]), float_bits=True), rows)
    assert not agree_under(identity(pa.array([0.0, 1.0]), True), identity(pa.array([1.0, -0.0]), True), rows)
    assert not agree_under(identity(pa.array([1, 2]), False), identity(pa.array([2, 1], pa.uint64()), False), rows)
    assert agree_under(identity(pa.array(["a", None]), False), identity(pa.array([None, "a"]), False), rows)
    assert not agree_under(identity(pa.array(["a", None]), False), identity(pa.array([None, "b"]), False), rows)


@pytest.mark.parametrize(
    "rows, n, ok",
    [
        ([0, 1, 2], 3, True),
        ([0, 0, 2], 3, False),
        ([0, 1, 3], 3, False),
        ([-1, 1, 2], 3, False),
        ([], 0, True),
        ([0, 1], 3, False),
    ],
)
def test_is_permutation(rows: list[int], n: int, ok: bool) -> None:
    assert is_permutation(np.array(rows, dtype=np.int64), n) == ok


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=300), st.randoms(use_true_random=False), st.booleans())
def test_a_failed_sample_means_a_failed_comparison(values: list[int], rnd, text: bool) -> None:  # type: ignore[no-untyped-def]
    """agree_on_sample is only a filter: whenever it says no, the full comparison says no too."""
    other = list(values)
    rnd.shuffle(other)
    rows = np.array(rnd.sample(range(len(values)), len(values)), dtype=np.int64)
    if text:
        g, p = (
            Identity(pa.array([str(v) for v in values], pa.string()), None),
            Identity(pa.array([str(v) for v in other], pa.string()), None),
        )
    else:
        g, p = Identity(np.array(values, dtype=np.int64), None), Identity(np.array(other, dtype=np.int64), None)
    if agree_under(g, p, rows):
        assert agree_on_sample(g, p, rows)
    if not agree_on_sample(g, p, rows):
        assert not agree_under(g, p, rows)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["int", "float", "text"]).flatmap(
        lambda kind: st.tuples(st.just(kind), derived({"int": st.integers(-3, 3), "float": FLOATS, "text": TEXT}[kind]))
    ),
    st.randoms(use_true_random=False),
    st.lists(st.booleans(), max_size=60),
    st.lists(st.booleans(), max_size=60),
)
def test_same_multiset_under_any_permutation_is_exact(case, rnd, g_na, p_na) -> None:  # type: ignore[no-untyped-def]
    """Whatever the permutation, the residual comparison equals Counter equality of the non-NA values."""
    kind, (a, b) = case
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    g_mask = np.array((g_na + [False] * n)[:n], dtype=bool)
    p_mask = np.array((p_na + [False] * n)[:n], dtype=bool)
    rows = np.array(rnd.sample(range(n), n), dtype=np.int64)
    if kind == "text":
        g = Identity(pa.array(a, pa.string()), g_mask if g_mask.any() else None)
        p = Identity(pa.array(b, pa.string()), p_mask if p_mask.any() else None)
        key = str
    elif kind == "float":
        g = Identity(np.array(a, dtype=np.float64).view(np.int64), g_mask if g_mask.any() else None)
        p = Identity(np.array(b, dtype=np.float64).view(np.int64), p_mask if p_mask.any() else None)
        key = _bits
    else:
        g = Identity(np.array(a, dtype=np.int64), g_mask if g_mask.any() else None)
        p = Identity(np.array(b, dtype=np.int64), p_mask if p_mask.any() else None)
        key = int
    live_a = Counter(key(x) for x, m in zip(a, g_mask) if not m)
    live_b = Counter(key(x) for x, m in zip(b, p_mask) if not m)
    assert same_multiset_under(g, p, rows, floats=kind == "float") == (live_a == live_b)
    if agree_under(g, p, rows):
        assert live_a == live_b and int(g_mask.sum()) == int(p_mask.sum())

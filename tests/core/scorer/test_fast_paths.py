"""The fast paths of the official and strict verdicts on tables large enough to take them, against the
literal pandas reference.

The hypothesis suites draw tables of at most five rows; these cases build 40 and 600 rows (the
small-frame loader; the large loader with in-process sorts; and, with the threshold lowered, the large
loader with DuckDB sorts) so that
the multiset forms (counts, sorted uint32 / uint64, integral floats, -0.0, text counts), the learnt row
pairing and the strict shortcut all run, and compare each verdict with tests/core/scorer/reference.py.
Submissions: shuffled rows, renamed and reordered columns, one column scrambled on its own, values moved
inside and outside the 0.01 tolerance, -0.0 for 0.0, NULL / NaN / 'None', a duplicated row, type swaps
(INT -> DOUBLE, DATE -> TIMESTAMP), empty tables.
"""

from __future__ import annotations

import duckdb
import pytest

from dbt_harvest.core.scorer import GradingSpec, score, vectors
from dbt_harvest.core.scorer.grading import grade

from .reference import table_verdict

GOLD_COLUMNS = """
    range AS id,
    range * range AS sq,
    hash(range) AS h,
    (range * 0.37) % 13.1 AS f,
    CAST(range % 50 AS DOUBLE) AS fi,
    CASE WHEN range % 3 = 0 THEN -0.0 WHEN range % 3 = 1 THEN 0.0 ELSE range / 4 END AS z,
    CASE WHEN range % 7 = 0 THEN NULL ELSE 'v' || (range % 23) END AS s,
    DATE '2020-01-01' + CAST(range % 400 AS INTEGER) AS d,
    TIMESTAMP '2021-03-04 05:06:07' + to_seconds(range * 61) AS t,
    range % 2 = 0 AS b,
    CAST(range / 8 AS DECIMAL(10, 2)) AS dec,
    CASE WHEN range % 5 = 0 THEN NULL ELSE CAST(range % 9 AS INTEGER) END AS ni,
    CASE WHEN range % 11 = 0 THEN 'nan'::DOUBLE WHEN range % 13 = 0 THEN NULL ELSE range / 3 END AS nanf
"""
NAMES = ["id", "sq", "h", "f", "fi", "z", "s", "d", "t", "b", "dec", "ni", "nanf"]
SHUFFLE = "ORDER BY hash(id + 17)"

#: name -> (statements run on the submission after it is created as a copy of gold, expected strict or None)
CASES: dict[str, tuple[list[str], int | None]] = {
    "identical": ([], 1),
    "shuffled": ([f"CREATE OR REPLACE TABLE t AS SELECT * FROM t {SHUFFLE}"], 1),
    "renamed_reordered_extra": (
        [
            "CREATE OR REPLACE TABLE t AS SELECT 42 AS extra, "
            + ", ".join(f"{c} AS x_{c}" for c in reversed(NAMES))
            + f" FROM t {SHUFFLE}"
        ],
        1,
    ),
    "one_column_scrambled": (
        [
            "CREATE OR REPLACE TABLE t AS SELECT * REPLACE (f2 AS f) FROM (SELECT *, row_number() OVER (ORDER BY id) AS rn FROM t) "
            "JOIN (SELECT f AS f2, row_number() OVER (ORDER BY hash(id)) AS rn FROM t) USING (rn)",
            "ALTER TABLE t DROP COLUMN rn",
            "ALTER TABLE t DROP COLUMN f2",
        ],
        0,
    ),
    "within_tolerance": (["UPDATE t SET f = f + 0.004 WHERE id = 5"], None),
    "outside_tolerance": (["UPDATE t SET f = f + 0.02 WHERE id = 5"], 0),
    "big_int_plus_one": (["UPDATE t SET h = h + 1 WHERE id = 3"], None),
    "square_changed": (["UPDATE t SET sq = sq + 1 WHERE id = 9"], 0),
    "negative_zero_flipped": (["UPDATE t SET z = 0.0 WHERE id = 3"], None),
    "integral_float_changed": (["UPDATE t SET fi = fi + 1 WHERE id = 4"], None),
    "null_to_text_none": (["UPDATE t SET s = 'None' WHERE id = 7"], 0),
    "text_changed": (["UPDATE t SET s = s || ' ' WHERE id = 8"], 0),
    "nan_to_null": (["UPDATE t SET nanf = NULL WHERE id = 11"], None),
    "null_int_to_zero": (["UPDATE t SET ni = 0 WHERE id = 5"], None),
    "duplicated_row": (["DELETE FROM t WHERE id = 6", "INSERT INTO t SELECT * FROM t WHERE id = 2"], 0),
    "int_as_double": (
        ["CREATE OR REPLACE TABLE t AS SELECT * REPLACE (CAST(id AS DOUBLE) AS id) FROM t " + SHUFFLE],
        None,
    ),
    "date_as_timestamp": (["CREATE OR REPLACE TABLE t AS SELECT * REPLACE (CAST(d AS TIMESTAMP) AS d) FROM t"], None),
    "timestamp_one_ms": (["UPDATE t SET t = t + INTERVAL 1 MILLISECOND WHERE id = 2"], 0),
    "bool_flipped": (["UPDATE t SET b = NOT b WHERE id = 2"], None),
    "decimal_as_double": (
        ["CREATE OR REPLACE TABLE t AS SELECT * REPLACE (CAST(dec AS DOUBLE) + 0.001 AS dec) FROM t"],
        None,
    ),
    "extra_row": (["INSERT INTO t SELECT * FROM t WHERE id = 1"], 0),
    "empty": (["DELETE FROM t"], 0),
}


def _tables(rows: int, statements: list[str]) -> tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection]:
    gold, pred = duckdb.connect(), duckdb.connect()
    for con in (gold, pred):
        con.execute(f"CREATE TABLE t AS SELECT {GOLD_COLUMNS} FROM range({rows})")
    for statement in statements:
        pred.execute(statement)
    return gold, pred


@pytest.mark.parametrize("rows, duckdb_sorts", [(40, False), (600, False), (600, True)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_verdicts_equal_the_reference(
    case: str, rows: int, duckdb_sorts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if duckdb_sorts:
        monkeypatch.setattr(vectors, "IN_PROCESS_SORT_MAX_ROWS", -1)
    statements, expected_strict = CASES[case]
    gold, pred = _tables(rows, statements)
    for cols, ignore_order in (((), True), ((0, 3, 5, 6), True), ((), False)):
        spec = GradingSpec("gold.duckdb", ("t",), (cols,), (ignore_order,))
        result = score(gold, pred, spec)
        reference = table_verdict(gold, pred, "t", list(cols), ignore_order)
        assert result.official.score == int(reference), (case, rows, cols, ignore_order)
        assert not (result.strict.score and not result.official.score), (case, rows, cols)
        if expected_strict is not None and ignore_order and not cols:
            assert result.strict.score == expected_strict, (case, rows)


def test_empty_tables_pass_both_ways() -> None:
    gold, pred = _tables(0, [])
    spec = GradingSpec("gold.duckdb", ("t",), ((),), (True,))
    result = score(gold, pred, spec)
    assert result.official.score == 1 and result.strict.score == 1
    assert table_verdict(gold, pred, "t", [], True)


@pytest.mark.parametrize("rows", [40, 600])
def test_all_numeric_frames_upcast_ints_like_pandas(rows: int) -> None:
    """Ints in an all-numeric frame arrive as floats; big ones round (2**53 + 1), unsigned ones too."""
    gold, pred = duckdb.connect(), duckdb.connect()
    body = (
        f"SELECT range AS a, CAST(9007199254740993 + range * 2 AS BIGINT) AS big, "
        f"CAST(18446744073709551615 - range AS UBIGINT) AS u, range / 3 AS f FROM range({rows})"
    )
    gold.execute(f"CREATE TABLE t AS {body}")
    pred.execute(
        f"CREATE TABLE t AS SELECT CAST(big AS DOUBLE) AS big, f, CAST(u AS DOUBLE) AS u, a FROM ({body}) {SHUFFLE.replace('id', 'a')}"
    )
    spec = GradingSpec("gold.duckdb", ("t",), ((),), (True,))
    result = score(gold, pred, spec)
    assert result.official.score == int(table_verdict(gold, pred, "t", [], True)) == 1


def test_shuffled_rows_are_decided_through_the_learnt_pairing() -> None:
    """A row shuffle: the pairing is learnt from ``id`` and every later column agrees under it, so no
    float is sorted (no form built for ``f``) and strict passes without sorting rows."""
    gold, pred = _tables(600, CASES["shuffled"][0])
    graded = grade(gold, pred, GradingSpec("gold.duckdb", ("t",), ((),), (True,)), want_strict=True)
    work = graded.tables[0]
    assert graded.official.score == 1 and graded.strict.score == 1
    assert work.pair is not None and work.pair.rows is not None and work.gold_side is not None
    assert not work.gold_side.has_form(NAMES.index("f")) and not work.gold_side.has_form(NAMES.index("s"))


def test_a_column_scrambled_on_its_own_falls_back_to_its_form() -> None:
    gold, pred = _tables(600, CASES["one_column_scrambled"][0])
    graded = grade(gold, pred, GradingSpec("gold.duckdb", ("t",), ((),), (True,)), want_strict=True)
    work = graded.tables[0]
    assert graded.official.score == 1 and graded.strict.score == 0
    assert work.pair is not None and work.pair.rows is not None and work.gold_side is not None
    assert work.gold_side.has_form(NAMES.index("f")) and not work.gold_side.has_form(NAMES.index("fi"))


@pytest.mark.parametrize("rows", [40, 600])
def test_big_ints_compare_as_python_floats(rows: int) -> None:
    """Ints stay ints in a frame with text. Near 2**53, 2**63 and 2**64 (UBIGINT) the submitted values
    differ a little (their multisets differ), so the pairs go through the tolerance walk over the float
    values read through Arrow casts, where the official code compares float(a) with float(b)."""
    gold, pred = duckdb.connect(), duckdb.connect()
    body = (
        "SELECT 'k' || range AS k, "
        "CAST(9007199254740993 + range * 4 AS BIGINT) AS a, "
        "CAST(9223372036854775807 - range * 4096 AS BIGINT) AS b, "
        "CAST(18446744073709551615 - range * 8192 AS UBIGINT) AS c "
        f"FROM range({rows})"
    )
    gold.execute(f"CREATE TABLE t AS {body}")
    pred.execute(f"CREATE TABLE t AS SELECT k, a - 1 AS a, b - 1024 AS b, c - 2047 AS c FROM ({body}) ORDER BY hash(k)")
    for cols in ((1,), (2,), (3,), ()):
        spec = GradingSpec("gold.duckdb", ("t",), (cols,), (True,))
        assert score(gold, pred, spec).official.score == int(table_verdict(gold, pred, "t", list(cols), True)), cols


def test_a_few_wrong_values_are_decided_on_the_rows_that_differ() -> None:
    """Shuffled rows with one changed text value: under the learnt pairing only that row differs, so the
    column is rejected from the two differing values alone (no whole-column form is built)."""
    gold, pred = _tables(
        600, ["UPDATE t SET s = s || ' ' WHERE id = 8", f"CREATE OR REPLACE TABLE t AS SELECT * FROM t {SHUFFLE}"]
    )
    graded = grade(gold, pred, GradingSpec("gold.duckdb", ("t",), ((),), (True,)), want_strict=False)
    work = graded.tables[0]
    assert graded.official.score == 0 == int(table_verdict(gold, pred, "t", [], True))
    assert work.pair is not None and work.pair.rows is not None and work.gold_side is not None
    assert not work.gold_side.has_form(NAMES.index("s"))

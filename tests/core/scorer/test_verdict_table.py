"""One test per row of the verdict table in docs/SCORER_SPEC.md (verdicts of the official code).

Each test checks the fast scorer AND the literal pandas reference against the documented verdict.
"""

from __future__ import annotations

from .helpers import both_verdicts, values_table


def check(expected: int, gold_sql: str, pred_sql: str, cols: tuple[int, ...] = (), ignore_order: bool = True) -> None:
    fast, ref, _ = both_verdicts(gold_sql, pred_sql, cols, ignore_order)
    assert (fast, ref) == (expected, expected)


def one(typ_g: str, vals_g: list[str], typ_p: str, vals_p: list[str], expected: int) -> None:
    check(expected, values_table("t", typ_g, vals_g), values_table("t", typ_p, vals_p))


ABC = "CREATE TABLE t AS SELECT * FROM (VALUES (1, 'x', 1.5), (2, 'y', 2.5), (3, 'z', 3.5)) v(a, b, c)"


def test_identical() -> None:
    check(1, ABC, ABC)


def test_rows_scrambled_across_columns() -> None:
    pred = "CREATE TABLE t AS SELECT * FROM (VALUES (3, 'x', 2.5), (1, 'z', 1.5), (2, 'y', 3.5)) v(a, b, c)"
    check(1, ABC, pred)


def test_extra_column_reordered_renamed() -> None:
    pred = (
        "CREATE TABLE t AS SELECT * FROM (VALUES (3.5, 'q', 'z', 3), (1.5, 'q', 'x', 1), (2.5, 'q', 'y', 2))"
        " v(p, extra, r, s)"
    )
    check(1, ABC, pred)


def test_one_prediction_column_satisfies_two_gold_columns() -> None:
    gold = "CREATE TABLE t AS SELECT * FROM (VALUES (1, 1), (2, 2)) v(a, b)"
    pred = "CREATE TABLE t AS SELECT * FROM (VALUES (1), (2)) v(solo)"
    check(1, gold, pred)


def test_gold_columns_outside_condition_cols_differ() -> None:
    pred = "CREATE TABLE t AS SELECT * FROM (VALUES (1, 'x', 9.0), (2, 'y', 9.0), (3, 'z', 9.0)) v(a, b, c)"
    check(1, ABC, pred, cols=(0, 1))


def test_one_extra_prediction_row() -> None:
    pred = ABC.replace("(3, 'z', 3.5))", "(3, 'z', 3.5), (4, 'w', 4.5))")
    check(0, ABC, pred)


def test_duplicates_differ() -> None:
    one("INTEGER", ["1", "1", "2"], "INTEGER", ["1", "2", "2"], 0)


def test_within_tolerance_double() -> None:
    one("DOUBLE", ["1.000"], "DOUBLE", ["1.009"], 1)


def test_beyond_tolerance_double() -> None:
    one("DOUBLE", ["1.000"], "DOUBLE", ["1.011"], 0)


def test_large_magnitudes_relative_tolerance() -> None:
    one("DOUBLE", ["1e9"], "DOUBLE", ["1e9 + 0.5"], 1)
    one("DOUBLE", ["1e12"], "DOUBLE", ["1e12 + 5"], 1)


def test_tiny_values_of_opposite_sign() -> None:
    one("DOUBLE", ["-0.004"], "DOUBLE", ["0.004"], 1)


def test_string_sort_misaligns_9_999_and_10_001() -> None:
    one("DOUBLE", ["9.999", "5.0"], "DOUBLE", ["10.001", "5.0"], 0)


def test_string_sort_misaligns_99_999_and_100_004() -> None:
    one("DOUBLE", ["50.0", "99.999"], "DOUBLE", ["50.0", "100.004"], 0)


def test_int_vs_double() -> None:
    one("INTEGER", ["3"], "DOUBLE", ["3.0"], 1)


def test_int_vs_varchar() -> None:
    one("INTEGER", ["3"], "VARCHAR", ["'3'"], 0)


def test_decimal_vs_double() -> None:
    one("DECIMAL(10,2)", ["3.14"], "DOUBLE", ["3.141"], 1)


def test_hugeint_vs_bigint() -> None:
    one("HUGEINT", ["5"], "BIGINT", ["5"], 1)


def test_boolean_vs_int() -> None:
    one("BOOLEAN", ["true"], "INTEGER", ["1"], 1)


def test_date_vs_midnight_timestamp() -> None:
    one("DATE", ["'2020-01-01'"], "TIMESTAMP", ["'2020-01-01 00:00:00'"], 1)


def test_date_vs_varchar() -> None:
    one("DATE", ["'2020-01-01'"], "VARCHAR", ["'2020-01-01'"], 0)


def test_timestamp_vs_timestamptz_same_instant() -> None:
    one("TIMESTAMP", ["'2020-01-01 00:00:00'"], "TIMESTAMPTZ", ["'2020-01-01 00:00:00+00'"], 0)


def test_timestamps_one_ms_apart() -> None:
    one("TIMESTAMP", ["'2020-01-01 00:00:00'"], "TIMESTAMP", ["'2020-01-01 00:00:00.001'"], 0)


def test_null_vs_null_in_every_type() -> None:
    for typ in ("INTEGER", "VARCHAR", "DATE", "BOOLEAN"):
        one(typ, ["NULL", "NULL"], typ, ["NULL", "NULL"], 1)


def test_null_int_vs_nan_double() -> None:
    one("INTEGER", ["NULL"], "DOUBLE", ["'nan'"], 1)


def test_null_vs_zero_none_and_empty_string() -> None:
    one("INTEGER", ["NULL"], "INTEGER", ["0"], 0)
    one("VARCHAR", ["NULL"], "VARCHAR", ["'None'"], 0)
    one("VARCHAR", ["''"], "VARCHAR", ["NULL"], 0)


def test_case_and_trailing_space() -> None:
    one("VARCHAR", ["'Abc'"], "VARCHAR", ["'abc'"], 0)
    one("VARCHAR", ["'abc'"], "VARCHAR", ["'abc '"], 0)


def test_empty_vs_empty() -> None:
    one("INTEGER", [], "INTEGER", [], 1)


def test_empty_gold_vs_one_row_prediction() -> None:
    one("INTEGER", [], "INTEGER", ["1"], 0)


def test_prediction_object_is_a_view() -> None:
    check(1, ABC, ABC.replace("CREATE TABLE t", "CREATE TABLE base") + "; CREATE VIEW t AS SELECT * FROM base")


def test_prediction_table_only_in_another_schema() -> None:
    check(0, ABC, "CREATE SCHEMA other; " + ABC.replace("CREATE TABLE t", "CREATE TABLE other.t"))


def test_table_name_differs_only_in_case() -> None:
    check(1, ABC, ABC.replace("CREATE TABLE t", 'CREATE TABLE "T"'))


def test_list_column_identical_never_matches() -> None:
    sql = "CREATE TABLE t AS SELECT * FROM (VALUES ([1, 2]), ([3, 4])) v(c)"
    check(0, sql, sql)


def test_struct_column_identical_matches() -> None:
    sql = "CREATE TABLE t AS SELECT * FROM (VALUES ({'a': 1}), ({'a': 2})) v(c)"
    check(1, sql, sql)


def test_uuid_vs_varchar_same_text() -> None:
    u = "'9b6a0f5e-0000-4000-8000-000000000000'"
    one("UUID", [u], "VARCHAR", [u], 0)


def test_ignore_order_false_with_reordered_rows() -> None:
    pred = "CREATE TABLE t AS SELECT * FROM (VALUES (3, 'z', 3.5), (1, 'x', 1.5), (2, 'y', 2.5)) v(a, b, c)"
    check(0, ABC, pred, ignore_order=False)

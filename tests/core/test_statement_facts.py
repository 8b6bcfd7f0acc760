"""The facts a completion statement states (core.statement_facts): their words, their JSON round trip, and
the check that a table contradicts them, on tables written here as Python rows."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from dbt_harvest.core.statement_facts import (
    ColumnFact,
    Observed,
    TableFacts,
    cell,
    cells_match,
    contradictions,
    render,
    type_family,
)

FACTS = TableFacts(
    table="guide_summary",
    model="guide_summary",
    rows=3,
    grain=("guide_id",),
    columns=(
        ColumnFact("guide_id", "integer", False),
        ColumnFact("full_name", "text", False),
        ColumnFact("revenue", "number", True),
    ),
    examples=(("2", "Bram Olsen", None), ("3", "Chiara Conti", "12.5")),
    accepted=(("full_name", ("Ana Ruiz", "Bram Olsen", "Chiara Conti")),),
)
TYPES = {"guide_id": "INTEGER", "full_name": "VARCHAR", "revenue": "DOUBLE"}
NAMES = ("guide_id", "full_name", "revenue")
GOLD = [(1, "Ana Ruiz", 4.0), (2, "Bram Olsen", None), (3, "Chiara Conti", 12.5)]


def _table(rows: list[tuple[object, ...]], types: dict[str, str] = TYPES, names: tuple[str, ...] = NAMES) -> Observed:
    return Observed(types=types, names=names, rows=rows)


def test_the_gold_satisfies_its_own_facts_and_floats_match_within_the_scorer_tolerance() -> None:
    assert contradictions(FACTS, _table(GOLD)) == ()
    nudged = [(1, "Ana Ruiz", 4.0), (2, "Bram Olsen", None), (3, "Chiara Conti", 12.504)]
    assert contradictions(FACTS, _table(nudged)) == ()


@pytest.mark.parametrize(
    ("rows", "types", "expected"),
    [
        (GOLD[:2], TYPES, "2 rows (stated: 3)"),  # an inner join that drops a parent
        ([*GOLD, (4, "Ana Ruiz", 1.0)], TYPES, "4 rows (stated: 3)"),
        ([(1, "Ana Ruiz", 4.0), (1, "Bram Olsen", None), (3, "Chiara Conti", 12.5)], TYPES, "rows share guide_id"),
        ([(1, "Ana Ruiz", 4.0), (2, "Bram Olsen", 0.0), (3, "Chiara Conti", 12.5)], TYPES, "has no nulls"),
        (GOLD, {**TYPES, "revenue": "VARCHAR"}, "`revenue` is text (stated: number)"),
        ([(1, "Ana Ruiz", 4.0), (2, "Bram Olsen", None), (3, "Chiara Conti", 13.0)], TYPES, "example row (3"),
        ([(1, "Ana Ruiz", 4.0), (2, "Olsen, Bram", None), (3, "Chiara Conti", 12.5)], TYPES, "outside"),
    ],
)
def test_each_kind_of_fact_is_contradicted_by_a_table_that_breaks_it(
    rows: list[tuple[object, ...]], types: dict[str, str], expected: str
) -> None:
    found = contradictions(FACTS, _table(rows, types))
    assert any(expected in line for line in found), found


def test_a_missing_table_or_column_contradicts() -> None:
    assert contradictions(FACTS, None) == ("`guide_summary` is absent (stated: 3 rows)",)
    without = [(r[0], r[1]) for r in GOLD]
    found = contradictions(FACTS, _table(without, {"guide_id": "INTEGER", "full_name": "VARCHAR"}, NAMES[:2]))
    assert "no column `revenue`" in found


def test_the_words_state_every_fact_and_round_trip_through_json() -> None:
    text = render(FACTS)
    for line in (
        "It has exactly 3 rows.",
        "No two rows share `guide_id`: one row per `guide_id`.",
        "`guide_id`: an integer, never null.",
        "`revenue`: a number, some rows hold null.",
        "`full_name` only holds 'Ana Ruiz', 'Bram Olsen', 'Chiara Conti'.",
        "| guide_id | full_name | revenue |",
        "| 2 | Bram Olsen | null |",
    ):
        assert line in text, text
    assert TableFacts.from_dict(FACTS.to_dict()) == FACTS
    many = TableFacts("t", "t", 1, ("a", "b"), (ColumnFact("a", "integer", False),), ())
    assert "No two rows share the combination of `a`, `b`." in render(many)


def test_values_are_written_and_compared_as_a_person_reads_them() -> None:
    assert [cell(v) for v in (None, True, 3, 2.50, decimal.Decimal("1.23456"), -0.0)] == [
        None,
        "true",
        "3",
        "2.5",
        "1.2346",
        "0",
    ]
    assert cell(dt.date(2024, 3, 1)) == "2024-03-01" and cell(dt.datetime(2024, 3, 1, 8)) == "2024-03-01 08:00:00"
    assert cells_match("2.5", 2.5049) and not cells_match("2.5", 2.52) and not cells_match(None, 0)
    assert cells_match("Bram Olsen", "Bram Olsen") and not cells_match("Bram Olsen", "Olsen Bram")
    assert [
        type_family(t) for t in ("BIGINT", "HUGEINT", "DECIMAL(18,3)", "VARCHAR", "DATE", "TIMESTAMP WITH TIME ZONE")
    ] == [
        "integer",
        "integer",
        "number",
        "text",
        "date",
        "timestamp",
    ]

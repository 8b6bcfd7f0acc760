"""Template problem statements: the symptom named precisely, openings that follow it, no leaks, and the
template's fixed phrases derived from its own format strings (what the contamination lint discounts)."""

from __future__ import annotations

import string

import pytest

from dbt_harvest.harvester.mint import statement as st
from dbt_harvest.harvester.mint.statement import Symptom, fixed_phrases, leaks, template_statement

LOANS = "One row per loan that actually took place. Cancelled checkouts are dropped."


@pytest.mark.parametrize(
    ("symptom", "says", "opening"),
    [
        (
            Symptom("fct_loans", LOANS, 69, 72, ()),
            "`fct_loans` (One row per loan that actually took place) has more rows than it should",
            st.OPENINGS["more_rows"],
        ),
        (
            Symptom("fct_loans", LOANS, 69, 60, ()),
            "`fct_loans` (One row per loan that actually took place) is missing rows",
            st.OPENINGS["fewer_rows"],
        ),
        (
            Symptom("fct_loans", "", 69, 69, (("fines_open", "Unpaid fines.", "higher"),)),
            "In `fct_loans`, `fines_open` (Unpaid fines) comes out too high.",
            st.OPENINGS["values"],
        ),
        (
            Symptom("fct_loans", "", 69, 69, (("is_late", "", "true_less"), ("due_date", "", "nulls_more"))),
            "`is_late` is true for fewer rows than it should be; `due_date` is empty (NULL) in rows where it should have a value",
            st.OPENINGS["values"],
        ),
    ],
)
def test_the_statement_names_the_table_the_columns_and_the_direction(symptom: Symptom, says: str, opening: str) -> None:
    text = template_statement([symptom])
    assert says in text and text.startswith(opening) and text.endswith(st.CLOSING)
    assert not leaks(text, ["coalesce(fines_open, 0)", "interval 60 day"], LOANS)


def test_openings_differ_by_symptom_so_statements_differ_beyond_their_names() -> None:
    kinds = {
        template_statement([Symptom("t", "", 5, rows, (("c", "", "lower"),) if rows == 5 else ())]).split(".")[0]
        for rows in (4, 5, 6)
    }
    assert len(kinds) == 3


def test_fixed_phrases_are_the_literal_text_of_the_template_strings() -> None:
    phrases = {" ".join(p) for p in fixed_phrases()}
    # every literal stretch of 3+ words of every template string is one, and nothing else is
    expected = set()
    for template in st._templates():
        for literal, *_ in string.Formatter().parse(template):
            words = [w.lower() for w in st._WORD.findall(literal)]
            if len(words) >= 3:
                expected.add(" ".join(words))
    assert phrases == expected and "is true for fewer rows than it should be" in phrases
    assert all(p != ("in",) for p in fixed_phrases())  # one-word stretches stay: they would cut descriptions apart
    text = template_statement([Symptom("fct_loans", LOANS, 69, 72, ())])
    flat = " ".join(w.lower() for w in st._WORD.findall(text))
    assert sum(p in flat for p in phrases) >= 3  # opening, row sentence and closing are all template text

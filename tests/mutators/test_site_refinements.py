"""Site-level refinements: time-window effects follow the moved bound; sibling swaps use real names."""

from __future__ import annotations

import pytest

from dbt_harvest.mutators import candidates


@pytest.mark.parametrize(
    "condition, operator, effect",
    [
        ("ordered_at >= current_date - interval 90 day", "time.interval_amount", "more_rows"),
        ("ordered_at >= current_date - interval 90 day", "time.interval_unit", "more_rows"),
        ("ordered_at >= current_date - interval 90 day", "time.shift_anchor", "more_rows"),
        ("ordered_at < current_date - interval 90 day", "time.interval_amount", "fewer_rows"),
        ("current_date - interval 30 day <= ordered_at", "time.interval_amount", "more_rows"),
        ("ordered_at >= current_date + interval 2 day", "time.interval_amount", "fewer_rows"),
        ("ordered_at < current_date", "time.shift_anchor", "fewer_rows"),
    ],
)
def test_window_operators_in_filters_report_the_row_effect(condition: str, operator: str, effect: str) -> None:
    text = f"select order_id from {{{{ ref('orders') }}}}\nwhere {condition}\n"
    found = [m for m in candidates(text, ["time"]) if m.operator == operator]
    assert found, [m.operator for m in candidates(text, ["time"])]
    assert found[0].effect == effect


def test_in_a_projection_the_operator_keeps_its_declared_effect() -> None:
    text = "select order_id, current_date - interval 90 day as horizon from {{ ref('orders') }}\n"
    found = [m for m in candidates(text, ["time"]) if m.operator == "time.interval_amount"]
    assert found and found[0].effect == "changed_values"


def test_sibling_swaps_never_pick_a_jinja_placeholder() -> None:
    text = "select orders.{{ method }}_amount, orders.gift_amount, orders.credit_amount from {{ ref('orders') }} as orders\n"
    swaps = [m for m in candidates(text, ["values"]) if m.operator == "values.swap_sibling_column"]
    assert swaps
    for m in swaps:
        column = m.edit.replacement.split()[0]  # "credit_amount as gift_amount": a bare projection keeps its name
        assert "____" not in m.edit.replacement and column in text


def test_column_swaps_keep_the_output_name_and_leave_calendar_parts_alone() -> None:
    text = (
        "select f.fiscal_week_of_year, d.date_day, o.created_at, o.shipped_at\n"
        "from {{ ref('d') }} as d join {{ ref('f') }} as f on f.date_day = d.date_day\n"
        "join {{ ref('o') }} as o on o.created_at >= d.date_day\n"
    )
    swaps = [m for m in candidates(text, ["time"]) if m.operator == "time.swap_timestamp_columns"]
    replaced = {text[m.edit.start : m.edit.end]: m.edit.replacement for m in swaps}
    assert "fiscal_week_of_year" not in replaced  # an integer calendar part is no timestamp
    projected = [m for m in swaps if m.edit.start < text.index("\n")]
    assert {m.edit.replacement for m in projected} == {"shipped_at as created_at", "created_at as shipped_at"}
    # in a join condition the column is no output: no alias
    assert all(" as " not in m.edit.replacement for m in swaps if m.edit.start > text.index("\n"))

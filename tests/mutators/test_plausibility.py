"""Sites are live code and wrong repairs are edits a person fixing the symptom would make.

Dead code (constant predicates, a SELECT that can return no row) is never a site, although the
operators themselves find sites there (asserted, so these tests fail without the rule); implausible
wrong repairs (`avg(order_date)`, `100 / amount`) are not offered; every wrong repair says what it tried.
"""

from __future__ import annotations

from dbt_harvest.mutators import REGISTRY, WrongRepair, candidates, mask_file
from dbt_harvest.mutators.deadcode import dead_regions

PLACEHOLDER = """with source as (select * from {{ ref('raw_orders') }}),
dummy as (select 1 as one),
disabled as (
    select cast(null as integer) as order_id, cast(null as varchar) as status
    from dummy
    where 1 = 0
),
kept as (
    select order_id, status from source
    where status = 'placed' and 1 = 1 and true and {{ var('orders_enabled') }} = 1
)
select * from kept
union all
select * from disabled
"""


def _edits(text: str, op_id: str) -> list[str]:
    return [m.edit.apply(text) for m in candidates(text) if m.operator == op_id]


def test_operators_do_find_sites_in_dead_code() -> None:
    # the raw operators see the placeholder: the filter below is what keeps them out
    parsed = mask_file(PLACEHOLDER)
    flips = list(REGISTRY["filter.flip_equality"].sites(parsed))
    assert any(PLACEHOLDER[s.start - 2 : s.end + 2] == "1 = 0" for s in flips)
    assert any(s.replacement == "not (1 = 0)" for s in REGISTRY["filter.negate_conjunct"].sites(parsed))


def test_constant_predicates_and_dead_selects_are_not_sites() -> None:
    mutants = [m.edit.apply(PLACEHOLDER) for m in candidates(PLACEHOLDER)]
    assert mutants, "the live filter on status still has sites"
    for mutant in mutants:
        assert "where 1 = 0" in mutant, "the placeholder's WHERE was touched"
        assert "1 = 1 and true and" in mutant, "a constant conjunct was touched"
        assert "{{ var('orders_enabled') }} = 1" in mutant
    # the live rule is a site: dropping, negating and changing `status = 'placed'`
    assert any("status = 'placed'" not in m for m in mutants)
    whys = {r.why for r in dead_regions(mask_file(PLACEHOLDER))}
    assert whys == {"constant predicate", "SELECT whose WHERE is always false"}


def test_a_literal_operand_is_not_a_constant_predicate() -> None:
    text = "select * from {{ ref('a') }} where (is_test or is_internal) is not true and amount > 0\n"
    ops = {m.operator for m in candidates(text)}
    assert {"null.is_not_true_to_not", "filter.flip_strictness", "filter.change_literal"} <= ops


def test_limit_zero_select_is_dead() -> None:
    text = "select order_id, amount / 100 as dollars from {{ ref('a') }} where amount > 0 limit 0\n"
    assert candidates(text) == []


def test_every_wrong_repair_says_what_it_tried() -> None:
    text = (
        "select o.customer_id, sum(o.amount) as total, max(o.ordered_at) as last_order,\n"
        "  o.amount - o.discount as net, o.amount / 100 as dollars\n"
        "from {{ ref('orders') }} o left join {{ ref('customers') }} c on o.customer_id = c.id\n"
        "where o.status = 'placed' and o.amount > 10 and o.region in ('eu', 'us')\n"
        "group by 1, 4, 5\n"
    )
    found = candidates(text)
    assert found
    for mutation in found:
        for wrong in mutation.wrong_repairs:
            assert isinstance(wrong, WrongRepair) and wrong.intent, (mutation.operator, wrong)


def test_no_average_of_dates_and_no_operands_swapped_around_a_constant() -> None:
    text = (
        "select customer_id, max(ordered_at) as last_order, max(amount) as biggest,\n"
        "  amount / 100 as dollars, amount - discount as net\n"
        "from {{ ref('orders') }} group by 1, 4, 5\n"
    )
    by_site = {(m.operator, text[m.edit.start : m.edit.end + 12]): m for m in candidates(text)}
    dates = next(m for (op, at), m in by_site.items() if op == "grain.swap_aggregate" and "ordered_at" in at)
    assert dates.wrong_repairs == ()  # min(ordered_at) -> avg(ordered_at) is not a repair
    amounts = next(m for (op, at), m in by_site.items() if op == "grain.swap_aggregate" and "amount)" in at)
    # another aggregate, or the right one over another money column (not over a date or a name)
    assert [w.replacement for w in amounts.wrong_repairs] == ["avg", "max(discount)"]
    division = next(
        m
        for m in candidates(text)
        if m.operator == "values.swap_arithmetic"
        and text[m.edit.start - 7 : m.edit.start] == "amount "
        and text[m.edit.start] == "/"
    )
    assert division.wrong_repairs == ()  # never `100 / amount`
    difference = next(
        m
        for m in candidates(text)
        if m.operator == "values.swap_arithmetic"
        and text[m.edit.start - 7 : m.edit.start] == "amount "
        and m is not division
        and text[m.edit.start : m.edit.end] == "-"
    )
    # (the operator restored over another money column would be `amount - amount` here: not offered)
    assert [w.apply(difference.edit.apply(text)).count("discount - amount") for w in difference.wrong_repairs] == [1]


def test_no_column_swapped_in_against_a_constant() -> None:
    # dbt-duckdb-analytics-kit kept `quantity * unit_price * (1 - unit_price)` as the wrong repair of
    # `(1 + discount)`: a rate taken from 1 is not swapped for a money column
    text = (
        "select quantity * unit_price * (1 - discount) as net, quantity * unit_price - fee as t from {{ ref('i') }}\n"
    )
    wrongs = {}
    for m in candidates(text, ["values"]):
        if m.operator == "values.swap_arithmetic" and text[m.edit.start : m.edit.end] == "-":
            broken = m.edit.apply(text)
            wrongs[text[m.edit.end :].split()[0]] = [w.apply(broken) for w in m.wrong_repairs]
    assert wrongs["discount)"] == []  # not (1 - unit_price), not (1 - fee)
    # a column against a column still may: the fee restored as another money column of the file
    assert any("quantity * unit_price - discount as t" in t for t in wrongs["fee"]), wrongs["fee"]


def test_a_dropped_filter_is_restored_wrong_not_weakened() -> None:
    text = (
        "select * from {{ ref('orders') }}\n"
        "where amount > 10 and region in ('eu', 'us', 'apac') and status = 'placed'\n"
        "  and status != 'returned'\n"
    )
    wrongs = {}
    for m in candidates(text):
        if m.operator == "filter.drop_conjunct":
            dropped = text[m.edit.start : m.edit.end].replace("and", " ").split()[0]
            wrongs[dropped] = [(w.apply(m.edit.apply(text)), w.intent) for w in m.wrong_repairs]
    assert any("amount >= 10" in t and "boundary" in why for t, why in wrongs["amount"])
    assert any("('eu', 'us')" in t and "missing" in why for t, why in wrongs["region"])
    assert any("status = 'returned'" in t and "another value" in why for t, why in wrongs["status"])


def test_a_null_check_flipped_in_a_filter_changes_rows_either_way() -> None:
    from dbt_harvest.harvester.mint.checks import check_effect
    from dbt_harvest.harvester.mint.observe import Observation

    in_filter = "select id from {{ ref('issues') }} where closed_at is null and repo_id > 1\n"
    in_projection = "select id, closed_at is null as is_open from {{ ref('issues') }}\n"
    assert [m.effect for m in candidates(in_filter, ["null"])] == ["changed_rows"]
    assert [m.effect for m in candidates(in_projection, ["null"])] == ["changed_values"]
    # open issues become closed ones: the count may go up or down (measured on dbt_github: 386 -> 290, -> 437)
    for rows in (290, 437):
        obs = Observation({"main.t": (386, rows)}, {}, "main.t", (386, rows), 10)
        assert check_effect(obs, "changed_rows").ok and not check_effect(obs, "changed_values").ok

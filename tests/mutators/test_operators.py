"""Every operator, on original dbt-style models: the exact edit, and the invariants every site keeps."""

from __future__ import annotations

import functools

import pytest
from models import ALL_MODELS

from dbt_harvest.mutators import EFFECTS, FAMILIES, REGISTRY, Edit, Mutation, candidates, mask_file

# (operator, model, unique text before, the same text after the mutation)
EXACT: list[tuple[str, str, str, str]] = [
    ("filter.drop_conjunct", "orders", "where status = 'success'\n      and amount > 0", "where status = 'success'"),
    ("filter.negate_conjunct", "orders", "and amount > 0", "and not (amount > 0)"),
    ("filter.change_literal", "orders", "where status = 'success'", "where status = 'Success'"),
    ("filter.drop_in_element", "orders", "('card', 'bank_transfer', 'coupon')", "('card', 'coupon')"),
    (
        "filter.and_to_or",
        "daily",
        "user_id = u.user_id\n       and u.region",
        "user_id = u.user_id\n       or u.region",
    ),
    ("filter.or_to_and", "orders", "(o.is_test or o.is_internal)", "(o.is_test and o.is_internal)"),
    ("filter.flip_strictness", "orders", "amount > 0", "amount >= 0"),
    ("filter.flip_equality", "incremental", "e.event_type != 'heartbeat'", "e.event_type = 'heartbeat'"),
    ("null.is_not_true_to_not", "orders", "c.is_deleted is not true", "not c.is_deleted"),
    (
        "null.distinct_from_to_neq",
        "orders",
        "o.shipped_at is distinct from o.cancelled_at",
        "o.shipped_at <> o.cancelled_at",
    ),
    ("null.drop_coalesce_bool", "orders", "coalesce(o.is_gift, false) as is_gift", "o.is_gift as is_gift"),
    ("null.flip_is_null", "orders", "c.email is not null", "c.email is null"),
    (
        "null.drop_coalesce_default",
        "orders",
        "p.amount - coalesce(o.discount_amount, 0)",
        "p.amount - o.discount_amount",
    ),
    ("null.count_star_to_column", "daily", "count(*) as n_sessions", "count(user_id) as n_sessions"),
    ("null.count_column_to_star", "incremental", "count(e.event_id) >= 2", "count(*) >= 2"),
    ("join.left_to_inner", "orders", "left join payments", "inner join payments"),
    ("join.inner_to_left", "orders", "inner join customers", "left join customers"),
    ("join.drop_on_key", "orders", "p.order_id\n   and o.store_id = p.store_id", "p.order_id"),
    (
        "join.on_to_where",
        "orders",
        "\n   and p.n_payments > 0\ninner join customers as cu on o.customer_id = cu.customer_id\nwhere o.ordered_at",
        "\ninner join customers as cu on o.customer_id = cu.customer_id\nwhere p.n_payments > 0 and o.ordered_at",
    ),
    ("grain.count_distinct_to_count", "orders", "count(distinct payment_method)", "count(payment_method)"),
    ("grain.swap_aggregate", "incremental", "max(e.occurred_at) as last_seen_at", "min(e.occurred_at) as last_seen_at"),
    ("grain.drop_partition_key", "orders", "partition by o.customer_id, o.store_id", "partition by o.customer_id"),
    ("grain.flip_dedup_order", "orders", "order by o.ordered_at desc", "order by o.ordered_at asc"),
    ("grain.drop_select_distinct", "daily", "select distinct\n", "select \n"),
    ("grain.union_to_union_all", "incremental", "\nunion\n", "\nunion all\n"),
    ("grain.union_all_to_union", "daily", "union all", "union"),
    ("time.interval_amount", "orders", "interval '30 days'", "interval '31 days'"),
    ("time.interval_unit", "orders", "interval '30 days'", "interval '30 weeks'"),
    ("time.date_trunc_unit", "incremental", "date_trunc('day', e.occurred_at)", "date_trunc('week', e.occurred_at)"),
    ("time.boundary", "orders", "o.ordered_at >= current_date", "o.ordered_at > current_date"),
    ("time.shift_anchor", "orders", ">= current_date -", ">= (current_date - interval '1 day') -"),
    ("time.swap_timestamp_columns", "daily", "min(started_at)", "min(started_at)"),  # unqualified: no site
    (
        "values.swap_then_branches",
        "orders",
        "then 'refund'\n        when o.status = 'shipped' then 'done'",
        "then 'done'\n        when o.status = 'shipped' then 'refund'",
    ),
    ("values.drop_else", "orders", "'done'\n        else 'open'\n    end", "'done'\n    end"),
    ("values.swap_arithmetic", "incremental", "avg(e.duration_ms) / 1000", "avg(e.duration_ms) * 1000"),
    ("values.swap_sibling_column", "orders", "    o.customer_id,\n    cu.", "    o.order_id as customer_id,\n    cu."),
]
# the swap_timestamp_columns case above is replaced by a qualified one:
EXACT[31] = (
    "time.swap_timestamp_columns",
    "orders",
    "c.created_at, c.updated_at",
    "c.updated_at as created_at, c.updated_at",
)  # a bare projection keeps its output name


@functools.cache
def _mutations(model: str) -> tuple[Mutation, ...]:
    return tuple(candidates(ALL_MODELS[model]))


def test_catalog_shape() -> None:
    assert len(REGISTRY) >= 20
    assert {op.family for op in REGISTRY.values()} == set(FAMILIES)
    for op_id, op in REGISTRY.items():
        assert op.id == op_id and op.effect in EFFECTS
        assert op.explanation and "\n" not in op.explanation


def test_every_operator_has_an_exact_case() -> None:
    assert {case[0] for case in EXACT} == set(REGISTRY)


@pytest.mark.parametrize(("op_id", "model", "before", "after"), EXACT, ids=[c[0] for c in EXACT])
def test_exact_edit(op_id: str, model: str, before: str, after: str) -> None:
    text = ALL_MODELS[model]
    assert text.count(before) == 1, "fixture text must be unique"
    expected = text.replace(before, after, 1)
    mutants = {m.edit.apply(text) for m in _mutations(model) if m.operator == op_id}
    assert expected in mutants, f"{op_id} did not produce the expected mutant; got {len(mutants)} others"


def _all() -> list[tuple[str, Mutation]]:
    return [(name, m) for name in ALL_MODELS for m in _mutations(name)]


@pytest.mark.parametrize("model", sorted(ALL_MODELS))
def test_invariants_of_every_site(model: str) -> None:
    text = ALL_MODELS[model]
    masked = mask_file(text)
    assert masked.parsed, masked.reason
    mutations = _mutations(model)
    assert mutations
    for m in mutations:
        edit = m.edit
        mutant = edit.apply(text)
        assert mutant != text
        # only the span changed
        assert mutant[: edit.start] == text[: edit.start]
        assert mutant[edit.start + len(edit.replacement) :] == text[edit.end :]
        # the inverse restores the original byte for byte
        assert edit.inverse(text).apply(mutant) == text
        # the mutant still parses
        assert mask_file(mutant).parsed, (m.operator, mutant)
        # never inside an off-limits region, never through a Jinja tag
        assert not any(r.overlaps(edit.start, edit.end) for r in masked.off_limits), m.description
        assert masked.editable(edit.start, edit.end)
        for wrong in m.wrong_repairs:
            fixed = wrong.apply(mutant)
            assert fixed != text and fixed != mutant, (m.operator, wrong)
        assert m.family == REGISTRY[m.operator].family
        # a site may refine its operator's effect (a moved time bound says which way rows change; a null
        # check flipped inside a filter changes which rows are kept)
        assert (
            m.effect == REGISTRY[m.operator].effect
            or m.operator.startswith("time.")
            or (m.operator == "null.flip_is_null" and m.effect == "changed_rows")
        )
        assert m.effect in EFFECTS


def test_operator_api_matches_candidates() -> None:
    text = ALL_MODELS["orders"]
    parsed = mask_file(text)
    op = REGISTRY["join.drop_on_key"]
    sites = op.sites(parsed)
    assert len(sites) == 2
    edits = [op.apply(s) for s in sites]
    assert all(isinstance(e, Edit) for e in edits)
    from_candidates = [m.edit for m in _mutations("orders") if m.operator == op.id]
    assert edits == from_candidates
    for site in sites:
        repairs = op.wrong_repairs(site)
        # DISTINCT over the fan-out, the key restored against another key column of the joined
        # relation, or the join's type changed instead of its key restored
        assert [r.intent for r in repairs] == [
            "remove the duplicates with DISTINCT instead of restoring the join key",
            "restore the join key against the wrong column",
            "change the join type instead of restoring the key",
        ]
        assert repairs[0].replacement == " distinct" and repairs[2].replacement == "inner join"


def test_wrong_repairs_are_plausible_edits() -> None:
    text = ALL_MODELS["orders"]
    by_op = {m.operator: m for m in _mutations("orders")}
    m = by_op["null.is_not_true_to_not"]
    mutant = m.edit.apply(text)
    repaired = {w.apply(mutant) for w in m.wrong_repairs}
    assert any("not coalesce(" in r for r in repaired)
    drop = next(
        x
        for x in _mutations("orders")
        if x.operator == "filter.drop_conjunct" and text[x.edit.start : x.edit.end] == "status = 'success'\n      and "
    )
    # the rule restored with another value the file compares `status` with (the bare null check is
    # offered only when nothing closer to the rule exists)
    assert [(w.replacement, w.intent) for w in drop.wrong_repairs] == [
        ("status = 'returned'\n      and ", "restore the filter with another value"),
        ("status in ('success', 'returned')\n      and ", "restore the filter with one value too many"),
    ]


def test_no_site_inside_jinja_blocks() -> None:
    text = ALL_MODELS["incremental"]
    block_start = text.index("{% if is_incremental() %}")
    block_end = text.index("{% endif %}") + len("{% endif %}")
    for m in _mutations("incremental"):
        assert m.edit.end <= block_start or m.edit.start >= block_end
    daily = ALL_MODELS["daily"]
    loop = (daily.index("{% for"), daily.index("{% endfor %}"))
    assert not [m for m in _mutations("daily") if loop[0] <= m.edit.start < loop[1]]


def test_coalesce_false_in_positive_where_is_not_a_site() -> None:
    text = "select * from {{ ref('a') }} where coalesce(is_active, false) and coalesce(is_paid, true)\n"
    edits = [m.edit.apply(text) for m in candidates(text, ["null"]) if m.operator == "null.drop_coalesce_bool"]
    assert edits == ["select * from {{ ref('a') }} where coalesce(is_active, false) and is_paid\n"]


def test_families_filter() -> None:
    got = candidates(ALL_MODELS["orders"], ["join"])
    assert got and {m.family for m in got} == {"join"}
    with pytest.raises(ValueError, match="unknown mutator families"):
        candidates(ALL_MODELS["orders"], ["joins"])


def test_unparsable_model_has_no_candidates() -> None:
    assert candidates("select from where (((") == []

"""Jinja masking: same length, placeholders sqlglot parses in place, off-limits regions, failures."""

from __future__ import annotations

from models import ALL_MODELS, DAILY, INCREMENTAL

from dbt_harvest.mutators import mask_file
from dbt_harvest.mutators.jinja import match_blocks, scan_tags


def test_masked_text_has_the_files_length_and_keeps_sql() -> None:
    for text in ALL_MODELS.values():
        m = mask_file(text)
        assert m.parsed, m.reason
        assert len(m.masked) == len(text)
        assert m.masked.count("\n") == text.count("\n")
        assert "{{" not in m.masked and "{%" not in m.masked


def test_placeholders_name_relations_and_blank_statements() -> None:
    text = "{{ config(materialized='view') }}\nselect a from {{ ref('stg_orders') }} where b = {{ var('x') }}\n"
    m = mask_file(text)
    assert m.parsed and m.dialect == "duckdb"
    assert m.masked.startswith(" " * len("{{ config(materialized='view') }}") + "\n")
    assert "from stg_orders_" in m.masked
    ref = text.index("{{ ref")
    assert m.masked[ref : ref + len("{{ ref('stg_orders') }}")] == "stg_orders" + "_" * 13
    assert [r.why for r in m.off_limits] == ["config() block"]


def test_node_offsets_are_file_offsets() -> None:
    from sqlglot import exp

    m = mask_file(INCREMENTAL)
    for col in m.tree.find_all(exp.Column):
        span = m.span(col)
        assert span is not None and INCREMENTAL[span[0] : span[1]] == col.sql(dialect=m.dialect)


def test_if_and_for_blocks_are_off_limits() -> None:
    m = mask_file(DAILY)
    whys = {r.why for r in m.off_limits}
    assert {"inside {% for %} block", "config() block", "jinja statement {% set %}"} <= whys
    loop = next(r for r in m.off_limits if r.why == "inside {% for %} block")
    assert DAILY[loop.start :].startswith("{% for ch in channels %}")
    assert DAILY[: loop.end].endswith("{% endfor %}")
    assert not m.editable(loop.start + 5, loop.start + 6)


def test_an_edit_may_hold_a_whole_ref_but_not_cut_one() -> None:
    text = "select * from {{ ref('a') }} where x = 1\n"
    m = mask_file(text)
    tag = (text.index("{{"), text.index("}}") + 2)
    assert m.editable(tag[0], tag[1] + 3)
    assert not m.editable(tag[0] + 2, tag[1])


def test_else_branch_masked_so_the_file_parses() -> None:
    text = (
        "select\n{% if target.type == 'bigquery' %}\n  date_add(d, interval 1 day) as nxt\n"
        "{% else %}\n  dateadd(day, 1, d) as nxt\n{% endif %}\nfrom {{ ref('t') }}\n"
    )
    m = mask_file(text)
    assert m.parsed and m.policy == "first-branch"
    assert "dateadd" not in m.masked and "date_add" in m.masked


def test_type_macros_and_clause_macros() -> None:
    text = "select cast(a as {{ dbt.type_timestamp() }}) as a from {{ ref('x') }} {{ live_only() }} and not b\n"
    m = mask_file(text)
    assert m.parsed, m.reason
    assert any(r.why == "macro call live_only()" for r in m.off_limits)


def test_one_clause_macro_among_expression_macros_is_tried_alone_as_the_where() -> None:
    # rendering every macro call as a WHERE gives two WHEREs; rendering none leaves "from fields m__"
    text = (
        "with fields as (select {{ fill_columns(cols=get_cols()) }} from {{ ref('raw') }})\n"
        "select id, amount from fields\n{{ live_only() }}\nand not coalesce(is_deleted, false)\n"
    )
    m = mask_file(text)
    assert m.parsed, m.reason
    assert m.policy == f"first-branch/where-macro@{text.index('{{ live_only')}"
    assert len(m.masked) == len(text) and m.masked.count("where") == 1


def test_unparsable_and_broken_files_say_why() -> None:
    bad = mask_file("select a from from {{ ref('t') }} where (\n")
    assert not bad.parsed and bad.reason
    whole = mask_file("{{ latest_record(source('a', 'b')) }}\nwhere not is_deleted\n")
    assert whole.parsed and whole.policy == "first-branch/select-macros"
    broken = mask_file("select {{ ref('a' from t")
    assert not broken.parsed and broken.reason.startswith("jinja:")
    only_jinja = mask_file("{{ config(materialized='ephemeral') }}\n")
    assert not only_jinja.parsed and only_jinja.reason == "no SQL outside Jinja"


def test_blocks_pair_up() -> None:
    tags = scan_tags(DAILY)
    blocks = match_blocks(tags)
    assert [b.word for b in blocks] == ["for"]
    assert scan_tags("select '}}' as x") == []
    assert [t.body for t in scan_tags("{{ ref('a}}b') }}")] == ["ref('a}}b')"]


def test_a_file_saved_with_a_byte_order_mark_parses_and_its_mutants_keep_the_mark() -> None:
    from dbt_harvest.mutators import candidates

    for text in ALL_MODELS.values():
        marked = "\ufeff" + text
        m = mask_file(marked)
        assert m.parsed, m.reason
        assert len(m.masked) == len(marked) and m.masked[0] == " "
        plain, with_mark = candidates(text), candidates(marked)
        assert [c.operator for c in with_mark] == [c.operator for c in plain]
        for c in with_mark:
            assert c.edit.start >= 1 and c.edit.apply(marked).startswith("\ufeff")  # after the mark: nothing shifts

"""The static equivalence filter and transplanting raw edits onto compiled SQL."""

from __future__ import annotations

from models import INCREMENTAL

from dbt_harvest.mutators import Edit, candidates, is_equivalent, transplant


def test_equivalence_catches_restatements_only() -> None:
    base = "select * from {{ ref('t') }} where a = 1 and b > 2\n"
    assert is_equivalent(base, "select * from {{ ref('t') }} where 1 = a and b > 2\n")
    assert is_equivalent(base, "select * from {{ ref('t') }} where b > 2 and a = 1 and true\n")
    assert not is_equivalent(base, "select * from {{ ref('t') }} where a = 1 and b >= 2\n")
    assert not is_equivalent(base, "select * from where (((")


def test_candidates_drop_equivalent_mutants() -> None:
    # `x > 0 and x > 0`: dropping either copy changes nothing
    text = "select * from {{ ref('t') }} where x > 0 and x > 0\n"
    assert not [m for m in candidates(text, ["filter"]) if m.operator == "filter.drop_conjunct"]


COMPILED_INCREMENTAL = (
    INCREMENTAL.replace(
        "{{\n    config(\n        materialized='incremental',\n        unique_key='event_id'\n    )\n}}", ""
    )
    .replace("{% set lookback_days = var('lookback_days', 3) %}", "")
    .replace("{{ ref('stg_events') }}", '"analytics"."main"."stg_events"')
    .replace(
        "{% if is_incremental() %}\n  and e.occurred_at > (select max(last_seen_at) from {{ this }})\n{% endif %}",
        "\n\n",
    )
    .replace("{{ ref('events_backfill') }}", '"analytics"."main"."events_backfill"')
    .rstrip("\n")
)


def test_transplant_every_candidate_onto_hand_compiled_sql() -> None:
    mapped = 0
    for m in candidates(INCREMENTAL):
        moved = transplant(m.edit, INCREMENTAL, COMPILED_INCREMENTAL)
        if moved is None:
            continue
        mapped += 1
        before = INCREMENTAL[m.edit.start : m.edit.end]
        assert COMPILED_INCREMENTAL[moved.start : moved.end] == before
        assert moved.replacement == m.edit.replacement
    assert mapped >= 15


def test_transplant_maps_rendered_tags_inside_the_span() -> None:
    raw = "select * from {{ ref('a') }} where x = 1 and y = {{ var('y') }}\n"
    compiled = 'select * from "db"."main"."a" where x = 1 and y = 42'
    start = raw.index(" and y")
    edit = Edit(start, raw.index("\n"), "")
    assert transplant(edit, raw, compiled) == Edit(compiled.index(" and y"), len(compiled), "")
    keep = Edit(start, raw.index("\n"), " or y = {{ var('y') }}")
    assert transplant(keep, raw, compiled) == Edit(compiled.index(" and y"), len(compiled), " or y = 42")


def test_transplant_refuses_ambiguity_and_cut_tags() -> None:
    raw = "select {{ a }} = {{ b }}\n"
    compiled = "select 1 = 1 = 1"  # which '=' is the raw one depends on what the tags rendered
    eq = raw.index("=")
    assert transplant(Edit(eq, eq + 1, "!="), raw, compiled) is None
    assert transplant(Edit(raw.index("{{ a") + 1, eq, ""), raw, compiled) is None


def test_transplant_with_whitespace_control() -> None:
    raw = "select a,\n    {%- if true %} b, {% endif -%}\n    c from t where c > 1\n"
    compiled = "select a, b, c from t where c > 1"
    start = raw.index(">")
    assert transplant(Edit(start, start + 1, ">="), raw, compiled) == Edit(
        compiled.index(">"), compiled.index(">") + 1, ">="
    )


def test_an_edit_spanning_more_jinja_tags_than_the_bound_is_not_placed() -> None:
    """A fix mined from history can rewrite a whole CTE of Jinja calls: each tag is a wildcard of the search,
    and over a long model the search backtracked for minutes; past MAX_INNER_TAGS it is not placed at all."""
    from dbt_harvest.mutators.transplanting import MAX_INNER_TAGS

    def model(n: int) -> tuple[str, str]:
        raw = "select\n" + "".join(f"    {{{{ col('c{i}') }}}} as c{i},\n" for i in range(n)) + "    1 as one\nfrom t\n"
        compiled = "select\n" + "".join(f"    c{i} as c{i},\n" for i in range(n)) + "    1 as one\nfrom t\n"
        return raw, compiled

    raw, compiled = model(MAX_INNER_TAGS)
    whole = Edit(raw.index("    {{"), raw.index("    1 as one"), "")
    assert transplant(whole, raw, compiled) == Edit(compiled.index("    c0"), compiled.index("    1 as one"), "")
    raw, compiled = model(MAX_INNER_TAGS + 1)
    assert transplant(Edit(raw.index("    {{"), raw.index("    1 as one"), ""), raw, compiled) is None

"""Distinguishing data on rows that reach the mutated model (issue 16), on the ``sensor_feed`` fixture: its
staging drops calibration runs (``where not coalesce(is_test, true)``) and the seed's first rows are
calibration runs, so a clone of the first row never reaches the mart; and its header names ``note`` twice
(dbt loads the second as ``note_2``), so rows enter the seed table by position.

Real dbt, DuckDB, git and sandbox.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures import fixture_repo

MART = "model.sensor_feed.sensor_summary"
STATUS = "model.sensor_feed.sensor_status"


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """sensor_feed pinned (built twice, sandboxed), the mart's count candidate and its proposal."""
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.augment.derive import propose
    from dbt_harvest.harvester.augment.run import lineage_of, read_seeds
    from dbt_harvest.harvester.mint.candidates import model_candidates
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.state import load_state
    from dbt_harvest.harvester.workspace import template
    from dbt_harvest.mutators import transplant
    from tests.conftest import use_env

    root = tmp_path_factory.mktemp("feed")
    repo = fixture_repo("sensor_feed", root / "repo")
    home, pins = root / "home", root / "pins"
    with use_env(home, pins):
        pin = add(f"{repo.path}@{repo.head}", AddOptions()).pin
        state = load_state(pin.id)
        nodes = models(state.manifest)
        tree = template(pin)
        seeds = read_seeds(tree, pin.project_dir, state.manifest)
        lineage = lineage_of(state.manifest, state.database)
        compiled = nodes[MART].compiled_code
        for cand in model_candidates(pin, nodes[MART], tree, ("null",), 0):
            placed = transplant(cand.mutation.edit, cand.original, compiled)
            if cand.mutation.operator == "null.count_column_to_star" and placed is not None:
                break
        else:
            raise AssertionError("no count(reading_value) -> count(*) candidate")
        mutated = placed.apply(compiled)
        proposal = propose(
            cand.key,
            cand.mutation.family,
            cand.mutation.operator,
            compiled[placed.start : placed.end],
            placed.replacement,
            compiled,
            mutated,
            tuple(seeds.values()),
            frozenset(),
            lambda *a: None,
            0,
            lineage,
        )
        status = nodes[STATUS].compiled_code
        flips = []
        for cand in model_candidates(pin, nodes[STATUS], tree, ("null",), 0):
            placed = transplant(cand.mutation.edit, cand.original, status)
            if cand.mutation.operator == "null.flip_is_null" and placed is not None:
                flips.append((cand, status[placed.start : placed.end], placed.replacement, placed.apply(status)))
    return {
        "pin": pin,
        "state": state,
        "nodes": nodes,
        "seeds": seeds,
        "proposal": proposal,
        "mutated": mutated,
        "flips": flips,
        "lineage": lineage,
        "root": root,
        "env": lambda: use_env(home, pins),
    }


def _screen(feed: dict[str, Any], proposal: Any, name: str, model: str = MART, mutated: str = "") -> bool:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import render
    from dbt_harvest.harvester.augment.run import screen_rows

    _, written = render(feed["seeds"], list(proposal.rows))
    with feed["env"]():
        return screen_rows(
            feed["pin"],
            feed["state"].manifest,
            feed["nodes"],
            feed["seeds"],
            written,
            model,
            mutated or feed["mutated"],
            feed["root"] / "screen" / name,
        )


def test_rows_enter_a_seed_whose_header_repeats_a_name_by_position(feed) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import retemplate

    # a NULL reading on a real (non-calibration) row: the mutant counts it, the original does not. Named
    # columns would repeat "note" in the INSERT (the table has note_2): the screen then saw nothing
    assert _screen(feed, retemplate(feed["proposal"], 2), "live") is True


def test_only_rows_that_reach_the_mart_are_templates(feed) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.run import reaching_templates

    with feed["env"]():
        reach = reaching_templates(
            feed["pin"],
            feed["state"].manifest,
            feed["nodes"],
            feed["seeds"],
            "sensor_readings",
            MART,
            feed["root"] / "reach",
        )
    # rows 0 and 1 are calibration runs: staging drops their twins, the mart never changes
    assert reach == (2, 3, 4)


def test_a_null_cloned_from_a_dropped_row_moves_to_a_row_that_reaches_the_mart(feed) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import render, retemplate

    proposal = feed["proposal"]
    # the derivation traces reading_value to the seed's value column and clones the first row
    assert proposal.row.seed == "sensor_readings" and proposal.row.values == (("value", ""),)
    assert proposal.row.template == 0 and _screen(feed, proposal, "dropped") is False
    moved = retemplate(proposal, 2)
    # the same NULL and the same twin (the count(distinct ...) wrong repair), cloned from a live reading
    assert moved.row.values == proposal.row.values and [r.template for r in moved.rows] == [2, 2]
    _, written = render(feed["seeds"], list(moved.rows))
    assert [values[3] for _, values in written] == ["false", "false"] and written[0][1][2] == ""
    assert _screen(feed, moved, "moved") is True


def test_a_change_masked_by_a_later_coalesce_is_seen_when_the_masking_columns_are_null(feed) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import propose, retemplate

    # flipping `reading_value is null` changes derived_status on every reading, but the mart reads it only
    # as coalesce(reviewed_status, derived_status) and every reading is reviewed: equivalent on the seeds
    assert feed["flips"], "no null.flip_is_null candidate in sensor_status"
    for cand, span, replacement, mutated in feed["flips"]:
        compiled = feed["nodes"][STATUS].compiled_code
        proposal = propose(
            cand.key,
            "null",
            cand.mutation.operator,
            span,
            replacement,
            compiled,
            mutated,
            tuple(feed["seeds"].values()),
            frozenset(),
            lambda *a: None,
            0,
            feed["lineage"],
        )
        # the masking column traced through staging (reviewed_status <- status), set NULL
        assert proposal.row.seed == "sensor_readings" and proposal.row.values == (("status", ""),)
        assert "derived_status" in proposal.condition
        assert _screen(feed, proposal, "", STATUS, compiled) is False  # no edit: nothing differs
        assert _screen(feed, retemplate(proposal, 2), f"flip-{cand.key}", STATUS, mutated) is True


def test_changed_projection_names_the_output_the_edit_changed() -> None:
    from dbt_harvest.harvester.augment.derive import changed_projection

    original = (
        "with c as (select id, case when v is null then 'a' else 'b' end as kind from t) "
        "select id, coalesce(label, kind) as shown from c"
    )
    assert changed_projection(original, original.replace("v is null", "v is not null")) == "kind"
    assert changed_projection(original, original) is None


def test_a_probe_reruns_the_compared_models_and_only_the_ancestors_its_rows_reach() -> None:
    """The cost bound of a probe (``augment/reach.py``): rows in one seed re-run the mutated model, its
    descendants, and those of their ancestors the seed feeds, directly or through a source naming its
    table; a parentless model (reads a table by name) counts as reached."""
    from dbt_harvest.harvester.augment.reach import models_to_rerun, seed_feeds
    from dbt_harvest.harvester.mint.lineage import ModelNode

    def node(uid: str, *parents: str) -> ModelNode:
        return ModelNode(uid, uid.split(".")[-1], "", "", "main", uid, "table", "sql", "", "select 1", "", {}, parents)

    manifest = {
        "nodes": {
            "seed.p.orders_data": {
                "resource_type": "seed",
                "name": "orders_data",
                "relation_name": '"db"."main"."orders_data"',
            },
            "seed.p.users_data": {
                "resource_type": "seed",
                "name": "users_data",
                "relation_name": '"db"."main"."users_data"',
            },
        },
        "sources": {"source.p.raw.users": {"relation_name": '"DB"."main"."USERS_DATA"'}},
    }
    feeds = seed_feeds(manifest)
    assert feeds == {
        "seed.p.orders_data": "orders_data",
        "seed.p.users_data": "users_data",
        "source.p.raw.users": "users_data",
    }
    nodes = {
        n.unique_id: n
        for n in (
            node("model.p.stg_orders", "seed.p.orders_data"),
            node("model.p.stg_users", "source.p.raw.users"),
            node("model.p.by_name"),  # no parent: reads a table by name
            node("model.p.orders_enriched", "model.p.stg_orders", "model.p.stg_users"),
            node("model.p.mart", "model.p.orders_enriched", "model.p.by_name"),
            node("model.p.report", "model.p.mart", "model.p.stg_users"),
            node("model.p.unrelated", "model.p.stg_orders"),
        )
    }
    assert models_to_rerun(nodes, feeds, ["users_data"], "model.p.mart") == {
        "model.p.mart",
        "model.p.report",
        "model.p.stg_users",
        "model.p.orders_enriched",
        "model.p.by_name",
    }
    assert models_to_rerun(nodes, feeds, ["orders_data"], "model.p.mart") == {
        "model.p.mart",
        "model.p.report",
        "model.p.stg_orders",
        "model.p.orders_enriched",
        "model.p.by_name",
    }
    assert models_to_rerun(nodes, feeds, [], "model.p.orders_enriched") == {
        "model.p.orders_enriched",
        "model.p.mart",
        "model.p.report",
        "model.p.by_name",
    }

"""Confirmation's warm builder and screening's test prediction, checked against real dbt builds.

A variant built in the warm sandbox (the workspace put back to the pin's state between builds) must
be exactly what a fresh workspace builds; identical inputs are built once; and the dbt tests that
screening predicts will fail are the ones dbt reports failing.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dbt_harvest.harvester.mint.confirm import BuildContext, build_variant
from dbt_harvest.harvester.mint.engine import Engine
from dbt_harvest.harvester.mint.lineage import descendants
from dbt_harvest.harvester.mint.local_checks import Suite, failing, suite
from dbt_harvest.harvester.mint.screen import _rewrite, rerun
from dbt_harvest.harvester.mint.variants import VariantBuilder
from dbt_harvest.harvester.sandbox import Limits
from dbt_harvest.mutators import difference, transplant

MODEL = "model.shop_analytics.product_performance"
FILE = "models/marts/product_performance.sql"
JOIN = "on products.product_id = sales.product_id"


@pytest.fixture(scope="module")
def world(mint_world):  # type: ignore[no-untyped-def]
    return mint_world


def _fingerprints(result) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {t.name: t.fingerprint for t in result.tables}


def test_a_warm_variant_is_what_a_fresh_workspace_builds_and_identical_inputs_build_once(world) -> None:  # type: ignore[no-untyped-def]
    pin, scratch = world["pin"], world["scratch"] / "warm"
    mutant = world["original"].replace("where orders.status = 'completed'", "where true")
    select = ("product_performance+",)
    with world["harvest"].env():
        with VariantBuilder(
            pin, scratch, base_db=world["state"].database, sandboxed=True, limits=Limits(wall_s=300)
        ) as builder:
            warm_mutant = builder.build("mutant", FILE, mutant, select)
            warm_original = builder.build("repair", FILE, world["original"], select)
            again = builder.build("repair-again", FILE, world["original"], select)
            assert (builder.builds, builder.reused) == (2, 1)
            assert again is warm_original
            # between shards the memo goes, with its captured files; the child stays
            kept_file = warm_original.gold_file
            assert kept_file is not None and kept_file.is_file()
            builder.forget()
            assert not kept_file.exists()
            rebuilt = builder.build("repair-after-forget", FILE, world["original"], select)
            assert builder.builds == 3 and builder.session.starts == 1
            assert _fingerprints(rebuilt) == _fingerprints(warm_original)
        ctx = BuildContext(
            pin,
            world["gold"],
            world["scratch"] / "fresh",
            True,
            Limits(wall_s=300),
            base_db=world["state"].database,
            select=select,
        )
        fresh_mutant = build_variant(ctx, "mutant", FILE, mutant)
    assert warm_mutant.models_ok and fresh_mutant.models_ok, (warm_mutant.first_error, fresh_mutant.first_error)
    assert _fingerprints(warm_mutant) == _fingerprints(fresh_mutant)
    assert warm_mutant.failed_tests == fresh_mutant.failed_tests
    assert warm_mutant.tests_total == fresh_mutant.tests_total > 0
    # the original file, built after the mutant in the same warm child, gives the pin's own tables
    pinned = {t.name: t.fingerprint for t in pin.tables if t.deterministic}
    assert {k: v for k, v in _fingerprints(warm_original).items() if k in pinned} == pinned
    assert _fingerprints(warm_mutant)["main.product_performance"] != pinned["main.product_performance"]


def test_predicted_test_failures_are_the_ones_dbt_reports(world) -> None:  # type: ignore[no-untyped-def]
    pin, nodes = world["pin"], world["nodes"]
    tests = suite(world["state"].manifest)
    chain = [MODEL, *descendants(nodes, MODEL)]
    selected = tests.selected(chain)
    assert selected, "product_performance has data tests"
    variants = {
        "original": world["original"],
        "cross join": world["original"].replace(JOIN, "on true"),  # duplicates product_id: unique fails
        "dropped filter": world["original"].replace("where orders.status = 'completed'", "where true"),
    }
    catalog = nodes[MODEL].relation.split(".")[0].strip('"')
    compiled = nodes[MODEL].compiled_code
    engine = Engine(world["state"].database, catalog, world["scratch"] / "engine")
    predicted: dict[str, frozenset[str]] = {}
    try:
        for name, text in variants.items():
            edit = transplant(difference(world["original"], text), world["original"], compiled)
            assert edit is not None
            replaced = rerun(engine, pin, nodes, MODEL, edit.apply(compiled))
            predicted[name] = failing(engine, selected, lambda sql, replaced=replaced: _rewrite(sql, replaced))
            engine.reset()
    finally:
        engine.close()
    with (
        world["harvest"].env(),
        VariantBuilder(
            pin, world["scratch"] / "dbt", base_db=world["state"].database, sandboxed=True, limits=Limits(wall_s=300)
        ) as builder,
    ):
        built = {
            name: builder.build(name.replace(" ", "-"), FILE, text, ("product_performance+",))
            for name, text in variants.items()
        }
    for name, result in built.items():
        assert result.models_ok, result.first_error
        assert predicted[name] == frozenset(result.failed_tests), name
    assert predicted["cross join"], "the cross join must fail a uniqueness test"
    assert not predicted["original"]


def test_a_unit_test_on_the_chain_makes_the_prediction_unknown() -> None:
    manifest = {
        "nodes": {
            "test.p.not_null_a_id": {
                "resource_type": "test",
                "compiled_code": "select 1 where false",
                "depends_on": {"nodes": ["model.p.a"]},
                "config": {"severity": "ERROR"},
            },
            "test.p.warn_only": {
                "resource_type": "test",
                "compiled_code": "select 1",
                "depends_on": {"nodes": ["model.p.b"]},
                "config": {"severity": "warn"},
            },
        },
        "unit_tests": {"unit_test.p.b.check": {"depends_on": {"nodes": ["model.p.b"]}}},
    }
    found: Suite = suite(manifest)
    assert [t.unique_id for t in found.selected(["model.p.a"]) or ()] == ["test.p.not_null_a_id"]
    assert found.selected(["model.p.a", "model.p.b"]) is None
    warn = next(t for t in found.tests if t.unique_id == "test.p.warn_only")
    assert not warn.counts and next(t for t in found.tests if t.unique_id != warn.unique_id).counts


@given(st.text(alphabet="ab \n", max_size=30), st.text(alphabet="ab \n", max_size=30))
def test_difference_is_one_smallest_edit(before: str, after: str) -> None:
    edit = difference(before, after)
    assert edit.apply(before) == after
    # nothing kept inside the edit could have been kept outside it
    if edit.start < edit.end and edit.replacement:
        assert before[edit.start] != edit.replacement[0]
        assert before[edit.end - 1] != edit.replacement[-1]


def test_a_variant_whose_failing_test_makes_dbt_skip_downstream_models_does_not_build(world) -> None:  # type: ignore[no-untyped-def]
    # dropping the coalesce leaves NULL opt-ins: stg_customers' not_null test fails, and `dbt build`
    # skips every model downstream of it. On a copy of the pin's database the old downstream tables are
    # still there, so the build must be judged by what dbt ran, as a fresh full build would be.
    file = "models/staging/stg_customers.sql"
    with world["harvest"].env():
        from dbt_harvest.harvester.workspace import template

        original = (template(world["pin"]) / file).read_text()
        broken = original.replace("coalesce(marketing_opt_in, false)", "marketing_opt_in")
        assert broken != original
        with VariantBuilder(
            world["pin"],
            world["scratch"] / "skip",
            base_db=world["state"].database,
            sandboxed=True,
            limits=Limits(wall_s=300),
        ) as builder:
            result = builder.build("mutant", file, broken, ("stg_customers+",))
    assert result.tests_failed >= 1
    assert not result.models_ok
    assert "skipped by dbt because an upstream dbt test failed" in result.first_error


def test_a_statement_about_missing_rows_does_not_claim_wrong_values_in_every_column(world) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.scorer.spec import GradingSpec
    from dbt_harvest.harvester.mint.claims import symptoms_of
    from dbt_harvest.harvester.mint.observe import Observation
    from dbt_harvest.harvester.mint.statement import template_statement

    table = "main.product_performance"
    gold_rows = next(t.rows for t in world["pin"].tables if t.name == table)
    for mutant_rows, expect_columns in ((gold_rows - 2, False), (gold_rows, True)):
        obs = Observation({table: (gold_rows, mutant_rows)}, {table: (0, 1, 5)}, table, (gold_rows, mutant_rows), 10)
        spec = GradingSpec("g", ("product_performance",), ((0, 1, 5),), (True,))
        symptoms = symptoms_of(spec, obs, world["pin"], world["nodes"])
        text = template_statement(symptoms)
        assert bool(symptoms[0].columns) == expect_columns
        assert ("holds wrong values" in text) == expect_columns
        assert ("is missing rows" in text) == (not expect_columns)


def test_the_warm_builder_never_reads_the_workspace_its_child_can_write(world, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 14, class 1: between two batches the warm child's project code can swap the next model file
    for a link to a host file (tests/sandbox/test_host_boundary.py plants links that way end to end). The
    host must not read through it, and must not write what it read back into the sandbox or a report."""
    import os

    canary = tmp_path / "host-secret.sql"
    canary.write_text("select 'TOPSECRET-host-file' as leaked\n")
    before = (canary.read_bytes(), canary.stat().st_mtime_ns)
    pin = world["pin"]
    with (
        world["harvest"].env(),
        VariantBuilder(
            pin,
            world["scratch"] / "tampered",
            base_db=world["state"].database,
            sandboxed=True,
            limits=Limits(wall_s=300),
        ) as builder,
    ):
        (builder.workspace / FILE).unlink()
        os.symlink(canary, builder.workspace / FILE)
        mutant = world["original"].replace("where orders.status = 'completed'", "where true")
        built = builder.build("mutant", FILE, mutant, ("product_performance+",))
        assert built.models_ok, built.first_error
        assert builder._original[FILE] == world["original"]
        assert "TOPSECRET" not in repr(builder._original)
    assert (canary.read_bytes(), canary.stat().st_mtime_ns) == before

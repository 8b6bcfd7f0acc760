"""`harvest mint` on the embedded example: every admission check rejects where it should, the kept
tasks are sound, a re-run redoes nothing, a pin without a split is refused, and Ray gives the same
screening decisions as the local pool."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dbt_harvest.harvester.mint.candidates import Candidate
from dbt_harvest.harvester.mint.confirm import BuildContext, confirm
from dbt_harvest.harvester.mint.engine import Engine
from dbt_harvest.harvester.mint.screen import screen
from dbt_harvest.mutators import Edit, Mutation

MODEL = "model.shop_analytics.product_performance"
# a plausible wrong repair of a dropped "completed" filter: it excludes cancelled orders only
WRONG = ("where orders.status <> 'cancelled'",)
FILE = "models/marts/product_performance.sql"
#: the families the Ray-vs-local comparison screens: three of the six still give it a few dozen decisions to compare
RAY_FAMILIES = ("filter", "join", "values")


@pytest.fixture(scope="module")
def world(mint_world):  # type: ignore[no-untyped-def]
    return mint_world


def _candidate(world, old: str, new: str, *, effect: str = "changed_values", wrong: tuple[str, ...] = ()) -> Candidate:  # type: ignore[no-untyped-def]
    text = world["original"]
    start = text.index(old)
    edit = Edit(start, start + len(old), new)
    broken = edit.apply(text)
    wrong_edits = []
    for replacement in wrong:
        at = broken.index(new)
        wrong_edits.append(Edit(at, at + len(new), replacement))
    mutation = Mutation("test.hand_made", "filter", effect, edit, tuple(wrong_edits), "hand-made mutation")
    return Candidate(world["pin"].id, MODEL, FILE, text, mutation)


def _screen(world, cand: Candidate):  # type: ignore[no-untyped-def]
    catalog = world["nodes"][MODEL].relation.split(".")[0].strip('"')
    engine = Engine(world["state"].database, catalog, world["scratch"] / f"engine-{cand.key}")
    try:
        with world["harvest"].env():
            return screen(engine, world["pin"], world["nodes"], cand, world["gold"])
    finally:
        engine.close()


def _confirm(world, cand: Candidate, spec):  # type: ignore[no-untyped-def]
    node = world["nodes"][MODEL]
    ctx = BuildContext(
        world["pin"],
        world["gold"],
        world["scratch"] / f"confirm-{cand.key}",
        True,
        __import__("dbt_harvest.harvester.sandbox", fromlist=["Limits"]).Limits(wall_s=300),
        base_db=world["state"].database,
        select=(f"{node.name}+",),
    )
    with world["harvest"].env():
        return confirm(ctx, cand, spec)


def test_screen_rejects_an_equivalent_mutant(world) -> None:  # type: ignore[no-untyped-def]
    outcome = _screen(
        world, _candidate(world, "where orders.status = 'completed'", "where orders.status = 'completed' and 1 = 1")
    )
    assert (outcome.ok, outcome.reason) == (False, "equivalent")


def test_screen_rejects_sql_that_does_not_run(world) -> None:  # type: ignore[no-untyped-def]
    outcome = _screen(world, _candidate(world, "sum(net_amount) as revenue", "sum(net_amount_typo) as revenue"))
    assert (outcome.ok, outcome.reason) == (False, "sql_error")
    assert "net_amount_typo" in outcome.detail


def test_screen_rejects_a_change_the_official_check_cannot_see(world) -> None:  # type: ignore[no-untyped-def]
    # a count off by a thousandth stays within the official 0.01 tolerance
    outcome = _screen(
        world,
        _candidate(world, "count(distinct customer_id) as buyers", "count(distinct customer_id) + 0.001 as buyers"),
    )
    assert (outcome.ok, outcome.reason) == (False, "invisible")


def test_screen_rejects_an_effect_that_contradicts_the_tag(world) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.screen import Observation, check_effect

    # dropping the filter feeds more lines into a per-product aggregate: values change, rows do not,
    # which a "more rows" tag tolerates (rows never disappear) ...
    outcome = _screen(
        world, _candidate(world, "where orders.status = 'completed'", "where true", effect="more_rows", wrong=WRONG)
    )
    assert outcome.ok, outcome.detail
    # ... while a "fewer rows" tag is contradicted by more rows, and "changed values" by a new row count
    grown = Observation({"main.t": (15, 20)}, {}, "main.t", (15, 20), 10)
    assert check_effect(grown, "fewer_rows").reason == "effect_mismatch"
    assert check_effect(grown, "changed_values").reason == "effect_mismatch"
    assert check_effect(grown, "more_rows").ok and check_effect(grown, "changed_grain").ok


def test_a_survivor_gets_a_grading_spec_shaped_like_spider2(world) -> None:  # type: ignore[no-untyped-def]
    outcome = _screen(world, _candidate(world, "where orders.status = 'completed'", "where true", wrong=WRONG))
    assert outcome.ok and outcome.grading is not None
    spec = outcome.grading
    assert 1 <= len(spec.condition_tabs) <= 4 and all(spec.ignore_orders)
    assert "product_performance" in spec.condition_tabs
    assert spec.gold == f"{world['pin'].gold_sha256}.duckdb"
    assert all(cols for cols in spec.condition_cols)


def test_screen_rejects_a_task_whose_wrong_repairs_cannot_qualify(world) -> None:  # type: ignore[no-untyped-def]
    # none offered
    outcome = _screen(world, _candidate(world, "where orders.status = 'completed'", "where true"))
    assert (outcome.ok, outcome.reason) == (False, "no_wrong_repair")
    # one the official check cannot tell from gold (it is the true repair with different spacing)
    outcome = _screen(
        world,
        _candidate(
            world, "where orders.status = 'completed'", "where true", wrong=("where  orders.status = 'completed'",)
        ),
    )
    assert (outcome.ok, outcome.reason) == (False, "no_wrong_repair")
    assert "passes the official check" in outcome.detail
    # one that does not run
    outcome = _screen(
        world,
        _candidate(
            world, "where orders.status = 'completed'", "where true", wrong=("where orders.no_such_column = 1",)
        ),
    )
    assert (outcome.ok, outcome.reason) == (False, "no_wrong_repair")
    assert "does not build" in outcome.detail
    # a good one after a bad one: kept, and confirmation tries the good one first
    outcome = _screen(
        world,
        _candidate(
            world, "where orders.status = 'completed'", "where true", wrong=("where orders.no_such_column = 1", *WRONG)
        ),
    )
    assert outcome.ok and outcome.wrong_order == (1,)


def test_confirm_rejects_a_mutant_that_does_not_build(world) -> None:  # type: ignore[no-untyped-def]
    good = _screen(world, _candidate(world, "where orders.status = 'completed'", "where true", wrong=WRONG))
    broken = _candidate(world, "sum(net_amount) as revenue", "sum(net_amount_typo) as revenue")
    outcome = _confirm(world, broken, good.grading)
    assert (outcome.ok, outcome.reason) == (False, "mutant_build_fails")
    assert "net_amount_typo" in outcome.detail


def test_confirm_rejects_a_task_without_a_wrong_repair(world) -> None:  # type: ignore[no-untyped-def]
    cand = _candidate(world, "where orders.status = 'completed'", "where true")
    spec = _screen(world, cand).grading
    outcome = _confirm(world, cand, spec)
    assert (outcome.ok, outcome.reason) == (False, "no_wrong_repair")
    assert outcome.local_checks is not None and outcome.local_checks.builds


def test_confirm_rejects_a_repair_that_is_not_minimal(world) -> None:  # type: ignore[no-untyped-def]
    text = world["original"]
    # one edit whose inverse touches two places more than six lines apart: two hunks
    first = text.index("where orders.status = 'completed'")
    last = text.index("sum(net_amount) as revenue") + len("sum(net_amount) as revenue")
    segment = text[first:last]
    replacement = segment.replace("= 'completed'", "<> 'cancelled'").replace(
        "sum(net_amount) as", "sum(net_amount) * 2 as"
    )
    broken = Edit(first, last, replacement).apply(text)
    at = broken.index("* 2 as")  # a wrong repair that changes the graded output: the factor, not the filter
    mutation = Mutation(
        "test.hand_made",
        "filter",
        "changed_values",
        Edit(first, last, replacement),
        (Edit(at, at + 3, "* 3"),),
        "two changes",
    )
    cand = Candidate(world["pin"].id, MODEL, FILE, text, mutation)
    screened = _screen(world, cand)
    assert screened.ok, screened.detail
    outcome = _confirm(world, cand, screened.grading)
    assert (outcome.ok, outcome.reason) == (False, "repair_not_minimal")


def test_confirm_keeps_a_task_whose_wrong_repair_passes_local_checks_and_fails_the_official_check(world) -> None:  # type: ignore[no-untyped-def]
    cand = _candidate(
        world,
        "where orders.status = 'completed'",
        "where orders.status <> 'completed'",
        wrong=("where orders.status <> 'cancelled'",),
    )
    screened = _screen(world, cand)
    assert screened.ok, screened.detail
    outcome = _confirm(world, cand, screened.grading)
    assert outcome.ok, (outcome.reason, outcome.detail)
    assert len(outcome.wrong_patches) == 1 and "cancelled" in outcome.wrong_patches[0]
    assert outcome.local_checks is not None and outcome.local_checks.builds
    assert outcome.fix_patch.count("@@ ") == 1


def test_the_example_yields_tasks_in_every_family_its_data_can_tell_apart(minted_example) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.pipeline import load_reports

    families = {t.family for t in minted_example.tasks}
    assert {"filter", "null", "grain", "time", "values"} <= families, families
    # join: every order line has its order and every payment month its customer, so a join type changed
    # the wrong way round (right / full outer) gives the broken output or gold, and DISTINCT cannot undo
    # a fan-out of rows that differ: no join candidate has an informative wrong repair on this data
    with minted_example.env():
        joins = [r for r in load_reports(minted_example.pin.id) if r["family"] == "join"]
    assert joins and {r["reason"] for r in joins} <= {"equivalent", "no_wrong_repair", "catastrophic"}
    assert all(
        "passes the official check" in r["detail"] or "not informative" in r["detail"]
        for r in joins
        if r["reason"] == "no_wrong_repair"
    )


def test_kept_tasks_are_sound(minted_example) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.harvester.mint.statement import leaks
    from dbt_harvest.harvester.state import load_state
    from dbt_harvest.harvester.workspace import template

    assert minted_example.tasks
    with minted_example.env():
        tree = template(minted_example.pin)
        manifest = load_state(minted_example.pin.id).manifest
        documented = " ".join(
            [n.get("description") or "" for n in manifest["nodes"].values()]
            + [
                c.get("description") or ""
                for n in manifest["nodes"].values()
                for c in (n.get("columns") or {}).values()
            ]
        )
        for task in minted_example.tasks:
            assert task.instance_id.startswith("local__shop_analytics.") and task.split == "train"
            original = (tree / task.file).read_text()
            broken = apply_to_text(original, parse_patch(task.broken_patch)[0])
            assert broken != original
            assert apply_to_text(broken, parse_patch(task.fix_patch)[0]) == original
            assert task.weak or task.wrong_repair_patches
            for wrong in task.wrong_repair_patches:
                fixed_wrong = apply_to_text(broken, parse_patch(wrong)[0])
                assert fixed_wrong not in (original, broken)
            changed = [
                line[1:].strip()
                for line in task.broken_patch.splitlines()
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            ]
            assert not leaks(task.problem_statement, [c for c in changed if c], documented)
            assert task.grading.gold == f"{task.gold_sha256}.duckdb"


def test_the_yield_report_counts_survivors_left_at_the_cap(minted_example) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.pipeline import load_reports, pending, yield_report

    with minted_example.env():
        left = pending(minted_example.pin.id)
        decided = {r["key"] for r in load_reports(minted_example.pin.id)}
        report = yield_report([minted_example.pin.id])
    assert left, "with one task per model, some models have survivors left unconfirmed"
    assert not {r["key"] for r in left} & decided  # no report: a later run with a higher cap confirms them
    for row in report["families"].values():
        decided_here = sum(row["screened_out"].values()) + sum(row["confirm_rejected"].values()) + row["kept"]
        assert row["candidates"] == decided_here + row["not_confirmed_cap"]
    assert sum(row["not_confirmed_cap"] for row in report["families"].values()) == len(left)


def test_rerun_redoes_nothing(minted_example) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, load_reports, mint

    with minted_example.env():
        before = load_reports(minted_example.pin.id)
        written = mint(
            [minted_example.pin], MintOptions(max_per_model=1, seed=0), mint_target(harvest_home(), pins_dir())
        )
        after = load_reports(minted_example.pin.id)
    assert before and written == [] and after == before


def test_a_finished_pin_plans_no_shard_until_its_candidates_or_cap_change(minted_example) -> None:  # type: ignore[no-untyped-def]
    """A no-op re-run must not enumerate candidates again (a real package's no-op resume spent minutes
    there): finished shards with the same candidates and nothing pending are not planned; other
    families (other candidates) or a higher cap over pending survivors bring exactly those back."""
    from dbt_harvest.core.home import harvest_home, mint_dir, pins_dir
    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, pending, plan

    pin = minted_example.pin
    with minted_example.env():
        target = mint_target(harvest_home(), pins_dir())
        assert plan([pin], MintOptions(max_per_model=1, seed=0), target) == []
        waiting = {p.name.removesuffix(".pending") for p in (mint_dir(pin.id) / "shards").glob("*.pending")}
        assert waiting and pending(pin.id)
        raised = plan([pin], MintOptions(max_per_model=2, seed=0), target)
        other_seed = plan([pin], MintOptions(max_per_model=1, seed=1), target)
        fewer = plan([pin], MintOptions(max_per_model=1, seed=0, families=("filter",)), target)
    assert {job.model for job in raised} == waiting
    with minted_example.env():  # a pin's own cap (the lock's) overrides the run's, either way
        own_higher = plan([pin], MintOptions(max_per_model=1, seed=0, caps=((pin.id, 2),)), target)
        own_lower = plan([pin], MintOptions(max_per_model=2, seed=0, caps=((pin.id, 1),)), target)
    assert {job.model for job in own_higher} == waiting and all(job.max_per_model == 2 for job in own_higher)
    assert own_lower == []
    assert all(job.candidates_key and job.done_keys for job in raised)
    assert other_seed and fewer  # other candidate orders or sets are not vouched for by the markers


def test_a_shard_left_under_the_cap_by_the_driver_is_unfinished_as_plan_says(minted_example) -> None:  # type: ignore[no-untyped-def]
    """A shard that stopped at the cap with survivors pending, whose kept task the driver then dropped as a
    duplicate of another shard's (``distinct_bugs``), is under the cap: the next run confirms its pending
    survivors. ``unfinished`` (what ``harvest corpus lock`` marks partial and ``mint --verify-lock``
    reports as left) must say so, as ``plan`` does; it used to skip every shard with a completion marker,
    so such a pin was locked as complete and a second mint kept one more task."""
    from dbt_harvest.core.home import harvest_home, mint_dir, pins_dir
    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, load_reports, plan, reports_dir, unfinished

    pin = minted_example.pin
    options = MintOptions(max_per_model=1, seed=0)
    with minted_example.env():
        waiting = sorted(p.name.removesuffix(".pending") for p in (mint_dir(pin.id) / "shards").glob("*.pending"))
        assert waiting and unfinished([pin], options) == []
        model = waiting[0]
        kept = next(r for r in load_reports(pin.id) if r["model"] == model and r["kept"])
        path = reports_dir(pin.id) / f"{kept['key']}.json"
        saved = path.read_text(encoding="utf-8")
        path.write_text(json.dumps({**kept, "kept": False, "reason": "duplicate", "task_id": ""}), encoding="utf-8")
        try:
            planned = {(job.pin_id, job.model) for job in plan([pin], options, mint_target(harvest_home(), pins_dir()))}
            left = set(unfinished([pin], options))
        finally:
            path.write_text(saved, encoding="utf-8")
        assert (pin.id, model) in planned
        assert left == planned
        assert unfinished([pin], options) == []  # restored: at the cap again, pending survivors wait for a higher cap


def test_results_are_applied_per_pin_in_plan_order_whatever_order_they_finish_in() -> None:
    """Which of two duplicate tasks survives is decided against the pin's index as results are applied,
    so a pool's finishing order must not reach it: each pin's results come in plan order, and a pin's
    results do not wait for another pin's."""
    from dbt_harvest.harvester.mint.pipeline import in_plan_order
    from dbt_harvest.harvester.mint.shard import ShardJob

    def job(pin: str, model: str) -> ShardJob:
        return ShardJob(
            pin_id=pin,
            model=model,
            split="train",
            split_group="g",
            families=None,
            max_per_model=3,
            already_kept=0,
            done_keys=frozenset(),
            home="/h",
            pins="/p",
        )

    jobs = [job("a", "m1"), job("b", "m1"), job("a", "m2"), job("a", "m3"), job("b", "m2")]
    finished = [jobs[3], jobs[4], jobs[1], jobs[2], jobs[0]]  # the order a pool might return them in
    applied = [(j.pin_id, j.model, result) for j, result in in_plan_order(jobs, ((j, j.model) for j in finished))]
    assert applied == [("b", "m1", "m1"), ("b", "m2", "m2"), ("a", "m1", "m1"), ("a", "m2", "m2"), ("a", "m3", "m3")]
    assert [a[:2] for a in applied if a[0] == "a"] == [("a", "m1"), ("a", "m2"), ("a", "m3")]


def test_a_shard_the_duplicate_check_puts_under_the_cap_runs_again_in_the_same_mint(minted_example, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A shard stops at the cap with survivors pending; the driver then drops its kept task as a
    duplicate of a task another shard of the same run kept (here: that task's signature lands in the
    index between planning and applying, which is what applying an earlier shard does). The shard is
    under the cap again, and the same ``mint`` call runs it in a second round: it leaves nothing for a
    second invocation, where it used to take one (and a pin locked after one run was wrongly complete)."""
    import shutil

    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import (
        MintOptions,
        _index_path,
        _key_path,
        _marker_path,
        _part_path,
        _pending_path,
        load_reports,
        mint,
        plan,
        reports_dir,
        unfinished,
    )
    from tests.conftest import use_env

    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(minted_example.home, home, symlinks=True)
    shutil.copytree(minted_example.pins, pins)
    pin = minted_example.pin
    options = MintOptions(max_per_model=1, seed=0)
    with use_env(home, pins):
        target = mint_target(harvest_home(), pins_dir())
        shards = reports_dir(pin.id) / "shards"
        model = sorted(p.name.removesuffix(".pending") for p in shards.glob("*.pending"))[0]
        kept = next(r for r in load_reports(pin.id) if r["model"] == model and r["kept"])
        for path in (
            _marker_path(pin.id, model),
            _key_path(pin.id, model),
            _pending_path(pin.id, model),
            _part_path(pin.id, model),
        ):
            path.unlink(missing_ok=True)
        index = json.loads(_index_path(pin.id).read_text(encoding="utf-8"))
        index["signatures"] = {s: t for s, t in index["signatures"].items() if t != kept["task_id"]}
        index["statements"] = {s: t for s, t in index["statements"].items() if t != kept["task_id"]}
        _index_path(pin.id).write_text(json.dumps(index), encoding="utf-8")
        jobs = plan([pin], options, target)
        assert [job.model for job in jobs] == [model]
        index["signatures"][kept["signature"]] = "another-shard-kept-this-first"
        _index_path(pin.id).write_text(json.dumps(index), encoding="utf-8")
        rounds: list[int] = []
        mint([pin], options, target, jobs=jobs, on_round=rounds.append)
        assert rounds == [1]
        reports = {r["key"]: r for r in load_reports(pin.id) if r["model"] == model}
        assert reports[kept["key"]]["reason"] == "duplicate" and not reports[kept["key"]]["kept"]
        assert unfinished([pin], options) == []
        assert plan([pin], options, target) == []


def test_a_finished_shard_stopped_by_a_budget_on_a_rerun_vouches_for_both_runs(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A finished shard run again (other families, a higher cap) and stopped by a time budget writes
    ``.part`` (what it decided, the old keys included) beside the old ``.done``; the keys vouched for are
    both, so a third run redoes neither run's work. A marker that does not read vouches for nothing."""
    from dbt_harvest.harvester.mint.pipeline import _marker_path, _part_path, completed_keys

    monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "home"))
    pin, model = "owner__repo@000000000000", "model.shop.orders"
    done, part = _marker_path(pin, model), _part_path(pin, model)
    done.parent.mkdir(parents=True)
    assert completed_keys(pin, model) == frozenset()
    done.write_text(json.dumps(["k1", "k2"]))
    assert completed_keys(pin, model) == {"k1", "k2"}
    part.write_text(json.dumps(["k1", "k2", "k3"]))
    assert completed_keys(pin, model) == {"k1", "k2", "k3"}
    done.write_text('["k1", "k')  # torn
    assert completed_keys(pin, model) == {"k1", "k2", "k3"}
    part.unlink()
    assert completed_keys(pin, model) == frozenset()


def test_a_pin_without_a_split_is_refused(example_harvest, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from dbt_harvest.cli import main

    env = {"HARVEST_HOME": str(example_harvest.home), "HARVEST_PINS": str(example_harvest.pins)}
    result = CliRunner().invoke(main, ["mint", example_harvest.pin.id], env=env)
    assert result.exit_code == 1
    assert "has no split" in result.output and "harvest split assign" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_mint.py::test_the_example_yields_tasks_in_every_family_its_data_can_tell_apart",
        "tests/harvester/test_mint.py::test_results_are_applied_per_pin_in_plan_order_whatever_order_they_finish_in",
    )
)
def test_ray_executor_matches_the_local_pool(minted_example, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real local Ray head on 127.0.0.1 with token auth: same screening decisions as the local pool."""
    pytest.importorskip("ray")
    import shutil

    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(minted_example.home, home, symlinks=True)
    shutil.copytree(minted_example.pins, pins)
    shutil.rmtree(home / "mint")
    port = _free_port()
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": "harvest-test-token-0123456789abcdef",
        "RAY_USAGE_STATS_ENABLED": "0",
        "HARVEST_HOME": str(home),
        "HARVEST_PINS": str(pins),
    }
    ray_bin = str(Path(sys.executable).with_name("ray"))
    start = subprocess.run(
        [
            ray_bin,
            "start",
            "--head",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
            "--num-cpus",
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert start.returncode == 0, start.stderr[-2000:]
    try:
        code = (
            "from dbt_harvest.harvester.mint.pipeline import MintOptions, mint\n"
            "from dbt_harvest.core.pin import list_pins\nfrom dbt_harvest.core.home import harvest_home, pins_dir\nfrom dbt_harvest.corpora.store import mint_target\nimport json\n"
            f"reps = mint(list_pins(pins_dir()), MintOptions(screen_only=True, executor='ray', address='127.0.0.1:{port}', max_per_model=99, families={RAY_FAMILIES!r}), mint_target(harvest_home(), pins_dir()))\n"
            "print(json.dumps(sorted([r.key, r.reason, r.kept] for r in reps)))\n"
        )
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        ray_decisions = json.loads(run.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True, timeout=120)
    shutil.rmtree(home / "mint", ignore_errors=True)
    local_env = {**env}
    local = subprocess.run(
        [sys.executable, "-c", code.replace(f"executor='ray', address='127.0.0.1:{port}', ", "")],
        env=local_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert local.returncode == 0, local.stderr[-3000:]
    assert ray_decisions == json.loads(local.stdout.strip().splitlines()[-1])
    assert len(ray_decisions) > 20, len(ray_decisions)
    print(f"\n[figure] Ray vs local: {len(ray_decisions)} screening decisions")


def test_confirmation_tries_the_rarest_family_until_one_is_kept(world) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.shard import confirmation_order

    def survivor(family: str, new: str):  # type: ignore[no-untyped-def]
        cand = _candidate(world, "where orders.status = 'completed'", new)
        mutation = Mutation(f"{family}.x", family, "changed_values", cand.mutation.edit, (), "")
        return (Candidate(cand.pin, cand.model, cand.file, cand.original, mutation), None, "", {})

    items = [
        survivor("filter", "where 1 = 1"),
        survivor("time", "where 2 = 2"),
        survivor("time", "where 3 = 3"),
        survivor("grain", "where 4 = 4"),
        survivor("filter", "where 5 = 5"),
    ]
    kept: set[str] = set()
    order = []
    for item in confirmation_order(items, ("time", "grain", "filter"), kept):
        order.append((item[0].mutation.family, item[0].mutation.edit.replacement))
        if item[0].mutation.edit.replacement == "where 3 = 3":
            kept.add("time")  # the second time survivor is the one kept
    assert order == [
        ("time", "where 2 = 2"),
        ("time", "where 3 = 3"),
        ("grain", "where 4 = 4"),
        ("filter", "where 1 = 1"),
        ("filter", "where 5 = 5"),
    ]


def test_the_family_plan_gives_every_family_a_model_that_tries_it_first(world) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.family_order import family_plan
    from dbt_harvest.harvester.workspace import template

    with world["harvest"].env():
        plan = family_plan(world["pin"], world["nodes"], template(world["pin"]), None)
    firsts = {order[0] for order in plan.values() if order}
    assert {"filter", "null", "join", "grain", "time", "values"} <= firsts
    assert all(sorted(order) == sorted(set(order)) for order in plan.values())


def test_the_family_plan_is_cached_under_a_key_of_what_it_reads(world, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from dbt_harvest.core.home import mint_dir
    from dbt_harvest.harvester.mint.family_order import family_plan, plan_key, planned_orders
    from dbt_harvest.harvester.workspace import template

    pin, nodes = world["pin"], world["nodes"]
    with world["harvest"].env():
        tree = template(pin)
        fresh = family_plan(pin, nodes, tree, None)
        assert planned_orders(pin, nodes, tree, None) == fresh
        cache = mint_dir(pin.id) / "shards" / "family.plan"
        assert cache.is_file()
        assert planned_orders(pin, nodes, tree, None) == fresh  # read back from the cache
        assert planned_orders(pin, nodes, tree, ("filter", "null")) == family_plan(pin, nodes, tree, ("filter", "null"))
        edited = tmp_path / "tree"
        shutil.copytree(tree, edited)
        model = edited / "models/marts/product_performance.sql"
        model.write_text(model.read_text() + "\n-- an edit\n")
        assert plan_key(pin, nodes, edited, None) != plan_key(pin, nodes, tree, None)
        assert plan_key(pin, nodes, tree, ("filter",)) != plan_key(pin, nodes, tree, None)

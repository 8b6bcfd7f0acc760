"""The warm sandbox child (SandboxSession): batches share one child, a variant restored to the pin's
state builds exactly what a fresh one does, a batch that crosses a bound is killed and the next one
gets a new child, and a file write cannot leave the workspace."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from sandbox_support import CLOCK, PROJECTS, make_workspace

from dbt_harvest.core.errors import SandboxError
from dbt_harvest.harvester.sandbox import CaptureStep, DbtStep, Limits, QueryStep, RestoreDbStep, WriteStep, run_steps
from dbt_harvest.harvester.sandbox.session import SandboxSession
from dbt_harvest.harvester.sandbox.steps import step_request

STAGING = "models/staging/stg_orders.sql"


def _fingerprints(run) -> dict[str, str]:  # type: ignore[no-untyped-def]
    capture = next(step for step in run.steps if step.kind == "capture")
    return {table["name"]: table["fingerprint"] for table in capture.detail["tables"]}


def _shipped_amount(gold: Path) -> float:
    con = duckdb.connect(str(gold), read_only=True)
    try:
        return float(con.execute("select sum(shipped_amount) from main.customer_revenue").fetchone()[0])
    finally:
        con.close()


def test_batches_share_one_child_and_a_restored_variant_matches_a_fresh_build(bwrap: None, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, PROJECTS / "shop", "sandbox_shop")
    original = (ws / STAGING).read_text()
    doubled = original.replace(
        "select order_id, customer_id, status, amount,", "select order_id, customer_id, status, amount * 2 as amount,"
    )
    assert doubled != original
    with SandboxSession(ws, ".", clock=CLOCK) as session:
        first = session.run([DbtStep(("seed",)), DbtStep(("build",)), CaptureStep(out="a.duckdb")])
        assert first.ok, first.first_error
        # keep the built database as the pristine starting point of every variant
        shutil.copyfile(ws / "build.duckdb", ws / "base.duckdb")
        variant = session.run(
            [
                WriteStep(STAGING, doubled),
                RestoreDbStep("base.duckdb"),
                DbtStep(("build", "--select", "stg_orders+")),
                CaptureStep(out="b.duckdb"),
            ]
        )
        assert variant.ok, variant.first_error
        back = session.run(
            [
                WriteStep(STAGING, original),
                RestoreDbStep("base.duckdb"),
                DbtStep(("build", "--select", "stg_orders+")),
                CaptureStep(out="c.duckdb"),
            ]
        )
        assert back.ok, back.first_error
        assert session.starts == 1
    assert _shipped_amount(ws / "b.duckdb") == pytest.approx(2 * _shipped_amount(ws / "a.duckdb"))
    # back to the original file: every table exactly as first built
    assert _fingerprints(back) == _fingerprints(first)
    assert (ws / STAGING).read_text() == original
    # and the warm variant equals a fresh one-shot build of the same file
    fresh = make_workspace(tmp_path / "fresh", PROJECTS / "shop", "sandbox_shop")
    (fresh / STAGING).write_text(doubled)
    one_shot = run_steps(fresh, ".", [DbtStep(("seed",)), DbtStep(("build",)), CaptureStep()], clock=CLOCK)
    assert one_shot.ok, one_shot.first_error
    assert _fingerprints(one_shot) == _fingerprints(variant)


def test_a_batch_past_its_time_limit_is_killed_and_the_next_batch_gets_a_new_child(bwrap: None, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, PROJECTS / "shop", "sandbox_shop")
    with SandboxSession(ws, ".", clock=CLOCK, limits=Limits(wall_s=20.0)) as session:
        seeded = session.run([DbtStep(("seed",))])
        assert seeded.ok, seeded.first_error
        slow = session.run([QueryStep("build.duckdb", "select sum(hash(range)) from range(100000000000)")])
        assert not slow.ok and slow.timed_out
        assert "wall time limit" in slow.first_error
        after = session.run([QueryStep("build.duckdb", "select count(*) from main.shop_orders")])
        assert after.ok, after.first_error
        assert after.steps[0].detail["rows"] == [[6]]
        assert session.starts == 2


def test_a_write_cannot_leave_the_workspace(bwrap: None, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, PROJECTS / "shop", "sandbox_shop")
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "models" / "escape").symlink_to(outside)
    with pytest.raises(SandboxError, match="relative path inside the workspace"):
        step_request(WriteStep("../outside/x.sql", "select 1"))
    with SandboxSession(ws, ".", clock=CLOCK) as session:
        run = session.run([WriteStep("models/escape/x.sql", "select 1 as x")])
    assert not run.ok
    assert "outside the workspace" in run.first_error
    assert list(outside.iterdir()) == []


def test_isolated_batches_are_refused_outside_the_sandbox(tmp_path: Path) -> None:
    """``isolate`` kills every other process of the PID namespace after a batch: only bubblewrap's own
    namespace may be asked for it, never the host's."""
    ws = make_workspace(tmp_path, PROJECTS / "shop", "sandbox_shop")
    with pytest.raises(SandboxError, match="isolated batches need the sandbox"):
        SandboxSession(ws, ".", clock=CLOCK, sandboxed=False, isolate=True)

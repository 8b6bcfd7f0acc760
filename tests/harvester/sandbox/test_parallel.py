"""The parallel child (harvester.sandbox.parallel): one sandboxed child, started before its workspaces are
filled, builds several workspaces at once, each exactly as a one-shot child of it would; one batch's
failure stays its own; a bound crossed in any workspace (a sibling's disk included) kills the child and
every run says so; bad arguments are refused before anything starts."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from sandbox_support import ATTACK_LIMITS, ATTACKS, CLOCK, PROJECTS, make_workspace

from dbt_harvest.core.errors import SandboxError
from dbt_harvest.harvester.sandbox import CaptureStep, DbtStep, run_steps, write_profile
from dbt_harvest.harvester.sandbox.parallel import ParallelChild, run_parallel
from dbt_harvest.harvester.sandbox.runner import captures_dir

GOLD = [DbtStep(("seed",)), DbtStep(("build",)), CaptureStep()]
STAGING = "models/staging/stg_orders.sql"


def _fingerprints(run) -> dict[str, str]:  # type: ignore[no-untyped-def]
    capture = next(step for step in run.steps if step.kind == "capture")
    return {table["name"]: table["fingerprint"] for table in capture.detail["tables"]}


def test_workspaces_filled_after_the_child_started_build_at_once_as_each_would_alone(
    bwrap: None, tmp_path: Path
) -> None:
    alone = make_workspace(tmp_path / "alone", PROJECTS / "shop", "sandbox_shop")
    reference = run_steps(alone, ".", GOLD, clock=CLOCK)
    assert reference.ok, reference.steps

    spaces = [tmp_path / name for name in ("first", "second", "broken")]
    for space in spaces:
        space.mkdir()
    with ParallelChild(spaces, ".", clock=CLOCK, log_path=tmp_path / "parallel.log") as child:
        child.start()  # dbt is imported while the workspaces are still empty
        for space, db_file in zip(spaces, ("build.duckdb", "other.duckdb", "build.duckdb")):
            shutil.copytree(PROJECTS / "shop", space, dirs_exist_ok=True)
            write_profile(space, ".", "sandbox_shop", db_file=db_file)
        staging = spaces[2] / STAGING
        staging.write_text(staging.read_text().replace("select order_id,", "select no_such_column, order_id,"))
        first, second, broken = child.run([GOLD, GOLD, GOLD], stop_on_failure=False)

    assert first.ok and second.ok, (first.steps, second.steps)
    # the same tables as a one-shot child builds, each in its own workspace and database file; the second
    # workspace also runs with a home folder of its own (harvest add's second gold build: a value built from
    # $HOME differs there), so only its env_probe (which records $HOME) differs
    expected = _fingerprints(reference)
    assert _fingerprints(first) == expected
    others = _fingerprints(second)
    assert others.pop("main.env_probe") != expected.pop("main.env_probe") and others == expected
    assert (spaces[0] / "build.duckdb").is_file() and not (spaces[0] / "other.duckdb").exists()
    assert (spaces[1] / "other.duckdb").is_file() and not (spaces[1] / "build.duckdb").exists()
    for space, run in zip(spaces[:2], (first, second)):
        capture = next(step for step in run.steps if step.kind == "capture")
        assert Path(capture.detail["file"]).parent == captures_dir(space)
    # the broken workspace fails on its own; the others are untouched by it
    assert not broken.ok and not broken.killed_reason
    assert "no_such_column" in broken.steps[1].first_error
    assert (tmp_path / "parallel.log").read_text().count("[harvest sandbox] sandboxed=True") == 3


def test_a_bound_crossed_in_a_sibling_kills_the_child_and_every_run_reports_it(bwrap: None, tmp_path: Path) -> None:
    shop = make_workspace(tmp_path / "shop", PROJECTS / "shop", "sandbox_shop")
    filler = make_workspace(tmp_path / "fill", ATTACKS / "disk_fill", "attack")
    limits = dataclasses.replace(ATTACK_LIMITS, workspace_bytes=64 << 20)
    shop_run, fill_run = run_parallel(
        [shop, filler],
        ".",
        [GOLD, [DbtStep(("run", "--select", "huge_cross"))]],
        clock=CLOCK,
        log_path=tmp_path / "parallel.log",
        limits=limits,
        stop_on_failure=False,
    )
    for run in (shop_run, fill_run):
        assert not run.ok
        assert (
            run.killed_reason.startswith("workspace disk use ") and "exceeded the limit of 64 MiB" in run.killed_reason
        )
    assert fill_run.steps[-1].first_error == fill_run.killed_reason  # the filler's step was interrupted
    assert not (filler / ".harvest_tmp").exists() and not (shop / ".harvest_tmp").exists()


def test_bad_arguments_are_refused_before_a_child_starts(tmp_path: Path) -> None:
    spaces = [make_workspace(tmp_path / name, PROJECTS / "shop", "sandbox_shop") for name in ("a", "b")]
    with pytest.raises(SandboxError, match="at least two workspaces"):
        ParallelChild(spaces[:1], ".", clock=CLOCK, log_path=tmp_path / "x.log")
    with pytest.raises(SandboxError, match="outside every workspace"):
        ParallelChild(spaces, ".", clock=CLOCK, log_path=spaces[1] / "x.log")
    with pytest.raises(SandboxError, match="distinct workspaces"):
        ParallelChild([spaces[0], spaces[0]], ".", clock=CLOCK, log_path=tmp_path / "x.log")
    child = ParallelChild(spaces, ".", clock=CLOCK, log_path=tmp_path / "x.log", sandboxed=False)
    with pytest.raises(SandboxError, match="1 batches for 2 workspaces"):
        child.run([GOLD])
    assert not (tmp_path / "x.log").exists()  # nothing started

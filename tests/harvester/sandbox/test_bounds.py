"""The bounds of a sandboxed run: wall time, memory, file size, workspace disk, relation size.

Each test runs an attack project under a small limit and checks that the run failed with a clear
one-line reason and that the limit held. The measured figures (time to kill, peak memory) are printed
for the report; speed is never asserted beyond "well within the limit".
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from pathlib import Path

from sandbox_support import ATTACK_LIMITS, ATTACKS, CLOCK, make_workspace

from dbt_harvest.harvester.sandbox import DbtStep, Limits, run_steps
from dbt_harvest.harvester.sandbox.runner import SCRATCH_DIR


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def limits(**changes: object) -> Limits:
    return dataclasses.replace(ATTACK_LIMITS, **changes)


def test_runaway_recursive_cte_is_killed_at_the_wall_time_limit(bwrap: None, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, ATTACKS / "runaway", "attack")
    marker = f"runaway-{uuid.uuid4().hex}"  # appears in the child's command line (its request)
    step = DbtStep(("run", "--vars", json.dumps({"marker": marker})))
    run = run_steps(workspace, ".", [step, DbtStep(("run",))], clock=CLOCK, limits=limits(wall_s=25.0))
    assert processes_mentioning(marker) == [] and processes_mentioning(str(workspace)) == []
    assert run.timed_out and not run.ok
    assert run.killed_reason == "wall time limit of 25 s exceeded; the build was killed"
    assert run.returncode == -9
    assert len(run.steps) == 1  # the interrupted step is reported; the next never started
    step = run.steps[0]
    assert not step.ok and step.detail["interrupted"] and step.first_error == run.killed_reason
    assert "START sql table model main.endless" in run.log_path.read_text(), "killed before the CTE ran"
    assert run.wall_s < 25.0 + 5.0
    print(f"\n[figure] runaway CTE: killed {step.detail['kill_s']:.3f} s after the signal, run {run.wall_s:.2f} s")


def test_memory_bomb_fails_within_the_memory_bounds(bwrap: None, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, ATTACKS / "memory_bomb", "attack")
    bound = 5 << 28  # 1.25 GiB of address space: dbt itself needs about 0.6
    run = run_steps(workspace, ".", [DbtStep(("run",))], clock=CLOCK, limits=limits(memory_bytes=bound))
    assert not run.ok and not run.killed_reason
    nodes = {node["unique_id"].rsplit(".", 1)[-1]: node for node in run.steps[0].detail["nodes"]}
    assert nodes["sql_bomb"]["status"] == "error" and "Out of Memory Error" in nodes["sql_bomb"]["message"]
    assert nodes["py_bomb"]["status"] == "error" and "MemoryError" in nodes["py_bomb"]["message"]
    assert 0 < run.peak_rss_bytes <= bound
    print(
        f"\n[figure] memory bomb: peak resident {run.peak_rss_bytes / (1 << 20):.0f} MiB under a {bound >> 20} MiB bound"
    )


def test_filling_the_workspace_kills_the_build_cleanly(bwrap: None, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, ATTACKS / "disk_fill", "attack")
    bound = 64 << 20
    run = run_steps(
        workspace, ".", [DbtStep(("run", "--select", "huge_cross"))], clock=CLOCK, limits=limits(workspace_bytes=bound)
    )
    assert not run.ok and not run.timed_out
    assert run.killed_reason.startswith("workspace disk use ")
    assert run.killed_reason.endswith("exceeded the limit of 64 MiB; the build was killed")
    assert run.steps[0].first_error == run.killed_reason
    assert not (workspace / SCRATCH_DIR).exists()
    print(f"\n[figure] disk fill: killed after {run.wall_s:.1f} s, kill took {run.steps[0].detail['kill_s']:.3f} s")


def test_file_size_and_relation_row_limits_fail_their_steps(bwrap: None, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path, ATTACKS / "disk_fill", "attack")
    run = run_steps(
        workspace,
        ".",
        [DbtStep(("run", "--select", "over_row_limit")), DbtStep(("run", "--select", "huge_cross"))],
        clock=CLOCK,
        limits=limits(relation_rows=1000, file_bytes=24 << 20, workspace_bytes=1 << 30),
        stop_on_failure=False,
    )
    assert not run.ok and not run.killed_reason and run.returncode == 0
    rows_step, file_step = run.steps
    assert rows_step.first_error == ("relation main.over_row_limit has 5000 rows, over the per-relation limit of 1000")
    assert not file_step.ok
    assert "File too large" in file_step.first_error or "too large" in file_step.first_error.lower()
    assert max(path.stat().st_size for path in workspace.rglob("*") if path.is_file()) <= 24 << 20
    print(f"\n[figure] file-size bound: {file_step.first_error}")

"""Benchmark (not a test): what the sandbox costs and what its bounds measure.

    python tests/harvester/sandbox/bench_sandbox.py [--rounds N] [--bounds]

Runs the shop fixture (seed + build + capture) sandboxed and unsandboxed, alternated in one process,
each in a fresh workspace, and prints the times and the ratio. With --bounds it also measures the time
to kill a runaway build and the peak memory held under the memory bomb.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sandbox_support import ATTACK_LIMITS, ATTACKS, CLOCK, PROJECTS, make_workspace

from dbt_harvest.harvester.sandbox import CaptureStep, DbtStep, Limits, run_steps


def one_build(sandboxed: bool) -> float:
    root = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        workspace = make_workspace(root, PROJECTS / "shop", "sandbox_shop")
        started = time.perf_counter()
        run = run_steps(
            workspace, ".", [DbtStep(("seed",)), DbtStep(("build",)), CaptureStep()], clock=CLOCK, sandboxed=sandboxed
        )
        elapsed = time.perf_counter() - started
        if not run.ok:
            raise SystemExit(f"build failed: {run.first_error}")
        return elapsed
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bounds() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-bounds-"))
    try:
        workspace = make_workspace(root / "a", ATTACKS / "runaway", "attack")
        limits = Limits(**{**ATTACK_LIMITS.__dict__, "wall_s": 20.0})
        run = run_steps(workspace, ".", [DbtStep(("run",))], clock=CLOCK, limits=limits)
        print(
            f"runaway CTE: timed_out={run.timed_out} run {run.wall_s:.2f} s, "
            f"kill took {run.steps[0].detail.get('kill_s', 0):.3f} s after SIGKILL"
        )
        workspace = make_workspace(root / "b", ATTACKS / "memory_bomb", "attack")
        run = run_steps(workspace, ".", [DbtStep(("run",))], clock=CLOCK, limits=ATTACK_LIMITS)
        print(
            f"memory bomb: peak RSS {run.peak_rss_bytes / (1 << 20):.0f} MiB "
            f"(bound {ATTACK_LIMITS.memory_bytes >> 20} MiB): {run.first_error[:120]}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--bounds", action="store_true")
    args = parser.parse_args()
    times: dict[bool, list[float]] = {True: [], False: []}
    for round_no in range(args.rounds):
        order = (True, False) if round_no % 2 == 0 else (False, True)
        for sandboxed in order:
            times[sandboxed].append(one_build(sandboxed))
            print(f"round {round_no}: sandboxed={sandboxed} {times[sandboxed][-1]:.2f} s", flush=True)
    boxed, plain = statistics.median(times[True]), statistics.median(times[False])
    print(f"median sandboxed {boxed:.2f} s, unsandboxed {plain:.2f} s, ratio {boxed / plain:.2f}")
    if args.bounds:
        bounds()


if __name__ == "__main__":
    main()

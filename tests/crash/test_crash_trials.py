"""Kill `harvest add`, `harvest mint` and `harvest dataset build` with SIGKILL, re-run, compare bytes.

Each trial starts from a copy of the world its command starts from, kills the real CLI (a subprocess)
at a seeded random crash point or after a seeded random delay, checks that nothing left under a real
name is partial (every pin, gold file, built state, task record, report and dataset file is whole and
verifies by its hash), re-runs the same command to completion, and requires the final pins and gold,
task records, or dataset to be byte-identical to the uninterrupted run's.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.crash.harness import Stage, check_nothing_partial, final_artefacts, run_cli, trial_plan

pytestmark = pytest.mark.crash

STAGES = ("add", "mint", "dataset")


def _diff(expected: dict[str, str], actual: dict[str, str]) -> list[str]:
    names = sorted(set(expected) | set(actual))
    return [
        f"{n}: {'missing' if n not in actual else 'extra' if n not in expected else 'differs'}"
        for n in names
        if expected.get(n) != actual.get(n)
    ]


@pytest.mark.parametrize("stage_name", STAGES)
def test_killed_then_rerun_is_byte_identical(
    baselines,
    stage_name: str,
    trial: int,
    crash_seed: int,  # type: ignore[no-untyped-def]
    tmp_path,
) -> None:
    stage: Stage = getattr(baselines, stage_name)
    crash_at, delay = trial_plan(stage, trial, crash_seed)
    world = stage.start.copy_to(tmp_path / "world")

    killed = run_cli(world, list(stage.args), crash_at=crash_at, kill_after=delay)
    if crash_at:
        assert killed.killed and killed.crash_point, (
            f"never reached crash point {crash_at}/{stage.crash_points}:\n{killed.output}"
        )
    else:
        assert killed.killed or killed.returncode == 0, killed.output  # a delay past the end lets it finish
    check_nothing_partial(world)

    rerun = run_cli(world, list(stage.args))
    assert rerun.returncode == 0, f"re-run after {killed.crash_point or f'{delay:.2f} s'} failed:\n{rerun.output}"
    check_nothing_partial(world)
    differences = _diff(stage.final, final_artefacts(stage_name, world))
    if os.environ.get("HARVEST_CRASH_REPORT"):  # one JSON line per trial, for measuring the suite
        with open(os.environ["HARVEST_CRASH_REPORT"], "a", encoding="utf-8") as handle:
            handle.write(
                json.dumps(
                    {
                        "stage": stage_name,
                        "trial": trial,
                        "crash_at": crash_at,
                        "of": stage.crash_points,
                        "delay": delay,
                        "point": killed.crash_point,
                        "killed_s": round(killed.seconds, 2),
                        "rerun_s": round(rerun.seconds, 2),
                        "baseline_s": round(stage.seconds, 2),
                        "ok": not differences,
                    }
                )
                + "\n"
            )
    assert not differences, f"killed at {killed.crash_point or f'{delay:.2f} s'}; re-run differs: {differences}"


def test_both_builds_of_one_add_capture_byte_identical_gold(baselines) -> None:  # type: ignore[no-untyped-def]
    assert len(baselines.gold_of_each_build) == 2
    assert len(set(baselines.gold_of_each_build)) == 1
    assert len(set(baselines.gold_names)) == 1
    assert f"gold/{baselines.gold_names[0]}.duckdb" in baselines.add.final


def test_the_baselines_cover_every_artefact_kind(baselines) -> None:  # type: ignore[no-untyped-def]
    assert any(k.startswith("pins/") for k in baselines.add.final)
    assert any(k.startswith("tasks/train/") for k in baselines.mint.final)
    assert any(k.startswith("mint/") and k.endswith(".done") for k in baselines.mint.final)
    assert any(k.startswith("dataset/data/") for k in baselines.dataset.final)
    assert min(s.crash_points for s in (baselines.add, baselines.mint, baselines.dataset)) > 10

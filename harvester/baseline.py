"""The project's own dbt tests that fail before any change: SWE-bench's FAIL_TO_FAIL, found once at `harvest add`.

Real projects often carry a failing test (a data issue in a seed, a test macro DuckDB cannot run). ``dbt build``
skips every model downstream of a failing test, so such a project looked unbuildable. `harvest add` builds it
as usual first; when a test fails, one more build runs every model with tests not gating them (``dbt build``
without tests, then ``dbt test``: all tests run once, after all models), and the tests that fail there are the
pin's known failures (``core.pin.BaselineTest``). Every later build of the pin leaves them out (the sandboxed
child passes ``--exclude``), so a model downstream of one builds, and the local checks of its tasks are the
tests that pass on the original project (PASS_TO_PASS). Tests that only warn are recorded and run as usual.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dbt_harvest.core.pin import FAILING_TEST_STATUSES, BaselineTest, is_test_uid
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.harvester.build import BuildResult, interpret
from dbt_harvest.harvester.sandbox import CaptureStep, DbtStep, Limits, run_steps, write_profile

_TEST_TYPES = ("test", "unit_test")
_RECORDED = (*FAILING_TEST_STATUSES, "warn")

#: seed, every model without its tests (nothing gates), then every test once: the whole failing set in one build
UNGATED_STEPS: tuple[Any, ...] = (
    DbtStep(("seed",)),
    DbtStep(("build", "--exclude-resource-type", "test", "--exclude-resource-type", "unit_test")),
    DbtStep(("test",)),
    CaptureStep(),
)


def baseline_tests(results: Iterable[BuildResult]) -> tuple[BaselineTest, ...]:
    """The tests that failed or warned in any of ``results`` (worst status per test), sorted by unique id."""
    rank = {"warn": 0, "fail": 1, "error": 2}
    worst: dict[str, str] = {}
    for result in results:
        for step in result.run.steps:
            if step.kind != "dbt":
                continue
            for node in step.detail.get("nodes", []):
                uid, status = str(node.get("unique_id", "")), str(node.get("status", ""))
                if (
                    node.get("resource_type") in _TEST_TYPES
                    and status in _RECORDED
                    and rank[status] > rank.get(worst.get(uid, ""), -1)
                ):
                    worst[uid] = status
    # an id no pin can record (a singular test named with a dash) is not one: left in, it fails the build as before
    return tuple(BaselineTest(uid, worst[uid]) for uid in sorted(worst) if is_test_uid(uid))


def ungated_build(
    workspace: Path,
    project_dir: str,
    profile: str,
    schema: str,
    clock: str,
    *,
    sandboxed: bool,
    limits: Limits,
    log_path: Path,
    db_file: str,
    toolchain: Toolchain | None = None,
) -> BuildResult:
    """Build every model with the project's tests not gating any (``UNGATED_STEPS``) and capture the tables;
    never raises on dbt failures (``interpret`` says what failed: a model that errors is still an error)."""
    write_profile(workspace, project_dir, profile, schema, db_file=db_file, toolchain=toolchain)
    steps = list(UNGATED_STEPS)
    run = run_steps(
        workspace,
        project_dir,
        steps,
        clock=clock,
        sandboxed=sandboxed,
        limits=limits,
        log_path=log_path,
        stop_on_failure=False,
    )
    return interpret(workspace, steps, run)


__all__ = ["UNGATED_STEPS", "baseline_tests", "ungated_build"]

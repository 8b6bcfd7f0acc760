"""One sandboxed build of a dbt project workspace: profile, ``dbt seed``, ``dbt build``, gold capture.

The sandbox runner executes the steps; this module decides what the outcome means: which models
errored (a failed build, reported by its first dbt error), which dbt tests failed (the local checks),
and what the capture found. `harvest add`, minting and the eval environment all build through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.errors import BuildError
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.harvester.sandbox import CaptureStep, DbtStep, Limits, SandboxRun, run_steps, write_profile
from dbt_harvest.harvester.sandbox.parallel import ParallelChild

_BUILD_RESOURCES = {"model", "seed", "snapshot"}
_FAILED = {"error", "fail", "runtime error"}


@dataclass(frozen=True)
class CapturedTable:
    name: str
    model: str
    rows: int
    columns: tuple[tuple[str, str], ...]
    fingerprint: str


@dataclass(frozen=True)
class BuildResult:
    """What one build produced and what its dbt tests said."""

    workspace: Path
    run: SandboxRun
    models_ok: bool
    first_error: str
    tests_total: int
    tests_failed: int
    failed_tests: tuple[str, ...]
    tables: tuple[CapturedTable, ...]
    seed_rows: int
    gold_file: Path | None  # the host's own copy of the captured tables (outside the workspace)

    @property
    def tests_pass(self) -> bool:
        return self.models_ok and self.tests_failed == 0


def _nodes(run: SandboxRun) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    for step in run.steps:
        if step.kind == "dbt":
            nodes.extend(step.detail.get("nodes", []))
    return nodes


def build_workspace(
    workspace: Path,
    project_dir: str,
    profile: str,
    schema: str,
    clock: str,
    *,
    sandboxed: bool = True,
    limits: Limits | None = None,
    log_path: Path | None = None,
    capture: bool = True,
    select: tuple[str, ...] = (),
    seed: bool = True,
    db_file: str = "build.duckdb",
    duckdb_scope: str = "workspace",
    exclude_tests: tuple[str, ...] = (),
    toolchain: Toolchain | None = None,
) -> BuildResult:
    """Seed, build (optionally ``--select``), and capture gold in ``workspace``; never raises on dbt failures.

    ``seed=False`` with a ``select`` is the incremental form used when the workspace already holds the
    pin's built database: only the selected nodes (and their tests) are rebuilt. ``db_file`` names the
    DuckDB file the profile builds into (its stem is dbt's database name). ``duckdb_scope`` "database"
    lets DuckDB touch only the database (agent and reward builds; see the sandbox runner).
    ``exclude_tests``: the pin's known failing tests (``Pin.excluded_tests``), left out of every dbt build.
    ``toolchain``: the pin's (``Pin.toolchain``), whose dbt runs the build (None: the installed dbt).
    """
    write_profile(
        workspace, project_dir, profile, schema, db_file=db_file, exclude_tests=exclude_tests, toolchain=toolchain
    )
    build_args = ("build", *(("--select", *select) if select else ()))
    steps: list[Any] = [DbtStep(("seed",))] if seed else []
    steps.append(DbtStep(build_args))
    if capture:
        steps.append(CaptureStep())
    run = run_steps(
        workspace,
        project_dir,
        steps,
        clock=clock,
        sandboxed=sandboxed,
        limits=limits or Limits(),
        log_path=log_path,
        stop_on_failure=False,
        duckdb_scope=duckdb_scope,
    )
    return interpret(workspace, steps, run)


#: what a gold build runs: seed, build, capture (``build_workspace``'s steps without a ``select``)
GOLD_STEPS: tuple[Any, ...] = (DbtStep(("seed",)), DbtStep(("build",)), CaptureStep())


def build_in_parallel(
    child: ParallelChild,
    profile: str,
    schema: str,
    db_files: Sequence[str],
    exclude_tests: tuple[str, ...] = (),
    toolchain: Toolchain | None = None,
) -> tuple[BuildResult, ...]:
    """What ``build_workspace`` does (seed, build, capture; never raises on dbt failures) in each of the
    child's workspaces, under the database file ``db_files[i]``, all at once in that one child (dbt
    imported once; ``harvester.sandbox.parallel``). The workspaces hold the project by now."""
    for workspace, db_file in zip(child.workspaces, db_files, strict=True):
        write_profile(
            workspace,
            child.project_dir,
            profile,
            schema,
            db_file=db_file,
            exclude_tests=exclude_tests,
            toolchain=toolchain,
        )
    steps = list(GOLD_STEPS)
    runs = child.run([steps] * len(child.workspaces), stop_on_failure=False)
    return tuple(interpret(workspace, steps, run) for workspace, run in zip(child.workspaces, runs))


def interpret(workspace: Path, steps: list[Any], run: SandboxRun) -> BuildResult:
    """What a run of ``steps`` (dbt commands, at most one capture, file writes) means as a build."""
    nodes = _nodes(run)
    errored = [n for n in nodes if n.get("resource_type") in _BUILD_RESOURCES and n.get("status") in _FAILED]
    # `dbt build` skips what depends on a failed test: those relations were not built. (On a copy of the
    # pin's database the old relation would still be there; the build must fail the same way either way.)
    skipped = [n for n in nodes if n.get("resource_type") in _BUILD_RESOURCES and n.get("status") == "skipped"]
    tests = [n for n in nodes if n.get("resource_type") in {"test", "unit_test"}]
    failed_tests = [n for n in tests if n.get("status") in _FAILED]
    dbt_steps = [s for s in run.steps if s.kind == "dbt"]
    other_failed = next((s for s in run.steps if s.kind in {"write", "restore"} and not s.ok), None)
    capture = next((s for s in steps if isinstance(s, CaptureStep)), None)
    first_error = ""
    if run.timed_out or run.killed_reason:
        first_error = run.killed_reason or "build timed out"
    elif other_failed is not None:
        first_error = other_failed.first_error or f"{other_failed.kind} step failed"
    elif errored:
        first_error = f"{errored[0].get('unique_id')}: {errored[0].get('message', '')}".strip()
    elif skipped:
        first_error = f"{skipped[0].get('unique_id')}: skipped by dbt because an upstream dbt test failed"
    elif len(dbt_steps) < sum(isinstance(s, DbtStep) for s in steps) or any(
        not s.ok and not _only_tests_failed(s) for s in dbt_steps
    ):
        bad = next((s for s in dbt_steps if not s.ok), None)
        first_error = (bad.first_error if bad else "") or "dbt did not run"
    models_ok = not first_error
    capture_step = next((s for s in run.steps if s.kind == "capture"), None)
    tables: tuple[CapturedTable, ...] = ()
    seed_rows = 0
    gold_file = None
    if capture is not None and models_ok:
        if capture_step is None or not capture_step.ok:
            first_error = (capture_step.first_error if capture_step else "") or "gold capture did not run"
            models_ok = False
        else:
            tables = tuple(
                CapturedTable(
                    name=str(t["name"]),
                    model=str(t.get("unique_id", "")),
                    rows=int(t["rows"]),
                    columns=tuple((str(c[0]), str(c[1])) for c in t["columns"]),
                    fingerprint=str(t["fingerprint"]),
                )
                for t in capture_step.detail.get("tables", [])
            )
            seed_rows = int(capture_step.detail.get("seed_rows", 0))
            gold_file = Path(capture_step.detail["file"])  # the runner's checked host copy
    return BuildResult(
        workspace=workspace,
        run=run,
        models_ok=models_ok,
        first_error=first_error.splitlines()[0] if first_error else "",
        tests_total=len(tests),
        tests_failed=len(failed_tests),
        failed_tests=tuple(str(n.get("unique_id")) for n in failed_tests),
        tables=tables,
        seed_rows=seed_rows,
        gold_file=gold_file,
    )


def _only_tests_failed(step: Any) -> bool:
    nodes = step.detail.get("nodes", [])
    bad = [n for n in nodes if n.get("status") in _FAILED or n.get("status") == "skipped"]
    return (
        bool(nodes)
        and all(n.get("resource_type") in {"test", "unit_test", "model"} for n in bad)
        and not any(n.get("resource_type") in _BUILD_RESOURCES and n.get("status") in _FAILED for n in bad)
    )


def require_ok(result: BuildResult, what: str) -> BuildResult:
    """Raise BuildError with the first dbt error when the models did not build."""
    if not result.models_ok:
        raise BuildError(f"{what} failed: {result.first_error or 'unknown dbt error'} (logs: {result.run.log_path})")
    return result


__all__ = ["BuildResult", "CapturedTable", "build_in_parallel", "build_workspace", "interpret", "require_ok"]

"""What a sandboxed run is asked to do (steps) and what it reports back (StepResult, SandboxRun).

These frozen records are the contract between the harvester, the minting pipeline and the eval
environment on one side and the sandbox on the other. ``step_request`` turns a step into the JSON the
child reads; it also refuses arguments that would let a caller escape the fixed profile and project.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeAlias

from dbt_harvest.core.errors import SandboxError

# dbt flags the runner sets itself; a step may not override them.
RESERVED_DBT_FLAGS = ("--project-dir", "--profiles-dir", "--profile", "--target-path", "--log-path")


@dataclass(frozen=True)
class DbtStep:
    """One dbt command run in-process, e.g. ``DbtStep(("build", "--select", "fct_orders+"))``."""

    args: tuple[str, ...]


@dataclass(frozen=True)
class CaptureStep:
    """Copy every model relation named in the manifest into a new DuckDB file of base tables.

    A relation whose alias is unique among the build's models is captured as ``main.<alias>``; those
    sharing an alias keep ``<schema>.<alias>`` (the rule: ``inside/harvest_names.py``).
    """

    out: str = "gold.duckdb"  # workspace-relative
    manifest: str = "target/manifest.json"  # relative to the dbt project folder


@dataclass(frozen=True)
class QueryStep:
    """A read-only query on a workspace DuckDB file; rows come back as JSON-safe values."""

    db: str  # workspace-relative
    sql: str
    max_rows: int = 200


@dataclass(frozen=True)
class WriteStep:
    """Replace one file of the workspace with ``text`` (a variant of the pin's tree), inside the sandbox.

    The write happens in the child, so a symlink the project planted can only point within the
    sandbox; the child also refuses a target whose real path leaves the workspace.
    """

    path: str  # workspace-relative
    text: str


@dataclass(frozen=True)
class RestoreDbStep:
    """Make the build database a fresh copy of ``source`` (a pristine database in the workspace)."""

    source: str  # workspace-relative


Step: TypeAlias = DbtStep | CaptureStep | QueryStep | WriteStep | RestoreDbStep


@dataclass(frozen=True)
class StepResult:
    """The outcome of one step. ``first_error`` is one line; ``detail`` depends on ``kind``.

    dbt: {"nodes": [{"unique_id", "resource_type", "status", "message"}]}
    capture: {"tables": [{"name", "unique_id", "rows", "columns", "fingerprint"}], "seed_rows": int}
    query: {"columns": [[name, type]], "rows": [[...]], "truncated": bool}
    write, restore: {}
    Every kind also carries "wall_s"; a step cut short by a kill carries "interrupted": True.
    """

    kind: str
    ok: bool
    first_error: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SandboxRun:
    """The outcome of one run of steps in one child process."""

    ok: bool
    timed_out: bool
    killed_reason: str
    returncode: int
    steps: tuple[StepResult, ...]
    log_path: Path
    wall_s: float
    peak_rss_bytes: int

    @property
    def first_error(self) -> str:
        """The reason the run failed, as one line ('' when it succeeded)."""
        if self.killed_reason:
            return self.killed_reason
        for step in self.steps:
            if not step.ok:
                return step.first_error
        return "" if self.ok else f"sandbox child exited with code {self.returncode}"


def step_kind(step: Step) -> str:
    """The kind name the child and StepResult use for a step."""
    if isinstance(step, DbtStep):
        return "dbt"
    if isinstance(step, CaptureStep):
        return "capture"
    if isinstance(step, QueryStep):
        return "query"
    if isinstance(step, WriteStep):
        return "write"
    if isinstance(step, RestoreDbStep):
        return "restore"
    raise SandboxError(
        f"unknown sandbox step {step!r}; use DbtStep, CaptureStep, QueryStep, WriteStep or RestoreDbStep"
    )


def workspace_relative(value: str, what: str) -> str:
    """Refuse absolute paths and paths that climb out of the workspace; return the normalized path."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\x00" in value:
        raise SandboxError(f"{what} must be a relative path inside the workspace, got {value!r}")
    return str(path)


def step_request(step: Step) -> dict[str, Any]:
    """The JSON form of a step for the child, after validation."""
    kind = step_kind(step)
    if isinstance(step, DbtStep):
        args = tuple(step.args)
        if not args or not all(isinstance(arg, str) for arg in args):
            raise SandboxError(f"DbtStep needs a non-empty tuple of strings, got {step.args!r}")
        for arg in args:
            if arg.split("=", 1)[0] in RESERVED_DBT_FLAGS:
                raise SandboxError(f"DbtStep may not set {arg.split('=', 1)[0]}: the sandbox fixes it")
        return {"kind": kind, "args": list(args)}
    if isinstance(step, CaptureStep):
        return {
            "kind": kind,
            "out": workspace_relative(step.out, "CaptureStep.out"),
            "manifest": workspace_relative(step.manifest, "CaptureStep.manifest"),
        }
    if isinstance(step, WriteStep):
        if not isinstance(step.text, str):
            raise SandboxError(f"WriteStep.text must be a string, got {type(step.text).__name__}")
        return {"kind": kind, "path": workspace_relative(step.path, "WriteStep.path"), "text": step.text}
    if isinstance(step, RestoreDbStep):
        return {"kind": kind, "source": workspace_relative(step.source, "RestoreDbStep.source")}
    assert isinstance(step, QueryStep)
    if step.max_rows < 0 or step.max_rows > 100_000:
        raise SandboxError(f"QueryStep.max_rows must be 0..100000, got {step.max_rows}")
    return {
        "kind": kind,
        "db": workspace_relative(step.db, "QueryStep.db"),
        "sql": str(step.sql),
        "max_rows": int(step.max_rows),
    }

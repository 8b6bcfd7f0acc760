"""Sandboxed dbt builds of untrusted projects: bubblewrap, a locked-down DuckDB, a pinned clock, bounds.

Every build of a harvested or agent-edited project goes through ``run_steps``: one child process,
inside bubblewrap (no network, read-only system, only the workspace writable, an allow-listed
environment), running dbt in-process with DuckDB confined to the workspace by a dbt-duckdb plugin,
under libfaketime, bounded in wall time, memory, file size, workspace disk and relation size.
"""

from dbt_harvest.harvester.sandbox.command import sandbox_available
from dbt_harvest.harvester.sandbox.inside.harvest_fingerprint import fingerprint_sql
from dbt_harvest.harvester.sandbox.limits import Limits
from dbt_harvest.harvester.sandbox.profile import write_profile
from dbt_harvest.harvester.sandbox.runner import run_steps
from dbt_harvest.harvester.sandbox.steps import (
    CaptureStep,
    DbtStep,
    QueryStep,
    RestoreDbStep,
    SandboxRun,
    Step,
    StepResult,
    WriteStep,
)

__all__ = [
    "CaptureStep",
    "DbtStep",
    "Limits",
    "QueryStep",
    "RestoreDbStep",
    "SandboxRun",
    "Step",
    "StepResult",
    "WriteStep",
    "fingerprint_sql",
    "run_steps",
    "sandbox_available",
    "write_profile",
]

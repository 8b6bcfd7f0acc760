"""The bounds one sandboxed run is held to: wall time, memory, file size, workspace disk, relation size.

Kept apart from the runner so that callers (harvest add, mint, the eval environment) can size a run
without importing the machinery that enforces it. Every writable place inside the sandbox has a bound
here: the workspace (``workspace_bytes``), /tmp (``tmp_bytes``) and /dev/shm (``shm_bytes``); the root
and /dev are read-only. So a build holds at most ``memory_bytes + tmp_bytes + shm_bytes`` of RAM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dbt_harvest.core.errors import SandboxError


@dataclass(frozen=True)
class Limits:
    """Per-run bounds. Each is enforced by a different mechanism (see docs in runner.py)."""

    wall_s: float = 900.0  # the whole process group is killed at this wall-clock time
    memory_bytes: int = 6 << 30  # RLIMIT_AS of every sandboxed process, and a cap on the tree's RSS
    file_bytes: int = 2 << 30  # RLIMIT_FSIZE: no single file may grow beyond this
    workspace_bytes: int = 4 << 30  # disk use of the whole workspace, polled by the watchdog
    duckdb_memory_limit: str = "2GB"  # DuckDB's own memory_limit (it spills to disk beyond it)
    relation_rows: int = 50_000_000  # no built or captured table may hold more rows
    duckdb_threads: int = 1
    tmp_bytes: int = 256 << 20  # size of the sandbox's private tmpfs /tmp (it lives in RAM)
    shm_bytes: int = 4 << 20  # size of the sandbox's /dev/shm (semaphores of Python and libfaketime)

    #: the longest wall bound accepted: a week (a bound must exist; `inf` or NaN is refused)
    MAX_WALL_S = 7 * 24 * 3600.0

    def __post_init__(self) -> None:
        wall = self.wall_s
        if (
            isinstance(wall, bool)
            or not isinstance(wall, (int, float))
            or not math.isfinite(wall)
            or not 0 < wall <= self.MAX_WALL_S
        ):
            raise SandboxError(
                f"invalid sandbox limits: wall_s {wall!r} out of range; the wall-time bound must be a finite "
                f"number of seconds above 0 and at most {self.MAX_WALL_S:g} (e.g. --timeout 900)"
            )
        checks = {
            "wall_s": self.wall_s > 0,
            "memory_bytes": self.memory_bytes >= 256 << 20,
            "file_bytes": self.file_bytes > 0,
            "workspace_bytes": self.workspace_bytes > 0,
            "relation_rows": self.relation_rows > 0,
            "duckdb_threads": self.duckdb_threads >= 1,
            "tmp_bytes": self.tmp_bytes >= 1 << 20,
            "shm_bytes": 64 << 10 <= self.shm_bytes <= 256 << 20,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise SandboxError(f"invalid sandbox limits: {', '.join(bad)} out of range ({self})")
        if not self.duckdb_memory_limit.strip() or "'" in self.duckdb_memory_limit:
            raise SandboxError(f"invalid duckdb_memory_limit {self.duckdb_memory_limit!r}; use e.g. '2GB'")

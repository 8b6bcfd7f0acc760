"""A warm sandbox child: one bounded process that runs batch after batch of steps on one workspace.

``run_steps`` starts a child per call, so every call pays for bubblewrap, the interpreter, importing
dbt and a full parse (about three seconds on a small project, far more on a large one). Minting
builds many variants of the same pin one after another; a ``SandboxSession`` keeps one child alive
across them. The child reads one batch per line on its stdin and runs it exactly as a one-shot child
would, dbt's partial parsing sees only the file a variant changed, and the parent enforces the same
bounds per batch (wall time, memory, workspace disk). A batch that crosses a bound kills the child;
the next batch starts a new one. The child never outlives the session (``close``, or the parent's
death through bubblewrap's --die-with-parent).

``isolate=True`` (sandboxed only) runs each batch in a fork of the warm child, made after dbt is imported,
and removes what the batch left in memory, in processes and in the sandbox's /tmp and /dev/shm before
the next batch (see ``inside/child.py``): for builds of untrusted edits (the eval environment's
fallback, ``harvester.grading.warm``), where one build must not be able to leave anything for the next.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from dbt_harvest.core.errors import SandboxError
from dbt_harvest.harvester.sandbox import safe_fs
from dbt_harvest.harvester.sandbox.limits import Limits
from dbt_harvest.harvester.sandbox.runner import (
    Launch,
    _watch,
    collect,
    finish,
    log_path_for,
    new_result_name,
    prepare,
    send_line,
    start,
)
from dbt_harvest.harvester.sandbox.steps import SandboxRun, Step, step_request

CLOSE_GRACE_S = 5.0


class SandboxSession:
    """One warm child for ``workspace``; use as a context manager, call ``run`` per batch."""

    def __init__(
        self,
        workspace: Path,
        project_dir: str,
        *,
        clock: str,
        sandboxed: bool = True,
        limits: Limits = Limits(),
        log_path: Path | None = None,
        duckdb_scope: str = "workspace",
        isolate: bool = False,
    ) -> None:
        if isolate and not sandboxed:
            raise SandboxError("isolated batches need the sandbox (bubblewrap's PID namespace); pass sandboxed=True")
        self._launch: Launch = prepare(
            workspace,
            project_dir,
            clock=clock,
            sandboxed=sandboxed,
            limits=limits,
            body={"serve": True, "isolate": isolate},
            duckdb_scope=duckdb_scope,
        )
        self.limits = limits
        self.log_path = log_path_for(self._launch, workspace, log_path, "session.log")
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_fd = -1
        self.starts = 0

    @property
    def workspace(self) -> Path:
        return self._launch.workspace

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._reap()
        self._proc, self._log_fd = start(self._launch, self.log_path, stdin=subprocess.PIPE)
        self.starts += 1
        return self._proc

    def run(self, steps: Sequence[Step], *, stop_on_failure: bool = True) -> SandboxRun:
        """Run one batch in the warm child (started, or restarted after a kill, as needed)."""
        requests = [step_request(step) for step in steps]
        result_name = new_result_name()
        marker = result_name + ".done"
        proc = self._ensure_child()
        line = json.dumps({"steps": requests, "result_file": result_name, "stop_on_failure": stop_on_failure})
        send_line(proc, line)
        outcome = _watch(
            proc,
            self.workspace,
            self.limits,
            time.monotonic(),
            until=lambda: safe_fs.lstat(self.workspace, marker) is not None,
        )
        run = collect(self._launch, steps, result_name, outcome, self.log_path, stop_on_failure)
        if outcome.exited:
            self._reap()
        return run

    def _reap(self) -> None:
        """Forget a child that is gone (after a kill or a crash) and tidy after it."""
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self._proc.wait(timeout=CLOSE_GRACE_S)
        except subprocess.TimeoutExpired as exc:
            raise SandboxError(f"the sandbox child {self._proc.pid} did not exit after SIGKILL") from exc
        if self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        if self._log_fd >= 0:
            os.close(self._log_fd)
            self._log_fd = -1
        finish(self._launch, self._proc.pid)
        self._proc = None

    def close(self) -> None:
        """End the child: close its stdin, give it a moment to exit, then kill what is left."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        self._reap()


__all__ = ["SandboxSession"]

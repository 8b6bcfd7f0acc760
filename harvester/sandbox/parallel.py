"""run_parallel: several independent batches of steps at once, in one sandboxed child, one workspace each.

``harvest add`` builds a project twice (the second time in another workspace under another database
name) to tell stable outputs from unstable ones. Two one-shot children each pay for the interpreter,
importing dbt and building its schemas, and on a small project that is most of a build. A parallel
child does that once: it starts (bubblewrap binds every workspace, each writable with its own profile
laid over it read-only, the first at /workspace and the others at /workspace-2, ...), imports dbt, then
forks one process per workspace, before any project code ran. Each fork runs its batch exactly as a
one-shot child of that workspace would: its own profile, database file, DuckDB lockdown and results.

The child can start before its workspaces hold anything (``ParallelChild.start``): each needs only its
profile folder, bound read-only then and filled by write_profile later, so the import overlaps the
host's own work (``harvest add`` vendors packages and copies the tree meanwhile); ``run`` then reads
each workspace's profile and hands the child its batches. Until then the child has run nothing but
dbt's import.

The bounds are the one-shot run's: wall time for the whole child, each workspace's disk against the
workspace bound, memory against one child's bound per workspace (the forks share the imported pages,
so counting every fork's resident memory overstates it), and every process's own rlimits. A crossed
bound kills the whole child, and every batch it had not finished reports why.

The batches are independent in what they read (fresh workspaces, fresh database files, forks of a
process that has run no project code); they are not isolated from each other, since all of them run
the same untrusted project in the same sandbox. That is what the gold builds need: the host is
protected as for any build, and a project that wanted to make its builds disagree could do so anyway.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from dbt_harvest.core.errors import SandboxError
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.harvester.sandbox.limits import Limits
from dbt_harvest.harvester.sandbox.profile import ensure_profile_dir, read_profile_meta
from dbt_harvest.harvester.sandbox.runner import _watch, collect, finish, new_result_name, prepare, send_line, start
from dbt_harvest.harvester.sandbox.steps import SandboxRun, Step, step_request

CLOSE_GRACE_S = 5.0


class ParallelChild:
    """One sandboxed child for ``workspaces``: ``start`` it early, ``run`` one batch per workspace once.

    Use as a context manager: leaving it ends a child that never ran (or is still running) and tidies
    after it. ``log_path`` (outside every workspace) receives the child's output and each run's summary.
    """

    def __init__(
        self,
        workspaces: Sequence[Path],
        project_dir: str,
        *,
        clock: str,
        log_path: Path,
        sandboxed: bool = True,
        limits: Limits = Limits(),
        duckdb_scope: str = "workspace",
        toolchain: Toolchain | None = None,
    ) -> None:
        if len(workspaces) < 2:
            raise SandboxError(
                f"a parallel child needs at least two workspaces, got {len(workspaces)}; use run_steps for one"
            )
        if any(_inside(Path(w), Path(log_path)) for w in workspaces):
            raise SandboxError(f"the parallel child's log {log_path} must lie outside every workspace")
        self.project_dir = project_dir
        self.limits = limits
        self.log_path = Path(os.path.abspath(log_path))
        self._launch = prepare(
            Path(workspaces[0]),
            project_dir,
            clock=clock,
            sandboxed=sandboxed,
            limits=limits,
            body={"steps": []},
            duckdb_scope=duckdb_scope,
            siblings=[Path(w) for w in workspaces[1:]],
            toolchain=toolchain,
        )
        self.toolchain = toolchain.name if toolchain is not None else ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_fd = -1
        self._ran = False

    @property
    def workspaces(self) -> tuple[Path, ...]:
        return (self._launch.workspace, *self._launch.siblings)

    def __enter__(self) -> ParallelChild:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> ParallelChild:
        """Start the child (it imports dbt, then waits for ``run``); each workspace gets its profile folder."""
        if self._proc is not None or self._ran:
            raise SandboxError("this parallel child was already started")
        for workspace in self.workspaces:
            ensure_profile_dir(workspace)
        self._proc, self._log_fd = start(self._launch, self.log_path, stdin=subprocess.PIPE)
        return self

    def run(self, batches: Sequence[Sequence[Step]], *, stop_on_failure: bool = True) -> tuple[SandboxRun, ...]:
        """Run ``batches[i]`` in ``workspaces[i]`` (each prepared with write_profile by now), all at once.

        Returns one SandboxRun per workspace, in order, each as ``run_steps`` on that workspace alone
        would report it (a capture's file is a host copy beside that workspace). Once per child."""
        if len(batches) != len(self.workspaces):
            raise SandboxError(f"{len(batches)} batches for {len(self.workspaces)} workspaces: give one each")
        if self._ran:
            raise SandboxError("a parallel child runs its batches once; start another")
        metas = [read_profile_meta(workspace, self.project_dir) for workspace in self.workspaces]
        other = next((meta.toolchain for meta in metas if meta.toolchain != self.toolchain), None)
        if other is not None:
            raise SandboxError(
                f"a workspace's profile names toolchain {other or '(this interpreter)'}, the child runs "
                f"{self.toolchain or '(this interpreter)'}: start the child with the pin's toolchain"
            )
        requests = [[step_request(step) for step in batch] for batch in batches]
        if self._proc is None:
            self.start()
        proc = self._proc
        assert proc is not None
        self._ran = True
        names = [new_result_name() for _ in batches]
        line = json.dumps(
            {
                "batches": [
                    {
                        "steps": steps,
                        "result_file": name,
                        "stop_on_failure": stop_on_failure,
                        "project_dir": meta.project_dir,
                        "db_file": meta.db_file,
                    }
                    for steps, name, meta in zip(requests, names, metas)
                ]
            }
        )
        send_line(proc, line, close=True)
        try:
            outcome = _watch(
                proc, self._launch.workspace, self.limits, time.monotonic(), siblings=self._launch.siblings
            )
        finally:
            self._close_log()
        runs = []
        for workspace, steps, name in zip(self.workspaces, batches, names):
            own = replace(self._launch, workspace=workspace, scratch=workspace / self._launch.scratch_rel, siblings=())
            runs.append(collect(own, steps, name, outcome, self.log_path, stop_on_failure))
        finish(self._launch, proc.pid)
        self._proc = None
        return tuple(runs)

    def _close_log(self) -> None:
        if self._log_fd >= 0:
            os.close(self._log_fd)
            self._log_fd = -1

    def close(self) -> None:
        """End a child that is still there (never run, or interrupted): close its stdin, kill what is left."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=CLOSE_GRACE_S)
        except subprocess.TimeoutExpired as exc:
            raise SandboxError(f"the sandbox child {proc.pid} did not exit after SIGKILL") from exc
        finally:
            self._close_log()
        finish(self._launch, proc.pid)


def run_parallel(
    workspaces: Sequence[Path],
    project_dir: str,
    batches: Sequence[Sequence[Step]],
    *,
    clock: str,
    log_path: Path,
    sandboxed: bool = True,
    limits: Limits = Limits(),
    stop_on_failure: bool = True,
    duckdb_scope: str = "workspace",
) -> tuple[SandboxRun, ...]:
    """``ParallelChild(...).run(batches)``: ``batches[i]`` on ``workspaces[i]`` (each prepared with
    write_profile), all in one child started now. Raises SandboxError when the child cannot start;
    every failure of the project comes back in the runs."""
    with ParallelChild(
        workspaces,
        project_dir,
        clock=clock,
        log_path=log_path,
        sandboxed=sandboxed,
        limits=limits,
        duckdb_scope=duckdb_scope,
    ) as child:
        return child.run(batches, stop_on_failure=stop_on_failure)


def _inside(workspace: Path, path: Path) -> bool:
    root, target = os.path.realpath(workspace), os.path.realpath(os.path.abspath(path))
    return target == root or target.startswith(root + os.sep)


__all__ = ["ParallelChild", "run_parallel"]

"""run_steps: run dbt commands, gold capture and queries on an untrusted project in a bounded child.

One call starts one child process (inside bubblewrap unless ``sandboxed=False``), which runs the steps
in order, warm, and reports each one. The parent enforces the bounds while it waits:

- wall time: the whole process group is SIGKILLed at ``wall_s`` (bwrap's PID namespace and
  --die-with-parent take every sandboxed process down with it);
- memory: RLIMIT_AS on every process, DuckDB's own memory_limit, and the tree's resident memory
  polled from /proc (killed above ``memory_bytes``);
- files: RLIMIT_FSIZE bounds every file a child writes (Python ignores SIGXFSZ, so a write fails
  with EFBIG instead of the process dying);
- workspace disk: the watchdog sums the workspace's allocated blocks (more rarely when the walk gets
  slow) and kills the build above ``workspace_bytes``; it checks once more after the child exits;
- relation size: the child fails a dbt step whose database holds a table over ``relation_rows``
  rows, and the capture refuses to copy one.

Everything the parent touches in the workspace goes through ``safe_fs`` (no link followed, nothing
outside the workspace reachable): the log when it lies in the workspace, the results, the scratch
folder, the disk walk. What a capture produced leaves the workspace as a copy the host alone owns
(``captures_dir``), made from an fd opened beneath the workspace, and only that copy is checked and
handed out: nothing the child can still write is read later.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.clock import clock_env
from dbt_harvest.core.errors import SandboxError, ToolchainError
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.harvester.sandbox import command, safe_fs, watchdog
from dbt_harvest.harvester.sandbox.gold_check import gold_problem
from dbt_harvest.harvester.sandbox.limits import Limits
from dbt_harvest.harvester.sandbox.profile import META_FILE, PROFILE_DIR, ProfileMeta, read_profile_meta
from dbt_harvest.harvester.sandbox.results import ResultShapeError, parse_steps, peak_rss, read_result_file
from dbt_harvest.harvester.sandbox.steps import CaptureStep, SandboxRun, Step, StepResult, step_kind, step_request
from dbt_harvest.harvester.toolchain import ensure_toolchain, toolchain_python

SCRATCH_DIR = ".harvest_tmp"
LOG_DIR = ".harvest_logs"
POLL_S = 0.05
MAX_REQUEST_CHARS = 100_000  # the request travels as one argv string (Linux caps one at 128 KiB)
#: Where DuckDB may touch files: the whole workspace, or only what the database needs (see
#: inside/harvest_lockdown.py). Agent and reward builds use "database".
DUCKDB_SCOPES = ("workspace", "database")


@dataclass(frozen=True)
class Outcome:
    """What the watchdog saw: exit status, why it killed (if it did), peaks and timings."""

    returncode: int  # 0 while the child still runs (a warm child that finished a batch)
    killed_reason: str
    timed_out: bool
    peak_tree_rss: int
    child_maxrss: int
    wall_s: float
    kill_s: float
    exited: bool = True


def captures_dir(workspace: Path) -> Path:
    """The host's own folder beside ``workspace`` where captured files are copied (never bound inside)."""
    workspace = Path(workspace)
    return workspace.with_name(f"{workspace.name}.captured")


def _fresh_dir(workspace: Path, rel: str) -> None:
    """A real, empty folder at ``rel`` (whatever the project put there, a link included, is removed)."""
    safe_fs.remove(workspace, rel)
    safe_fs.make_dirs(workspace, rel)


def _in_workspace(workspace: Path, path: Path) -> str | None:
    """``path`` relative to ``workspace`` when it lies inside it (lexically), else None."""
    try:
        return Path(path).relative_to(workspace).as_posix()
    except ValueError:
        return None


def _open_log_fd(workspace: Path, log_path: Path, flags: int) -> int:
    """Open a log: through safe_fs when it lies in the workspace (a link there is never followed), else
    as the host's own file (its last component still not followed)."""
    rel = _in_workspace(workspace, log_path)
    if rel is not None:
        return safe_fs.open_file(workspace, rel, flags, 0o644, make_parents=bool(flags & os.O_CREAT))
    if flags & os.O_CREAT:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(log_path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def _mib(value: int) -> str:
    return f"{value / (1 << 20):.0f} MiB"


def _rlimits(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _open_log(workspace: Path, log_path: Path) -> int:
    """A fresh log. In the workspace its folders are the sandbox's own: whatever a previous build left on
    the way that is not a folder (a link to a host folder, say) is removed, never followed."""
    rel = _in_workspace(workspace, log_path)
    if rel is not None:
        parts = safe_fs.parts_of(rel)
        for index in range(1, len(parts)):
            folder = "/".join(parts[:index])
            entry = safe_fs.lstat(workspace, folder)
            if entry is not None and entry.kind != "dir":
                safe_fs.remove(workspace, folder)
    return _open_log_fd(workspace, log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)


def _watch(
    proc: subprocess.Popen[bytes],
    workspace: Path,
    limits: Limits,
    started: float,
    until: Callable[[], bool] | None = None,
    siblings: tuple[Path, ...] = (),
) -> Outcome:
    """Wait for the child (or, for a warm child, until ``until()`` holds), killing its process group
    when a bound is crossed. A parallel child's ``siblings`` are bounded like ``workspace`` (each its own
    disk bound), and its tree's memory bound is one child's per workspace."""
    memory_bytes = limits.memory_bytes * (1 + len(siblings))
    killed_reason, timed_out = "", False
    peak, kill_at = 0, 0.0
    next_disk, disk_cost = started, 0.0
    status = None
    while True:
        pid, raw_status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            status = (raw_status, usage)
            break
        if until is not None and not killed_reason and until():
            return Outcome(0, "", False, peak, 0, time.monotonic() - started, 0.0, exited=False)
        now = time.monotonic()
        if not killed_reason:
            rss = watchdog.tree_rss_bytes(proc.pid)
            peak = max(peak, rss)
            if now - started > limits.wall_s:
                killed_reason = f"wall time limit of {limits.wall_s:g} s exceeded; the build was killed"
                timed_out = True
            elif rss > memory_bytes:
                killed_reason = (
                    f"memory use {_mib(rss)} exceeded the limit of {_mib(memory_bytes)}; the build was killed"
                )
            elif now >= next_disk:
                t0 = time.monotonic()
                used = max(safe_fs.disk_usage(folder) for folder in (workspace, *siblings))
                disk_cost = time.monotonic() - t0
                next_disk = time.monotonic() + max(0.25, 10 * disk_cost)
                if used > limits.workspace_bytes:
                    killed_reason = (
                        f"workspace disk use {_mib(used)} exceeded the limit of "
                        f"{_mib(limits.workspace_bytes)}; the build was killed"
                    )
            if killed_reason:
                kill_at = time.monotonic()
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(POLL_S)
    ended = time.monotonic()
    raw_status, usage = status
    returncode = os.waitstatus_to_exitcode(raw_status)
    proc.returncode = returncode
    # anything the sandbox left in our process group (there should be nothing) goes too
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return Outcome(
        returncode=returncode,
        killed_reason=killed_reason,
        timed_out=timed_out,
        peak_tree_rss=peak,
        child_maxrss=usage.ru_maxrss * 1024,
        wall_s=ended - started,
        kill_s=(ended - kill_at) if kill_at else 0.0,
    )


def _log_tail(workspace: Path, log_path: Path) -> str:
    """The last non-empty line of the child's log, for a one-line reason (never follows a symlink)."""
    try:
        fd = _open_log_fd(workspace, log_path, os.O_RDONLY)
    except (OSError, SandboxError):
        return ""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - 4096), os.SEEK_SET)
        data = os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)
    lines = [line.strip() for line in data.splitlines() if line.strip()]
    return " ".join(lines[-1].split())[:300] if lines else ""


@dataclass(frozen=True)
class Launch:
    """How to start one child for a workspace: argv, environment, and the request it reads."""

    workspace: Path
    argv: list[str]
    env: dict[str, str]
    cwd: str
    scratch: Path
    sandboxed: bool
    limits: Limits
    siblings: tuple[Path, ...] = ()  # a parallel child's further workspaces (harvester.sandbox.parallel)

    @property
    def scratch_rel(self) -> str:
        return self.scratch.relative_to(self.workspace).as_posix()


def _checked_workspace(workspace: Path) -> Path:
    workspace = Path(workspace).resolve()
    if not workspace.is_dir() or workspace.is_symlink():
        raise SandboxError(f"workspace {workspace} is not a directory")
    command.refuse_sensitive_workspace(workspace)
    return workspace


def prepare(
    workspace: Path,
    project_dir: str,
    *,
    clock: str,
    sandboxed: bool,
    limits: Limits,
    body: dict[str, Any],
    duckdb_scope: str = "workspace",
    siblings: Sequence[Path] = (),
    toolchain: Toolchain | None = None,
) -> Launch:
    """Check the workspace, profile, sandbox and clock; build the child's request around ``body``.

    ``body`` holds either the steps of a one-shot run (``steps``, ``result_file``, ``stop_on_failure``)
    or ``{"serve": True}`` for a warm child that reads batches from stdin. Nothing is written yet.
    ``duckdb_scope`` is what DuckDB may touch: "workspace", or "database" (agent and reward builds).
    ``siblings`` (a parallel child, ``harvester.sandbox.parallel``) are further workspaces, checked like
    the first; the request then lists where each is bound under ``parallel``, and no profile is read
    yet: a parallel child starts before its workspaces are filled, and each batch names its profile.
    The child runs the interpreter of the toolchain its profile names (``write_profile(toolchain=...)``),
    or of ``toolchain`` for a parallel child (made here if this home lacks it); else this one.
    """
    if duckdb_scope not in DUCKDB_SCOPES:
        raise SandboxError(f"unknown duckdb_scope {duckdb_scope!r}; use one of {', '.join(DUCKDB_SCOPES)}")
    workspace, others = _checked_workspaces(workspace, siblings)
    meta = None if others else read_profile_meta(workspace, project_dir)
    if sandboxed:
        _require_sandbox()
    clock_vars = clock_env(clock)
    scratch = workspace / SCRATCH_DIR
    paths = _child_paths(workspace, scratch, sandboxed)
    request = _request(paths, project_dir, meta, limits, sandboxed, duckdb_scope, body)
    if others:
        request["parallel"] = [paths.workspace] + [
            f"{command.SANDBOX_SIBLING_PREFIX}{index}" if sandboxed else str(sibling)
            for index, sibling in enumerate(others, start=2)
        ]
    python = _interpreter(meta, toolchain)
    env = command.child_env(paths, clock_vars, python)
    py = command.python_args(paths.code, _request_json(request), python)
    argv, popen_env, cwd = _command_line(workspace, others, limits, py, env, sandboxed, python)
    return Launch(workspace, argv, popen_env, cwd, scratch, sandboxed, limits, tuple(others))


def _interpreter(meta: ProfileMeta | None, toolchain: Toolchain | None) -> str | None:
    """The interpreter a child runs: its toolchain's (named by the profile, or given), None for this one."""
    if toolchain is not None:
        name = ensure_toolchain(toolchain).name
    elif meta is not None and meta.toolchain:
        name = meta.toolchain
    else:
        return None
    try:
        return str(toolchain_python(name))
    except ToolchainError as exc:
        raise SandboxError(str(exc)) from None


def _checked_workspaces(workspace: Path, siblings: Sequence[Path]) -> tuple[Path, list[Path]]:
    """The workspace and a parallel child's siblings, each checked and resolved; SandboxError unless distinct."""
    workspace = _checked_workspace(workspace)
    others = [_checked_workspace(sibling) for sibling in siblings]
    if len({workspace, *others}) != 1 + len(others):
        raise SandboxError("a parallel child needs distinct workspaces")
    return workspace, others


def _require_sandbox() -> None:
    """Refuse (SandboxError) a sandboxed run where bubblewrap cannot start a sandbox, saying why."""
    available, why = command.sandbox_available()
    if not available:
        raise SandboxError(f"{why}; or pass sandboxed=False (--no-sandbox) to build without isolation")


def _child_paths(workspace: Path, scratch: Path, sandboxed: bool) -> command.ChildPaths:
    """Where the child sees its workspace, code, home and temporary folder: the sandbox's fixed mount
    points, or (unsandboxed) the host's own paths, home and tmp under ``scratch``."""
    if sandboxed:
        return command.ChildPaths(
            workspace=command.SANDBOX_WORKSPACE, code=command.SANDBOX_CODE, home=command.SANDBOX_HOME, tmp="/tmp"
        )
    return command.ChildPaths(
        workspace=str(workspace),
        code=str(command.INSIDE_DIR),
        home=str(scratch / "home"),
        tmp=str(scratch / "tmp"),
    )


def _request(
    paths: command.ChildPaths,
    project_dir: str,
    meta: ProfileMeta | None,
    limits: Limits,
    sandboxed: bool,
    duckdb_scope: str,
    body: dict[str, Any],
) -> dict[str, Any]:
    """The child's request: where its project, profile and locked DuckDB are, its bounds, then ``body``."""
    return {
        "workspace": paths.workspace,
        "project_dir": meta.project_dir if meta else project_dir,
        "profiles_dir": f"{paths.workspace}/{PROFILE_DIR}",
        "profile_meta": META_FILE,
        "db_file": meta.db_file if meta else "",
        "result_file": "",
        "relation_rows": limits.relation_rows,
        "stop_on_failure": True,
        "locked_duckdb": command.SANDBOX_LOCKED_DUCKDB if sandboxed else str(command.LOCKED_DUCKDB),
        "lockdown": {
            "temp_subdir": f"{SCRATCH_DIR}/duckdb",
            "memory_limit": limits.duckdb_memory_limit,
            "threads": limits.duckdb_threads,
            "max_temp_directory_size": f"{max(1, limits.workspace_bytes >> 20)}MiB",
            "scope": duckdb_scope,
        },
        "steps": [],
        **body,
    }


def _request_json(request: dict[str, Any]) -> str:
    """The request as the one argv string it travels as; SandboxError when it is over MAX_REQUEST_CHARS."""
    request_json = json.dumps(request)
    if len(request_json) > MAX_REQUEST_CHARS:
        raise SandboxError(
            f"the sandbox request is {len(request_json)} characters (over {MAX_REQUEST_CHARS}); "
            "shorten the query SQL or split the steps"
        )
    return request_json


def _command_line(
    workspace: Path,
    others: Sequence[Path],
    limits: Limits,
    py: list[str],
    env: dict[str, str],
    sandboxed: bool,
    python: str | None = None,
) -> tuple[list[str], dict[str, str], str]:
    """The argv, environment and working folder the child starts with: ``py`` inside bwrap (which sets
    the child's ``env`` itself), or unsandboxed ``py`` in the workspace with ``env``."""
    if not sandboxed:
        return py, env, str(workspace)
    argv = command.bwrap_argv(
        workspace,
        workspace / PROFILE_DIR,
        limits.tmp_bytes,
        py,
        env,
        shm_bytes=limits.shm_bytes,
        siblings=[
            (sibling, f"{command.SANDBOX_SIBLING_PREFIX}{index}") for index, sibling in enumerate(others, start=2)
        ],
        python=python,
    )
    return argv, {"PATH": "/usr/bin:/bin"}, "/"


def start(
    launch: Launch, log_path: Path, *, stdin: int | None = subprocess.DEVNULL
) -> tuple[subprocess.Popen[bytes], int]:
    """A fresh scratch folder, then the child in its own session; returns it and the open log fd."""
    # nothing is written into the workspace before every check in prepare() has passed
    for workspace in (launch.workspace, *launch.siblings):
        _fresh_dir(workspace, launch.scratch_rel)
        for sub in ("duckdb", "home", "tmp"):
            safe_fs.make_dirs(workspace, f"{launch.scratch_rel}/{sub}")
    log_fd = _open_log(launch.workspace, log_path)
    try:
        proc = subprocess.Popen(
            launch.argv,
            stdin=stdin,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            cwd=launch.cwd,
            env=launch.env,
            start_new_session=True,
            preexec_fn=_rlimits(launch.limits),
        )
    except OSError as exc:
        os.close(log_fd)
        raise SandboxError(f"could not start the sandbox child: {exc}") from exc
    return proc, log_fd


def send_line(proc: subprocess.Popen[bytes], line: str, *, close: bool = False) -> None:
    """Write one request line to a warm or parallel child's stdin (closing it after when ``close``); a
    child that died meanwhile is not an error here: the watch sees it exit and collect reports why."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(line.encode("utf-8") + b"\n")
        if close:
            proc.stdin.close()
        else:
            proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass


def log_path_for(launch: Launch, given: Path, log_path: Path | None, default: str) -> Path:
    """The log's path, expressed under the resolved workspace when the caller named it under the
    workspace as given (so it is always opened through safe_fs, never by following a link)."""
    if log_path is None:
        return launch.workspace / LOG_DIR / default
    log_path = Path(os.path.abspath(log_path))
    for base in (Path(os.path.abspath(given)), launch.workspace):
        rel = _in_workspace(base, log_path)
        if rel is not None:
            return launch.workspace / safe_fs.relative_to_root(launch.workspace, rel)
    return log_path


def new_result_name() -> str:
    """A fresh workspace-relative path for one batch's results file."""
    return f"{SCRATCH_DIR}/result-{secrets.token_hex(8)}.json"


def collect(
    launch: Launch,
    steps: Sequence[Step],
    result_name: str,
    outcome: Outcome,
    log_path: Path,
    stop_on_failure: bool,
) -> SandboxRun:
    """Read one batch's results (untrusted), account for a kill or crash, and summarize it as a run."""
    workspace = launch.workspace
    kinds = [step_kind(step) for step in steps]
    killed_reason = outcome.killed_reason
    final_disk = safe_fs.disk_usage(workspace)
    if not killed_reason and final_disk > launch.limits.workspace_bytes:
        killed_reason = (
            f"workspace disk use {_mib(final_disk)} exceeded the limit of {_mib(launch.limits.workspace_bytes)}"
        )
    results: list[StepResult] = []
    peak_child = 0
    shape_error = ""
    try:
        payload = read_result_file(workspace, result_name)
        results = parse_steps(payload, kinds)
        peak_child = peak_rss(payload)
    except ResultShapeError as exc:
        shape_error = str(exc)
    finally:
        for leftover in (result_name, result_name + ".tmp", result_name + ".done"):
            _remove(workspace, leftover)

    results = [_checked_capture(result, step, launch) for result, step in zip(results, steps)]
    finished_all = len(results) == len(kinds)
    stopped_on_failure = stop_on_failure and results and not results[-1].ok
    if not finished_all and not stopped_on_failure:
        if killed_reason:
            reason = killed_reason
        elif outcome.returncode < 0:
            sig = -outcome.returncode
            reason = f"the sandbox child was killed by signal {sig} ({signal.Signals(sig).name})"
        elif shape_error and outcome.returncode == 0:
            reason = shape_error
        else:
            tail = _log_tail(workspace, log_path)
            reason = f"the sandbox child exited with code {outcome.returncode}" + (f": {tail}" if tail else "")
        detail: dict[str, Any] = {"interrupted": True, "wall_s": round(outcome.wall_s, 3)}
        if outcome.kill_s:
            detail["kill_s"] = round(outcome.kill_s, 3)
        results.append(StepResult(kind=kinds[len(results)], ok=False, first_error=reason, detail=detail))
    ok = (
        not killed_reason
        and outcome.returncode == 0
        and len(results) == len(kinds)
        and all(result.ok for result in results)
    )
    _append_log(
        workspace,
        log_path,
        f"\n[harvest sandbox] sandboxed={launch.sandboxed} ok={ok} returncode={outcome.returncode} "
        f"wall_s={outcome.wall_s:.3f} kill_s={outcome.kill_s:.3f} peak_tree_rss={outcome.peak_tree_rss} "
        f"killed_reason={killed_reason!r}\n",
    )
    return SandboxRun(
        ok=ok,
        timed_out=outcome.timed_out,
        killed_reason=killed_reason,
        returncode=outcome.returncode,
        steps=tuple(results),
        log_path=log_path,
        wall_s=outcome.wall_s,
        peak_rss_bytes=max(outcome.peak_tree_rss, outcome.child_maxrss, peak_child),
    )


def finish(launch: Launch, pid: int) -> None:
    """After the child is gone: remove the scratch folder (and, unsandboxed, libfaketime's shm files)."""
    _cleanup_scratch(launch)
    for sibling in launch.siblings:
        _remove(sibling, launch.scratch_rel)
    if not launch.sandboxed:
        _remove_faketime_shm(pid)


def run_steps(
    workspace: Path,
    project_dir: str,
    steps: Sequence[Step],
    *,
    clock: str,
    sandboxed: bool = True,
    limits: Limits = Limits(),
    log_path: Path | None = None,
    stop_on_failure: bool = True,
    duckdb_scope: str = "workspace",
) -> SandboxRun:
    """Run ``steps`` on the dbt project at ``workspace/project_dir`` in one bounded child process.

    Call write_profile(workspace, project_dir, …) first. Raises SandboxError when the run cannot start
    (no bubblewrap and ``sandboxed`` left True, no profile, bad steps, no libfaketime); every failure
    of the project itself comes back in the SandboxRun instead. A successful capture's file comes back
    as a host copy: ``StepResult.detail["file"]`` (see ``captures_dir``).
    """
    requests = [step_request(step) for step in steps]
    result_name = new_result_name()
    launch = prepare(
        workspace,
        project_dir,
        clock=clock,
        sandboxed=sandboxed,
        limits=limits,
        body={"steps": requests, "result_file": result_name, "stop_on_failure": stop_on_failure},
        duckdb_scope=duckdb_scope,
    )
    log_path = log_path_for(launch, workspace, log_path, "sandbox.log")
    proc, log_fd = start(launch, log_path)
    try:
        outcome = _watch(proc, launch.workspace, limits, time.monotonic())
    finally:
        os.close(log_fd)
    run = collect(launch, steps, result_name, outcome, log_path, stop_on_failure)
    finish(launch, proc.pid)
    return run


def _checked_capture(result: StepResult, step: Step, launch: Launch) -> StepResult:
    """A successful capture stays successful only if its file, copied out of the workspace (beneath it,
    no link followed, bounded), holds exactly the reported tables. The copy is what callers get."""
    if not (result.ok and isinstance(step, CaptureStep)):
        return result
    dest = captures_dir(launch.workspace) / Path(step.out).name
    try:
        safe_fs.copy_out(launch.workspace, step.out, dest, max_bytes=launch.limits.workspace_bytes)
    except (safe_fs.UnsafePathError, OSError) as exc:
        return StepResult(kind=result.kind, ok=False, first_error=f"gold file {step.out}: {exc}", detail=result.detail)
    problem = gold_problem(dest, [table["name"] for table in result.detail["tables"]])
    if problem:
        dest.unlink(missing_ok=True)
        return StepResult(kind=result.kind, ok=False, first_error=problem, detail=result.detail)
    return StepResult(kind=result.kind, ok=True, first_error="", detail={**result.detail, "file": str(dest)})


def _remove(workspace: Path, rel: str) -> None:
    try:
        safe_fs.remove(workspace, rel)
    except (safe_fs.UnsafePathError, OSError):
        pass


def _append_log(workspace: Path, log_path: Path, text: str) -> None:
    """Append a summary line to the log, never through a symlink the project may have put there."""
    try:
        fd = _open_log_fd(workspace, log_path, os.O_WRONLY | os.O_APPEND)
    except (OSError, SandboxError):
        return
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def _remove_faketime_shm(pid: int) -> None:
    """libfaketime keeps its clock in /dev/shm under the process id and removes it at a normal exit;
    a killed unsandboxed child would leave it on the host. (Inside bubblewrap /dev is private.)"""
    for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
        path = Path("/dev/shm") / name
        try:
            if path.is_file() and not path.is_symlink():
                path.unlink()
        except OSError:
            pass


def _cleanup_scratch(launch: Launch) -> None:
    """Remove the scratch folder (DuckDB spill, result temp files); never follows a symlink."""
    _remove(launch.workspace, launch.scratch_rel)

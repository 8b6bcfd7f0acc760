"""The child's command line: the bubblewrap invocation, the read-only binds, the allow-listed environment.

Pure functions from paths and settings to argv/env, so that what the sandbox exposes can be read (and
tested) in one place. Inside the sandbox the workspace is always /workspace and our child code is
/opt/harvest, whatever the host paths are; nothing else is writable; the network, IPC, PID and UTS
namespaces are private; /tmp is a fresh, size-bounded tmpfs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from core.errors import SandboxError
from core.home import harvest_home

INSIDE_DIR = Path(__file__).resolve().parent / "inside"
SANDBOX_WORKSPACE = "/workspace"
SANDBOX_CODE = "/opt/harvest"
SANDBOX_HOME = "/tmp/home"

# The only variables a child ever sees. Nothing is passed through from the parent's environment.
ALLOWED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "TZ",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONNOUSERSITE",
        "PYTHONUNBUFFERED",
        "DBT_SEND_ANONYMOUS_USAGE_STATS",
        "DBT_USE_COLORS",
        "DBT_VERSION_CHECK",
        "DO_NOT_TRACK",
        "HARVEST_WORKSPACE",
        "LD_PRELOAD",
        "FAKETIME",
        "FAKETIME_DONT_FAKE_MONOTONIC",
        "FAKETIME_FORCE_MONOTONIC_FIX",
    }
)

# Variables that appear inside the child without being passed: bwrap's --chdir sets PWD, and
# libfaketime records its shared-memory clock in FAKETIME_SHARED. Neither carries anything of the host.
SET_INSIDE_ENV = frozenset({"PWD", "FAKETIME_SHARED"})

# Top-level system paths bound read-only (or recreated as the same symlink) when they exist.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Single /etc files the dynamic linker and Python may consult; nothing with users or secrets.
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf")


@dataclass(frozen=True)
class ChildPaths:
    """Where the child finds its workspace, code and home, as the child sees them."""

    workspace: str
    code: str
    home: str
    tmp: str


def child_env(paths: ChildPaths, clock: dict[str, str]) -> dict[str, str]:
    """The complete environment of the child: fixed values plus the clock, nothing inherited."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": paths.home,
        "TMPDIR": paths.tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONPATH": paths.code,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_USE_COLORS": "false",
        "DBT_VERSION_CHECK": "false",
        "DO_NOT_TRACK": "1",
        "HARVEST_WORKSPACE": paths.workspace,
        **clock,
    }
    extra = set(env) - ALLOWED_ENV
    if extra:
        raise SandboxError(f"internal: child environment has variables outside the allow-list: {sorted(extra)}")
    return env


def python_roots() -> list[Path]:
    """Folders the child's Python needs: the interpreter's prefixes and where dbt and duckdb live."""
    roots: list[Path] = []
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        roots.append(Path(prefix).resolve())
    roots.append(Path(os.path.realpath(sys.executable)).parent)
    for module in ("duckdb", "dbt.adapters.duckdb", "dbt.cli"):
        spec = importlib.util.find_spec(module)
        if spec is None:
            raise SandboxError(f"{module} is not importable here; install dbt-duckdb (pip install -e .)")
        locations = list(spec.submodule_search_locations or []) or [str(Path(spec.origin or "").parent)]
        for location in locations:
            # the site-packages folder that holds the top-level package
            top = Path(location).resolve()
            for _ in module.split("."):
                top = top.parent
            roots.append(top)
    return minimal_roots(roots)


def minimal_roots(paths: list[Path]) -> list[Path]:
    """Drop paths already covered by another path or by the system binds; keep order stable."""
    system = [Path(p) for p in SYSTEM_PATHS]
    unique = sorted(set(paths), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if any(path == root or root in path.parents for root in kept + system):
            continue
        kept.append(path)
    return kept


def forbidden_paths() -> set[Path]:
    """Folders no sandbox may see: the user's home, HARVEST_HOME and this repository (it holds gold)."""
    return {Path.home().resolve(), Path(__file__).resolve().parents[2], harvest_home()}


def refuse_sensitive_binds(roots: list[Path]) -> None:
    """Refuse a read-only bind that is, or contains, a forbidden folder (or is the root)."""
    forbidden = forbidden_paths()
    for root in roots:
        if root == Path("/") or any(root == bad or root in bad.parents for bad in forbidden):
            raise SandboxError(
                f"refusing to bind {root} into the sandbox: it is or contains the home folder, "
                "HARVEST_HOME or this repository; install Python and dbt-duckdb elsewhere"
            )


def refuse_sensitive_workspace(workspace: Path) -> None:
    """Refuse a workspace that is, or contains, a forbidden folder (sandboxed or not)."""
    workspace = workspace.resolve()
    if workspace == Path("/") or any(workspace == bad or workspace in bad.parents for bad in forbidden_paths()):
        raise SandboxError(
            f"refusing to use {workspace} as a sandbox workspace: it is or contains the home folder, "
            "HARVEST_HOME or this repository; export the project into a fresh folder"
        )


def bwrap_argv(
    workspace: Path,
    profile_dir: Path,
    tmp_bytes: int,
    python_args: list[str],
    env: dict[str, str],
    bwrap: str = "bwrap",
) -> list[str]:
    """The full bwrap command line for one child."""
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    refuse_sensitive_workspace(workspace)
    roots = python_roots()
    refuse_sensitive_binds(roots)
    for root in roots:
        argv += ["--ro-bind", str(root), str(root)]
    argv += ["--ro-bind", str(INSIDE_DIR), SANDBOX_CODE]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(tmp_bytes), "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
    argv += ["--bind", str(workspace), SANDBOX_WORKSPACE]
    argv += ["--ro-bind", str(profile_dir), f"{SANDBOX_WORKSPACE}/{profile_dir.name}"]
    argv += ["--chdir", SANDBOX_WORKSPACE, "--clearenv"]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    argv += ["--", *python_args]
    return argv


def python_args(code_dir: str, request_json: str) -> list[str]:
    """The interpreter command: no user site, no bytecode writes, the child script, its request."""
    return [sys.executable, "-s", "-B", f"{code_dir}/child.py", request_json]


def sandbox_available() -> tuple[bool, str]:
    """Whether bubblewrap can start a sandbox here, and if not, why and how to fix it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "bubblewrap (bwrap) is not installed; install it: apt-get install bubblewrap"
    probe = [bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            probe += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            probe += ["--ro-bind", path, path]
    probe += ["--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap at {bwrap} could not start: {exc}"
    if done.returncode != 0:
        reason = " ".join(done.stderr.split())[:300] or f"exit code {done.returncode}"
        return False, (
            f"bubblewrap at {bwrap} cannot create namespaces here ({reason}); enable unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1) or run as root"
        )
    return True, f"bubblewrap at {bwrap} works"

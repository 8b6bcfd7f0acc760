"""The child's command line: the bubblewrap invocation, the read-only binds, the allow-listed environment.

Pure functions from paths and settings to argv/env, so that what the sandbox exposes can be read (and
tested) in one place. Inside the sandbox the workspace is always /workspace and our child code is
/opt/harvest, whatever the host paths are; the network, IPC, PID and UTS namespaces are private.

Every writable place inside is bounded: the workspace (the watchdog's disk bound), /tmp (a tmpfs of
``Limits.tmp_bytes``) and /dev/shm (a tmpfs of ``Limits.shm_bytes``, for the few semaphores Python and
libfaketime make). The root (``/``) and /dev are read-only: /dev is a tiny tmpfs holding only null, zero,
full, random and urandom, remounted read-only. /tmp is mounted first, so an interpreter installed under
/tmp (a CI virtualenv) is bound on top of it instead of being hidden by it.

The interpreter is bound minimally (``python_binds``): its binary and the links leading to it, the
standard library, the site-packages folders that hold dbt-duckdb and what it needs (with pandas, numpy
and pyarrow for Python models), ``pyvenv.cfg`` of a virtualenv, and shared libraries they load from
outside the system folders. Never a whole prefix: a pyenv or conda install in the home folder keeps
everything else under it out of sight. Where that cannot be done, the build is refused with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core import locked_duckdb
from dbt_harvest.core.errors import SandboxError
from dbt_harvest.core.home import harvest_home
from dbt_harvest.core.source import source_checkout
from dbt_harvest.harvester.sandbox import interpreter_probe

INSIDE_DIR = Path(__file__).resolve().parent / "inside"
LOCKED_DUCKDB = Path(locked_duckdb.__file__).resolve()
SANDBOX_WORKSPACE = "/workspace"
#: where the sibling workspaces of a parallel child are bound: /workspace-2, /workspace-3, ...
SANDBOX_SIBLING_PREFIX = "/workspace-"
SANDBOX_CODE = "/opt/harvest"
SANDBOX_LIB = "/opt/harvest-lib"
SANDBOX_LOCKED_DUCKDB = f"{SANDBOX_LIB}/locked_duckdb.py"
SANDBOX_HOME = "/tmp/home"
#: The only device nodes inside (bound from the host's /dev, read-write as devices, in a read-only /dev).
DEVICES = ("null", "zero", "full", "random", "urandom")
DEV_TMPFS_BYTES = 64 << 10
#: Distributions whose site-packages the child needs: dbt with the DuckDB adapter, and the libraries a
#: Python model commonly returns its frame with.
CHILD_DISTRIBUTIONS = ("dbt-duckdb", "dbt-core", "duckdb", "pandas", "numpy", "pyarrow")

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
        "DBT_LOG_LEVEL_FILE",
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


def child_env(paths: ChildPaths, clock: dict[str, str], python: str | None = None) -> dict[str, str]:
    """The complete environment of the child: fixed values plus the clock, nothing inherited. ``python`` is
    the interpreter it runs (a toolchain's; None: this one)."""
    env = {
        "PATH": f"{Path(python or sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
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
        # no logs/dbt.log: nothing reads it (what a command says goes to the session log), and writing every
        # event of every build at debug level costs about a sixth of a small project's build
        "DBT_LOG_LEVEL_FILE": "none",
        "DO_NOT_TRACK": "1",
        "HARVEST_WORKSPACE": paths.workspace,
        **clock,
    }
    extra = set(env) - ALLOWED_ENV
    if extra:
        raise SandboxError(f"internal: child environment has variables outside the allow-list: {sorted(extra)}")
    return env


@dataclass(frozen=True)
class PythonBinds:
    """What of the interpreter the child sees, each at its own host path, read-only."""

    dirs: tuple[Path, ...]  # the standard library and the needed site-packages folders
    files: tuple[Path, ...]  # the binary, pyvenv.cfg, shared libraries outside the system folders
    links: tuple[tuple[str, str], ...]  # (target, path): symlinks recreated on the way to a file
    hidden: tuple[Path, ...]  # folders inside a bound one that are not needed: laid over with nothing

    @property
    def sources(self) -> tuple[Path, ...]:
        return (*self.dirs, *self.files)


def _under_system(path: Path) -> bool:
    return any(path == Path(root) or Path(root) in path.parents for root in SYSTEM_PATHS)


def _link_chain(path: str) -> tuple[list[tuple[str, str]], Path]:
    """The symlinks from ``path`` to the real file (to recreate inside), and that file."""
    links: list[tuple[str, str]] = []
    current = os.path.abspath(path)
    for _ in range(40):
        if _under_system(Path(current)) or not os.path.islink(current):
            break
        target = os.readlink(current)
        links.append((target, current))
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return links, Path(os.path.realpath(path))


@functools.lru_cache(maxsize=8)
def _probe(python: str) -> dict[str, Any]:
    """``interpreter_probe.facts`` as the interpreter ``python`` (a toolchain's) sees itself."""
    script = Path(interpreter_probe.__file__).resolve()
    try:
        done = subprocess.run(
            [python, "-s", "-B", "-I", str(script), *CHILD_DISTRIBUTIONS],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"cannot run the toolchain interpreter {python}: {exc}") from None
    if done.returncode != 0:
        tail = " ".join(done.stderr.split())[-300:]
        raise SandboxError(f"the toolchain interpreter {python} could not describe itself: {tail}")
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _native_files(found: dict[str, Any], stdlib: Path) -> list[str]:
    """The binary, lib-dynload's modules, and the extension modules of distributions that were not
    installed from a manylinux wheel (those bundle every library they need besides the system's)."""
    files = [os.path.realpath(found["executable"])]
    dynload = stdlib / "lib-dynload"
    if dynload.is_dir():
        files += sorted(str(p) for p in dynload.iterdir() if p.suffix == ".so")
    for dist in found["distributions"]:
        files += dist["native"]
    return files


def _shared_libraries(files: list[str]) -> list[str]:
    """Shared libraries ``files`` load, as ldd reports them ([] when ldd is not installed)."""
    ldd = shutil.which("ldd") or ("/usr/bin/ldd" if os.path.exists("/usr/bin/ldd") else None)
    if ldd is None or not files:
        return []
    try:
        done = subprocess.run([ldd, *files], capture_output=True, text=True, timeout=60, env={"LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in done.stdout.splitlines():
        if "=>" in line:
            path = line.split("=>", 1)[1].strip().split(" (", 1)[0].strip()
            if path.startswith("/"):
                found.append(path)
    return sorted(set(found))


def python_binds(python: str | None = None) -> PythonBinds:
    """The minimal read-only view of an interpreter the child needs: this one (``python`` None), or a
    toolchain's (``harvester.toolchain``), described by itself. Computed once per process and interpreter."""
    return _binds(python)


@functools.lru_cache(maxsize=8)
def _binds(python: str | None) -> PythonBinds:
    """``python_binds``, cached by the interpreter alone (``python_binds()`` and ``python_binds(None)`` share it)."""
    found = interpreter_probe.facts(list(CHILD_DISTRIBUTIONS)) if python is None else _probe(python)
    where = python or sys.executable
    for needed in ("dbt-duckdb", "dbt-core", "duckdb"):
        if needed in found["missing"]:
            raise SandboxError(f"{needed} is not installed for {where}; install dbt-duckdb (pip install -e .)")
    stdlib = Path(os.path.realpath(found["stdlib"]))
    if not (stdlib / "os.py").is_file():
        raise SandboxError(
            f"cannot find the standard library of {where} ({found['stdlib']} has no os.py); the sandbox "
            "binds only the folders Python needs and refuses to bind a whole prefix: use a standard install"
        )
    prefixes = {Path(os.path.realpath(p)) for p in found["prefixes"]}
    if stdlib in prefixes:
        raise SandboxError(f"the standard library of {where} is its whole prefix ({stdlib}); refusing to bind it")
    dirs: list[Path] = [stdlib]
    platstdlib = Path(os.path.realpath(found["platstdlib"]))
    if (platstdlib / "lib-dynload").is_dir():
        dirs.append(platstdlib)
    files: list[Path] = []
    links, binary = _link_chain(found["executable"])
    files.append(binary)
    files += [Path(os.path.realpath(entry)) for entry in found["zips"]]  # a zipped standard library
    if found["pyvenv_cfg"]:
        more, real = _link_chain(found["pyvenv_cfg"])
        links += more
        files.append(real)
    site_dirs = {Path(os.path.realpath(dist["site"])) for dist in found["distributions"]}
    dirs += sorted(site_dirs)
    for library in _shared_libraries(_native_files(found, stdlib)):
        more, real = _link_chain(library)
        links += more
        files.append(real)
    hidden: list[Path] = []
    for folder in found["base_site"]:
        own = Path(os.path.realpath(folder))
        if own.is_dir() and own not in site_dirs and stdlib in own.parents and own not in hidden:
            hidden.append(own)  # the base install's packages, not needed by this (virtual) environment
    kept_dirs = minimal_roots(dirs)
    kept_files = [
        f for f in dict.fromkeys(files) if not _under_system(f) and not any(d in f.parents for d in kept_dirs)
    ]
    kept_links = [
        (t, p) for t, p in dict.fromkeys(links) if not any(d == Path(p) or d in Path(p).parents for d in kept_dirs)
    ]
    return PythonBinds(tuple(kept_dirs), tuple(kept_files), tuple(kept_links), tuple(hidden))


def python_roots(python: str | None = None) -> list[Path]:
    """Everything of the interpreter bound into the sandbox (folders and single files)."""
    return list(python_binds(python).sources)


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
    """Folders no sandbox may see: the user's home, HARVEST_HOME and the dbt-harvest checkout, if any."""
    checkout = source_checkout()
    return {Path.home().resolve(), harvest_home(), *([checkout] if checkout else [])}


def refuse_sensitive_binds(roots: list[Path], python: str | None = None) -> None:
    """Refuse a read-only bind that is, or contains, a forbidden folder (or is the root), or that is a
    whole interpreter prefix (which holds more than Python needs: other environments, user files): this
    interpreter's, or the toolchain interpreter ``python``'s."""
    forbidden = forbidden_paths()
    own = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    prefixes = {Path(os.path.realpath(p)) for p in (own if python is None else _probe(python)["prefixes"])}
    for root in roots:
        if root == Path("/") or any(root == bad or root in bad.parents for bad in forbidden):
            raise SandboxError(
                f"refusing to bind {root} into the sandbox: it is or contains the home folder, "
                "HARVEST_HOME or this repository; install Python and dbt-duckdb elsewhere"
            )
        if root in prefixes and not _under_system(root):
            raise SandboxError(
                f"refusing to bind {root} into the sandbox: it is a whole Python prefix (other environments and "
                "files under it would be visible); install packages into its lib/pythonX.Y/site-packages"
            )


def refuse_sensitive_workspace(workspace: Path) -> None:
    """Refuse a workspace that is, or contains, a forbidden folder (sandboxed or not)."""
    workspace = workspace.resolve()
    if workspace == Path("/") or any(workspace == bad or workspace in bad.parents for bad in forbidden_paths()):
        raise SandboxError(
            f"refusing to use {workspace} as a sandbox workspace: it is or contains the home folder, "
            "HARVEST_HOME or this repository; export the project into a fresh folder"
        )


def _tmpfs(path: str, size: int, perms: str = "0755") -> list[str]:
    return ["--perms", perms, "--size", str(size), "--tmpfs", path]


def dev_argv(shm_bytes: int) -> list[str]:
    """A read-only /dev with only the device nodes a build needs, and a bounded /dev/shm."""
    argv = _tmpfs("/dev", DEV_TMPFS_BYTES)
    for name in DEVICES:
        argv += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    argv += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        argv += ["--symlink", f"/proc/self/fd/{number}", f"/dev/{name}"]
    argv += _tmpfs("/dev/shm", shm_bytes, "1777")
    argv += ["--remount-ro", "/dev"]
    return argv


def bwrap_argv(
    workspace: Path,
    profile_dir: Path,
    tmp_bytes: int,
    python_args: list[str],
    env: dict[str, str],
    bwrap: str = "bwrap",
    shm_bytes: int = 4 << 20,
    siblings: Sequence[tuple[Path, str]] = (),
    python: str | None = None,
) -> list[str]:
    """The full bwrap command line for one child (running ``python``: a toolchain's interpreter; None: this one).

    ``siblings`` are further workspaces of a parallel child (``harvester.sandbox.parallel``), each
    ``(host folder, path inside)`` and bound the same way as the first: writable, with its own profile
    folder laid over it read-only."""
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    # /tmp first: everything bound below it (an interpreter installed under /tmp) lands on top of it
    argv += _tmpfs("/tmp", tmp_bytes, "1777")
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    refuse_sensitive_workspace(workspace)
    for sibling, _ in siblings:
        refuse_sensitive_workspace(sibling)
    binds = python_binds(python)
    refuse_sensitive_binds(list(binds.sources), python)
    for root in binds.dirs:
        argv += ["--ro-bind", str(root), str(root)]
    for hidden in binds.hidden:
        argv += _tmpfs(str(hidden), 4096) + ["--remount-ro", str(hidden)]
    for file in binds.files:
        argv += ["--ro-bind", str(file), str(file)]
    for target, path in binds.links:
        argv += ["--symlink", target, path]
    argv += ["--ro-bind", str(INSIDE_DIR), SANDBOX_CODE]
    argv += ["--ro-bind", str(LOCKED_DUCKDB), SANDBOX_LOCKED_DUCKDB]
    argv += ["--proc", "/proc"]
    argv += dev_argv(shm_bytes)
    argv += ["--dir", SANDBOX_HOME]
    argv += ["--bind", str(workspace), SANDBOX_WORKSPACE]
    argv += ["--ro-bind", str(profile_dir), f"{SANDBOX_WORKSPACE}/{profile_dir.name}"]
    for sibling, inside in siblings:
        argv += ["--bind", str(sibling), inside]
        argv += ["--ro-bind", str(sibling / profile_dir.name), f"{inside}/{profile_dir.name}"]
    # nothing else may be written: the root (and every folder bwrap made in it) becomes read-only
    argv += ["--remount-ro", "/"]
    argv += ["--chdir", SANDBOX_WORKSPACE, "--clearenv"]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    argv += ["--", *python_args]
    return argv


def python_args(code_dir: str, request_json: str, python: str | None = None) -> list[str]:
    """The interpreter command (``python``: a toolchain's; None: this one): no user site, no bytecode
    writes, the child script, its request."""
    return [python or sys.executable, "-s", "-B", f"{code_dir}/child.py", request_json]


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

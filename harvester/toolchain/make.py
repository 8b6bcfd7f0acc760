"""Making a toolchain: a virtualenv with one release's dbt, from the package registry, once per home.

Why it exists: a pin on dbt 1.7 builds in a virtualenv holding dbt-core 1.7 (issue 61). Each toolchain is
made once under ``core.home.toolchains_dir()`` in a folder named by its versions and its lock's digest
(``core.toolchain.Toolchain.name``), and every pin on it shares it. A toolchain made from a pin's lock
installs exactly the lock's packages (``--no-deps``), and what was installed is compared with the lock, so
a rebuild on another machine gets the same versions or says which one differs.

pip does the installing, with the user's own pip settings (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``,
``PIP_NO_INDEX``: a wheelhouse made by ``harvest toolchain wheels`` makes toolchains offline). A folder is
made beside its final place and renamed into it only when complete, so a crash leaves no half toolchain
under a name (only a ``.toolchain.partial-`` folder, removed by the next make and listed by `harvest gc`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from dbt_harvest.core import atomic
from dbt_harvest.core.errors import PinError, ToolchainError
from dbt_harvest.core.home import toolchains_dir
from dbt_harvest.core.toolchain import Toolchain, is_toolchain_name, toolchain_from_dict
from dbt_harvest.harvester.toolchain.releases import Release

RECORD = "toolchain.json"
PIP_TIMEOUT_S = 1800
#: the lines of pip's output that say why it failed
_PIP_ERROR = re.compile(r"^ERROR: (.+)$", re.MULTILINE)
_LOCK_PROBE = (
    "import importlib.metadata as m, json, re;"
    "print(json.dumps(sorted({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower() + '==' + d.version"
    " for d in m.distributions()})))"
)


def toolchain_python(name: str) -> Path:
    """The interpreter of the made toolchain ``name``; ToolchainError when this home has not made it."""
    if not is_toolchain_name(name):
        raise ToolchainError(f"{name!r} is not a toolchain name")
    folder = toolchains_dir() / name
    python = folder / "bin" / "python"
    if not (folder / RECORD).is_file() or not python.exists():
        raise ToolchainError(
            f"toolchain {name} is not made in {toolchains_dir()}; `harvest toolchain make` or a build of its pin makes it"
        )
    return python


def made() -> tuple[Toolchain, ...]:
    """Every complete toolchain of this home, by name."""
    root = toolchains_dir()
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if is_toolchain_name(folder.name) and (folder / RECORD).is_file():
            found.append(_read_record(folder))
    return tuple(found)


def _read_record(folder: Path) -> Toolchain:
    try:
        return toolchain_from_dict(json.loads((folder / RECORD).read_text(encoding="utf-8")), str(folder / RECORD))
    except (OSError, ValueError, PinError) as exc:
        raise ToolchainError(f"toolchain record {folder / RECORD} is unreadable ({exc}); remove the folder") from None


def ensure_toolchain(toolchain: Toolchain) -> Toolchain:
    """``toolchain`` made in this home if it is not yet: exactly its lock's packages, checked against the lock.
    A toolchain without a lock (a dataset row's) is its three versions' toolchain, shared or resolved anew."""
    if not toolchain.lock:  # known by its versions only (a dataset row's): the release's, made or shared
        return make_release(Release("", toolchain.dbt_core, toolchain.dbt_duckdb, toolchain.duckdb))
    if (toolchains_dir() / toolchain.name / RECORD).is_file():
        return toolchain
    return _make(["--no-deps", *toolchain.lock], f"toolchain {toolchain.label}", expected=toolchain)


def make_release(release: Release) -> Toolchain:
    """The toolchain of ``release``: one this home made already (shared between pins), else a new one
    resolved by pip from the release's three exact versions and locked as installed."""
    if release.installed:
        raise ToolchainError(
            f"dbt {release.minor} is the dbt this process has installed; a pin on it needs no toolchain"
        )
    for toolchain in made():
        if (toolchain.dbt_core, toolchain.dbt_duckdb, toolchain.duckdb) == (
            release.dbt_core,
            release.dbt_duckdb,
            release.duckdb,
        ):
            return toolchain
    return _make(list(release.requirements), f"toolchain {release.label}", expected=None)


def _make(requirements: list[str], label: str, expected: Toolchain | None) -> Toolchain:
    """A virtualenv with ``requirements`` installed, locked (equal to ``expected`` when given) and renamed to
    its toolchain name."""
    root = toolchains_dir()
    root.mkdir(parents=True, exist_ok=True)
    _remove_partials(root)
    partial = root / f".toolchain.partial-{uuid.uuid4().hex[:12]}"  # `harvest gc` lists one a crash left
    try:
        _run([sys.executable, "-m", "venv", "--without-pip", str(partial)], label, "create its virtualenv")
        python = partial / "bin" / "python"
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(python),
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--quiet",
                *requirements,
            ],
            label,
            "install its packages",
        )
        toolchain = _locked(python, label)
        if expected is not None and toolchain != expected:
            raise ToolchainError(
                f"{label}: what was installed differs from the pin's lock: {_lock_diff(expected, toolchain)}"
            )
        atomic.write_text(partial / RECORD, json.dumps(toolchain.to_dict(), indent=1, sort_keys=True) + "\n")
        final = root / toolchain.name
        if (final / RECORD).is_file():  # another process made it meanwhile: keep theirs
            shutil.rmtree(partial, ignore_errors=True)
            return toolchain
        shutil.rmtree(final, ignore_errors=True)
        os.replace(partial, final)
        _relink(final, partial)
        return toolchain
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _relink(final: Path, partial: Path) -> None:
    """A virtualenv names its own folder in ``pyvenv.cfg``'s ``command`` line and in its scripts'
    shebangs; after the rename those still say the partial folder. Nothing here runs a script (the child
    runs ``bin/python`` with a file), so only ``pyvenv.cfg`` is rewritten, for people reading it."""
    config = final / "pyvenv.cfg"
    text = config.read_text(encoding="utf-8")
    atomic.write_text(config, text.replace(str(partial), str(final)))


def _locked(python: Path, label: str) -> Toolchain:
    """The toolchain as installed at ``python``: its three versions and every package, as a lock."""
    done = _run([str(python), "-s", "-I", "-c", _LOCK_PROBE], label, "read what was installed")
    lines = tuple(json.loads(done))
    pinned = dict(line.split("==", 1) for line in lines)
    try:
        return Toolchain(
            pinned.get("dbt-core", "?"),
            pinned.get("dbt-duckdb", "?"),
            pinned.get("duckdb", "?"),
            lines,
        )
    except PinError as exc:
        raise ToolchainError(f"{label}: the installed packages do not make a toolchain ({exc})") from None


def _lock_diff(wanted: Toolchain, got: Toolchain) -> str:
    want, have = dict(x.split("==", 1) for x in wanted.lock), dict(x.split("==", 1) for x in got.lock)
    notes = [
        f"{name} {want.get(name, '(absent)')} in the lock, {have.get(name, '(absent)')} installed"
        for name in sorted(set(want) | set(have))
        if want.get(name) != have.get(name)
    ]
    return "; ".join(notes[:5]) + (f" (and {len(notes) - 5} more)" if len(notes) > 5 else "")


def _run(argv: list[str], label: str, what: str) -> str:
    """Run one step of a make; ToolchainError with pip's own reason on one line when it fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot make {label}: could not {what} ({exc})") from None
    if done.returncode == 0:
        return done.stdout
    errors = _PIP_ERROR.findall(done.stderr + done.stdout)
    reason = errors[-1].strip() if errors else " ".join((done.stderr or done.stdout).split())[-300:]
    hint = ""
    if "No matching distribution" in reason or "Could not find a version" in reason:
        hint = (
            "; the package index is unreachable or lacks it: connect, or point PIP_FIND_LINKS at a wheelhouse "
            "made with `harvest toolchain wheels` (and set PIP_NO_INDEX=1)"
        )
    raise ToolchainError(f"cannot make {label}: could not {what}: {reason}{hint}")


def _remove_partials(root: Path, min_age_s: float = 3600.0) -> None:
    """Folders a crashed make left (never a complete toolchain: those are renamed only when whole), once they
    are an hour old: a younger one may be another process's make in progress."""
    now = time.time()
    for folder in root.glob(".toolchain.partial-*"):
        try:
            old = now - folder.stat().st_mtime >= min_age_s
        except OSError:
            continue
        if old:
            shutil.rmtree(folder, ignore_errors=True)


def wheels(release: Release, dest: Path) -> Path:
    """``release``'s packages (and what they need) as wheels in ``dest`` (pip builds one for a package that
    publishes only a source archive): a wheelhouse from which its toolchain is made offline
    (``PIP_NO_INDEX=1 PIP_FIND_LINKS=dest``)."""
    dest.mkdir(parents=True, exist_ok=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "--wheel-dir",
            str(dest),
            *release.requirements,
        ],
        f"the wheels of {release.label}",
        "download them",
    )
    return dest

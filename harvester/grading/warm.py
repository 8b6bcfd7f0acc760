"""A warm sandboxed dbt child for the builds the fast path cannot answer (``grade``'s ``naive`` strategy).

The eval environment grades ``validate`` and ``submit`` through ``grade(..., "fast", fallback="naive")``;
edits the fast path cannot transplant (macros, YAML, seeds, Jinja) need a full sandboxed ``dbt seed`` +
``dbt build``. A cold child per call pays for bubblewrap, the interpreter, importing dbt and a full parse
before the build starts (most of a call on a small project). ``WarmBuilds`` keeps one sandboxed child
(``harvester.sandbox.session.SandboxSession``, the warm child the mint's ``VariantBuilder`` builds in)
alive per environment and runs each fallback build in it, so a build pays only for the seed, the build,
the capture and a partial parse of what the edits changed.

Unlike the mint's variants, the edits here are an agent's: untrusted, possibly written to leave something
for the next build. So every build starts from exactly what a fresh workspace would hold:

- the host resets the whole workspace before each build: every entry removed (by fd, no link followed)
  and the task's pristine tree (the broken project, its profile, dbt's partial-parse state of it) copied
  back from the host's own copy, then the edits written; the sandbox's profile folder is bound read-only
  and is the only thing kept. No database is copied in: the build seeds and builds from nothing, as the
  cold path does, so no relation holds the right answer;
- the child runs each batch in a fork made after dbt is imported and before any project code ran, then
  kills every other process of the sandbox and scrubs its /tmp and /dev/shm (``isolate``): nothing a
  build did in memory or left running reaches the next one.

dbt's partial-parse state is primed once per pin (a parse of the first task's pristine project in the
child) and reused for the other tasks of that pin, whose broken file dbt then re-parses.

The child is started on the first fallback build, follows the pin of the task being graded (a build
for another pin, another HARVEST_HOME or other limits starts a new one), and ends at ``close()`` (the
environment closes it when it closes) or when this process exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path

from dbt_harvest.core.home import harvest_home, tmp_dir
from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.build import BuildResult, interpret
from dbt_harvest.harvester.sandbox import CaptureStep, DbtStep, Limits, safe_fs
from dbt_harvest.harvester.sandbox.profile import PROFILE_DIR
from dbt_harvest.harvester.sandbox.runner import SCRATCH_DIR
from dbt_harvest.harvester.sandbox.session import SandboxSession

PARTIAL_PARSE = "target/partial_parse.msgpack"  # under the dbt project folder

_OPEN: weakref.WeakSet[WarmBuilds] = weakref.WeakSet()


class WarmBuilds:
    """One warm sandboxed child for full builds of edited tasks (see the module docstring)."""

    def __init__(self, scratch: Path | None = None, *, duckdb_scope: str = "database") -> None:
        self._scratch = scratch
        self._scope = duckdb_scope
        self._key: tuple[str, str, Limits] | None = None
        self._session: SandboxSession | None = None
        self._root: Path | None = None
        self._lock = threading.Lock()
        self._parse_state: Path | None = None  # the host's copy of the last primed partial-parse state
        self.builds = 0  # builds run in a warm child
        self.primes = 0  # parses of a pristine project run to prime dbt's partial parsing
        self.opened = 0  # children sessions opened (one per pin, per home, per limits)
        _OPEN.add(self)

    @property
    def is_open(self) -> bool:
        return self._session is not None

    @property
    def child_starts(self) -> int:
        """Processes started by the current session (a batch killed at a bound restarts it)."""
        return self._session.starts if self._session is not None else 0

    def __enter__(self) -> WarmBuilds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _workspace(self, pin: Pin, pristine: Path, limits: Limits) -> Path:
        key = (str(harvest_home()), pin.id, limits)
        if self._session is not None and self._key == key and self._root is not None:
            return self._root / "ws"
        self._close()
        root = Path(tempfile.mkdtemp(prefix="warm-", dir=self._scratch or tmp_dir()))
        workspace = root / "ws"
        workspace.mkdir()
        shutil.copytree(pristine / PROFILE_DIR, workspace / PROFILE_DIR, symlinks=True)
        self._root, self._key = root, key
        self._session = SandboxSession(
            workspace,
            pin.project_dir,
            clock=pin.clock,
            sandboxed=True,
            limits=limits,
            log_path=root / "warm.log",
            duckdb_scope=self._scope,
            isolate=True,
        )
        self.opened += 1
        return workspace

    def _reset(self, workspace: Path, pristine: Path, edits: Mapping[str, str]) -> None:
        """The workspace as a fresh one would be: the pristine tree, then ``edits`` (the child is idle)."""
        for name in os.listdir(workspace):
            if name != PROFILE_DIR:
                safe_fs.remove(workspace, name)
        for entry in os.scandir(pristine):
            if entry.name == PROFILE_DIR:
                continue
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), workspace / entry.name)
            elif entry.is_dir():
                shutil.copytree(entry.path, workspace / entry.name, symlinks=True)
            else:
                shutil.copy2(entry.path, workspace / entry.name)
        for sub in ("duckdb", "home", "tmp"):  # the runner's scratch, as a fresh child finds it
            safe_fs.make_dirs(workspace, f"{SCRATCH_DIR}/{sub}")
        for path, text in edits.items():
            safe_fs.write_text(workspace, path, text)  # UnsafePathError: the pristine tree links there

    def prime(self, pin: Pin, pristine: Path, limits: Limits) -> bool:
        """Parse the pristine project once in the warm child and keep dbt's partial-parse state in
        ``pristine``, so each build re-parses only what its edits changed. True when it was kept."""
        with self._lock:
            workspace = self._workspace(pin, pristine, limits)
            self._reset(workspace, pristine, {})
            assert self._session is not None
            run = self._session.run([DbtStep(("parse",))])
            state = f"{pin.project_dir}/{PARTIAL_PARSE}" if pin.project_dir not in ("", ".") else PARTIAL_PARSE
            if not (run.ok and safe_fs.is_file(workspace, state)):
                return False
            # read beneath the workspace the child wrote, never through a link it planted
            safe_fs.copy_out(workspace, state, pristine / state, max_bytes=limits.workspace_bytes)
            assert self._root is not None
            self._parse_state = self._root / "partial_parse.msgpack"
            shutil.copyfile(pristine / state, self._parse_state)
            self.primes += 1
            return True

    def reuse_parse_state(self, pin: Pin, pristine: Path, limits: Limits) -> bool:
        """Give ``pristine`` (another task of the pin this child serves) the partial-parse state primed for
        an earlier task of the same pin, instead of parsing again: dbt re-parses the files whose checksums
        differ (the other task's broken file), as it does for an edit. False when there is none."""
        with self._lock:
            key = (str(harvest_home()), pin.id, limits)
            if self._session is None or self._key != key or self._parse_state is None:
                return False
            state = f"{pin.project_dir}/{PARTIAL_PARSE}" if pin.project_dir not in ("", ".") else PARTIAL_PARSE
            (pristine / state).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self._parse_state, pristine / state)
            return True

    def build(self, pin: Pin, pristine: Path, edits: Mapping[str, str], limits: Limits) -> BuildResult:
        """``dbt seed``, ``dbt build`` and a capture of ``pristine`` with ``edits`` written, in the warm
        child, from an empty database: what ``build_workspace`` does in a fresh workspace."""
        with self._lock:
            workspace = self._workspace(pin, pristine, limits)
            self._reset(workspace, pristine, edits)
            steps: list[object] = [DbtStep(("seed",)), DbtStep(("build",)), CaptureStep()]
            assert self._session is not None
            run = self._session.run(steps, stop_on_failure=False)  # type: ignore[arg-type]
            self.builds += 1
            return interpret(workspace, steps, run)

    def _close(self) -> None:
        session, root = self._session, self._root
        self._session, self._root, self._key, self._parse_state = None, None, None, None
        if session is not None:
            session.close()
        if root is not None:
            safe_fs.rmtree(root)

    def close(self) -> None:
        """End the child and remove its workspace; a later build opens a new one."""
        with self._lock:
            self._close()


def close_all() -> None:
    """Close every open WarmBuilds of this process (at exit)."""
    for warm in list(_OPEN):
        try:
            warm.close()
        except Exception:
            pass


atexit.register(close_all)

__all__ = ["WarmBuilds", "close_all"]

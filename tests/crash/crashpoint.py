"""Run the real `harvest` CLI with numbered crash points: ``python crashpoint.py <harvest args>``.

Why it exists: a SIGKILL at a random wall-clock delay mostly lands while dbt builds, and rarely in the
few milliseconds where artefacts are written, which is where crash safety is decided. This launcher
numbers every file-system mutation the harvest process makes (rename/replace, fsync, copy, mkdir,
unlink, rmtree, copytree) and, when ``HARVEST_CRASH_AT=k`` is set, sends itself SIGKILL at the k-th one,
a real ``kill -9`` of the real CLI: no Python cleanup, no ``finally``, no atexit runs.

- before a rename/replace/unlink/mkdir/rmtree/copytree: the process dies before the call happens;
- at an fsync: the file being synced is first cut to half its size (what a kill in the middle of the
  write leaves behind), then the process dies;
- at a copyfile: the copy is made, cut to half, then the process dies (a torn copy).

``HARVEST_CRASH_COUNT=<file>`` makes an uninterrupted run write how many crash points it passed (the
range trials draw from); ``HARVEST_CRASH_LOG=<file>`` records which point killed the process.
Child processes (the sandboxed dbt builds) are not instrumented: they are separate programs, and they
die with the harvest process (bubblewrap's --die-with-parent).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_count = 0
_crash_at = int(os.environ.get("HARVEST_CRASH_AT", "0") or 0)
_log = os.environ.get("HARVEST_CRASH_LOG", "")


def _die(where: str) -> None:
    if _log:
        fd = os.open(_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, f"{_count} {where}\n".encode())
        os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def _tick(where: str) -> bool:
    """Count one crash point; True when this is the one to die at."""
    global _count
    with _lock:
        _count += 1
        return _count == _crash_at


def _cut_in_half(path: str) -> None:
    try:
        size = os.path.getsize(path)
        os.truncate(path, size // 2)
    except OSError:
        pass


def _before(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _tick(name):
            _die(f"{name} {args[0] if args else ''}")
        return real(*args, **kwargs)

    return wrapper


def _fsync(real: Callable[[int], None]) -> Callable[[int], None]:
    def wrapper(fd: int) -> None:
        if _tick("fsync"):
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                path = ""
            if path:
                _cut_in_half(path)
            _die(f"fsync {path}")
        real(fd)

    return wrapper


def _copyfile(real: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        result = real(src, dst, *args, **kwargs)
        if _tick("copyfile"):
            _cut_in_half(os.fspath(dst))
            _die(f"copyfile {dst}")
        return result

    return wrapper


def install() -> None:
    """Wrap the mutating calls of ``os`` and ``shutil`` in this process."""
    for name in ("replace", "rename", "unlink", "remove", "mkdir", "rmdir"):
        setattr(os, name, _before(name, getattr(os, name)))
    os.fsync = _fsync(os.fsync)
    shutil.copyfile = _copyfile(shutil.copyfile)
    shutil.rmtree = _before("rmtree", shutil.rmtree)
    shutil.copytree = _before("copytree", shutil.copytree)
    counter = os.environ.get("HARVEST_CRASH_COUNT", "")
    if counter:
        atexit.register(lambda: Path(counter).write_text(str(_count)))


def main(argv: list[str]) -> None:
    install()
    from dbt_harvest.cli import main as harvest

    harvest(args=argv, prog_name="harvest")


if __name__ == "__main__":
    main(sys.argv[1:])

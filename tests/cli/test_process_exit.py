"""The `harvest` process ends with its command's exit code, even when a native library would abort at exit.

DuckDB's and Arrow's thread pools can call ``std::terminate`` from a static destructor while the process
exits (CI saw ``harvest score --task`` refuse a row with one clean line and then die with SIGABRT). The
tests register libc's ``abort`` as a C exit handler, the same kind of hook a C++ static destructor is,
and run the CLI entry point: the plain ``main`` dies with SIGABRT, ``run`` (the console script) keeps
the command's exit code, its output and Python's own exit-time work (atexit callbacks, temporary folders,
non-daemon threads).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

#: a native exit-time hook that aborts, like a thread pool's destructor meeting a live worker
ABORT_AT_EXIT = (
    "import ctypes; libc = ctypes.CDLL('libc.so.6'); "
    "libc.__cxa_atexit.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]; "
    "libc.__cxa_atexit(ctypes.cast(libc.abort, ctypes.c_void_p), None, None)\n"
)


def _harvest(entry: str, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    code = (
        ABORT_AT_EXIT
        + f"import sys; sys.argv = ['harvest', *{list(args)!r}]\nfrom dbt_harvest.cli import {entry}; {entry}()\n"
    )
    env = {**os.environ, "HARVEST_HOME": str(tmp / "home"), "HARVEST_PINS": str(tmp / "pins")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp, env=env)


@pytest.mark.parametrize(
    ("args", "status"), [(("--version",), 0), (("show", "no/such-pin"), 1), (("no-such-command",), 2)]
)
def test_the_console_script_keeps_its_exit_code_past_a_native_abort_at_exit(
    args: tuple[str, ...], status: int, tmp_path: Path
) -> None:
    done = _harvest("run", *args, tmp=tmp_path)
    assert done.returncode == status, (done.returncode, done.stderr[-1000:])
    if status == 0:
        assert done.stdout.startswith("harvest, version ")
    else:
        assert done.stderr.strip() and "Traceback" not in done.stderr


def test_the_plain_group_dies_there_which_is_what_run_prevents(tmp_path: Path) -> None:
    """The hook is real: without ``run`` the same command ends in SIGABRT (so the test above can fail)."""
    done = _harvest("main", "--version", tmp=tmp_path)
    assert done.returncode == -signal.SIGABRT
    assert done.stdout.startswith("harvest, version ")


def test_python_exit_work_still_runs(tmp_path: Path) -> None:
    """atexit callbacks, ``weakref.finalize`` cleanups (a TemporaryDirectory), a non-daemon thread and
    buffered output all complete before the process ends with the code it was given."""
    code = ABORT_AT_EXIT + (
        "import atexit, sys, tempfile, threading, time\n"
        "from pathlib import Path\n"
        "from dbt_harvest.cli._exit import end_process\n"
        "scratch = tempfile.TemporaryDirectory(dir=sys.argv[1])\n"
        "Path(scratch.name, 'f').write_text('x')\n"
        "atexit.register(lambda: Path(sys.argv[1], 'atexit-ran').write_text('yes'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.5), Path(sys.argv[1], 'thread-done').write_text('yes'))).start()\n"
        "sys.stdout.write('y' * 300_000)\n"
        "end_process(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr[-1000:]
    assert done.stdout == "y" * 300_000
    assert (tmp_path / "atexit-ran").read_text() == "yes"
    assert (tmp_path / "thread-done").read_text() == "yes"
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [], "the TemporaryDirectory was left behind"


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (2, 2), (256 + 7, 7), ("a message", 1)])
def test_exit_codes_map_as_cpython_maps_them(code: object, status: int) -> None:
    from dbt_harvest.cli._exit import exit_code

    assert exit_code(code) == status

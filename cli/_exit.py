"""How the `harvest` process ends: Python's shutdown, then the exit code, without native teardown.

DuckDB and Arrow keep native thread pools. When the interpreter finalizes, their static destructors can
meet a worker that is still joinable and call ``std::terminate``: the process aborts with SIGABRT (exit
-6, "terminate called without an active exception") after the command already said what it had to say
and wrote its files atomically (apache/arrow#34314; CI saw it once in ~900 runs of
``harvest score --task`` on a refused row). A caller that checks the exit code then reads a crash where
there was a clean refusal or a success.

So the console script (and ``python -m dbt_harvest``) runs everything Python's own shutdown runs that our
commands rely on, in the same order (non-daemon threads joined, ``atexit`` callbacks, which include
``weakref.finalize`` cleanups such as temporary folders and ``logging.shutdown``; the standard streams
flushed), and then ends the process with ``os._exit`` and the command's exit code, skipping only the C++
static destructors. In-process callers (click's ``CliRunner`` in the tests, a notebook) call ``main``
and keep the ordinary ``SystemExit``.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_code(code: object) -> int:
    """``SystemExit.code`` as the process exit status, the way CPython maps it (None -> 0, an int as
    itself, anything else printed to stderr -> 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def end_process(code: object) -> NoReturn:
    """Run Python's shutdown steps that matter to us, flush, and leave with ``code`` (see the module)."""
    status = exit_code(code)
    shutdown = getattr(threading, "_shutdown", None)  # joins non-daemon threads, as Py_FinalizeEx does first
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing left to deliver
            if status == 0:
                status = 1
    os._exit(status)

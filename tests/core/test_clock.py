"""The pinned clock: frozen for builds (libfaketime without '@'), and literals for SQL run in-process."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys

import pytest

from core.clock import clock_env, freeze_clock


def test_current_time_calls_become_literals_parentheses_and_all() -> None:
    sql = ("select current_date() - signup_date as age, current_date as today, now() as at, CURRENT_TIMESTAMP() as t,\n"
           "  current_time as c, 'current_date' as label -- current_date in a comment\nfrom t")
    frozen = freeze_clock(sql, "2023-02-19 00:00:00")
    # `current_date()` (dbt-duckdb renders it so) must not leave `()` behind: DATE '…'() does not parse
    assert "DATE '2023-02-19' - signup_date" in frozen and "()" not in frozen.split("--")[0]
    assert "DATE '2023-02-19' as today" in frozen and "TIMESTAMP '2023-02-19 00:00:00' as at" in frozen
    assert "TIMESTAMP '2023-02-19 00:00:00' as t" in frozen and "TIME '00:00:00' as c" in frozen
    assert "'current_date' as label" in frozen and "-- current_date in a comment" in frozen


def test_the_build_clock_is_frozen_not_ticking() -> None:
    env = clock_env("2024-06-30 08:15:00", library=__import__("pathlib").Path("/x/libfaketime.so.1"))
    assert env["FAKETIME"] == "2024-06-30 08:15:00"  # no '@': '@' would start a clock that ticks from there
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"


@pytest.mark.skipif(shutil.which("faketime") is None, reason="libfaketime is not installed")
def test_under_the_frozen_clock_now_never_moves_and_timeouts_still_work() -> None:
    from core.clock import faketime_library

    code = ("import time, threading, datetime, queue\n"
            "a = datetime.datetime.now(); t0 = time.monotonic()\n"
            "threading.Event().wait(0.3)\n"
            "try:\n    queue.Queue().get(timeout=0.2)\nexcept queue.Empty:\n    pass\n"
            "print(a.isoformat(), datetime.datetime.now().isoformat(), round(time.monotonic() - t0, 1))\n")
    env = {"PATH": "/usr/bin:/bin", **clock_env("2024-06-30 08:15:00", faketime_library())}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    first, second, waited = out.stdout.split()
    assert first == second == dt.datetime(2024, 6, 30, 8, 15).isoformat()
    assert float(waited) >= 0.5  # the waits waited: the monotonic clock is real

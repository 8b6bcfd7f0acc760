"""The pinned clock: frozen for builds (libfaketime without '@'), and literals for SQL run in-process."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys

import pytest

from dbt_harvest.core.clock import clock_env, freeze_clock


def test_current_time_calls_become_literals_parentheses_and_all() -> None:
    sql = (
        "select current_date() - signup_date as age, current_date as today, now() as at, CURRENT_TIMESTAMP() as t,\n"
        "  current_time as c, 'current_date' as label -- current_date in a comment\nfrom t"
    )
    frozen = freeze_clock(sql, "2023-02-19 00:00:00")
    # `current_date()` (dbt-duckdb renders it so) must not leave `()` behind: DATE '…'() does not parse
    assert "DATE '2023-02-19' - signup_date" in frozen and "()" not in frozen.split("--")[0]
    assert "DATE '2023-02-19' as today" in frozen and "TIMESTAMP '2023-02-19 00:00:00' as at" in frozen
    assert "TIMESTAMP '2023-02-19 00:00:00' as t" in frozen and "TIME '00:00:00' as c" in frozen
    assert "'current_date' as label" in frozen and "-- current_date in a comment" in frozen


def test_an_identifier_that_begins_with_a_clock_call_is_left_alone() -> None:
    """fivetran/dbt_zendesk names a column ``current_time_check``: it became ``TIME '00:00:00'_check`` and
    the true completion of its model failed to build in the reward's fast path."""
    sql = "select current_timestamp as current_time_check, current_date_key, localtime_zone, now_() from t"
    frozen = freeze_clock(sql, "2025-03-07 00:00:00", zoned=True)
    assert frozen == (
        "select TIMESTAMPTZ '2025-03-07 00:00:00+00:00' as current_time_check, current_date_key, localtime_zone, "
        "now_() from t"
    )


def test_the_build_clock_is_frozen_not_ticking() -> None:
    env = clock_env("2024-06-30 08:15:00", library=__import__("pathlib").Path("/x/libfaketime.so.1"))
    assert env["FAKETIME"] == "2024-06-30 08:15:00"  # no '@': '@' would start a clock that ticks from there
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"


@pytest.mark.skipif(shutil.which("faketime") is None, reason="libfaketime is not installed")
def test_under_the_frozen_clock_now_never_moves_and_timeouts_still_work() -> None:
    from dbt_harvest.core.clock import faketime_library

    code = (
        "import time, threading, datetime, queue\n"
        "a = datetime.datetime.now(); t0 = time.monotonic()\n"
        "threading.Event().wait(0.3)\n"
        "try:\n    queue.Queue().get(timeout=0.2)\nexcept queue.Empty:\n    pass\n"
        "print(a.isoformat(), datetime.datetime.now().isoformat(), round(time.monotonic() - t0, 1))\n"
    )
    env = {"PATH": "/usr/bin:/bin", **clock_env("2024-06-30 08:15:00", faketime_library())}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    first, second, waited = out.stdout.split()
    assert first == second == dt.datetime(2024, 6, 30, 8, 15).isoformat()
    assert float(waited) >= 0.5  # the waits waited: the monotonic clock is real


def test_zoned_freeze_gives_the_types_a_dbt_build_gives() -> None:
    """Grading compares with gold built by dbt: ``now()`` there is a TIMESTAMP WITH TIME ZONE, and so must the
    frozen literal be (a plain TIMESTAMP made a true repair of dbt-project-evaluator's fct_test_coverage score 0);
    the screening's plain literal is kept as its locked decisions were made with it."""
    import datetime as dt

    import duckdb

    from dbt_harvest.core.clock import freeze_clock

    con = duckdb.connect()
    con.execute("set TimeZone = 'America/New_York'")  # the instant must not depend on the session's zone
    for call in ("now()", "current_timestamp", "get_current_timestamp()", "localtimestamp", "current_date"):
        sql = f"select {call} as t"
        live = con.execute(f"select typeof(t) from ({sql})").fetchone()[0]
        kind, value = con.execute(
            f"select typeof(t), t from ({freeze_clock(sql, '2024-05-01 00:00:00', zoned=True)})"
        ).fetchone()
        assert kind == live, (call, kind, live)
        if kind == "TIMESTAMP WITH TIME ZONE":
            assert value.astimezone(dt.UTC) == dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    assert freeze_clock("select now()", "2024-05-01 00:00:00") == "select TIMESTAMP '2024-05-01 00:00:00'"

"""The pinned clock, in one place: what date a build runs at, and the three ways it is enforced.

Models that use ``current_date`` or ``now()`` would otherwise produce a different gold every day, so
every build runs at a fixed instant at or after the newest date in the seeds (``default_clock``),
recorded in the pin. It reaches the code that reads time in three ways:
- sandboxed builds: libfaketime preloaded into the child (``clock_env``); FAKETIME='<date time>'
  (no '@') FREEZES the wall clock at that instant: every call of ``now()`` in every model of every
  build returns the same value, so time-derived columns (days open, durations) come out identical in
  two builds. A ticking clock ('@<date time>': start there and run) made such columns differ by the
  seconds between builds and turned whole marts nondeterministic (measured on Fivetran packages:
  docs/DESIGN.md). The monotonic clock stays real
  (FAKETIME_DONT_FAKE_MONOTONIC=1: faking it makes every Python lock with a timeout wait forever,
  measured with libfaketime 0.9.10); Python's absolute-deadline time.sleep is patched in the child;
- SQL run in-process (screening, the reward's fast path): current-time calls become literals of the
  pin's clock (``freeze_clock``);
- users' ``--clock`` values: parsed by the same ``parse_clock`` the sandbox uses.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
import sysconfig
from datetime import date, datetime, timedelta
from pathlib import Path

from dbt_harvest.core.errors import HarvestError, SandboxError

DEFAULT_CLOCK = "2024-01-01 00:00:00"
_DATE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})")
_MAX_SCAN_BYTES = 64 << 20


class ClockError(HarvestError):
    """A --clock value is not a date."""


def newest_seed_date(seed_dirs: list[Path]) -> date | None:
    """The newest ISO date that starts any cell of any seed CSV (bounded scan)."""
    newest: date | None = None
    scanned = 0
    for folder in seed_dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.csv")):
            if path.is_symlink() or not path.is_file():
                continue
            scanned += path.stat().st_size
            if scanned > _MAX_SCAN_BYTES:
                return newest
            with open(path, newline="", encoding="utf-8", errors="replace") as handle:
                for row in csv.reader(handle):
                    for cell in row:
                        match = _DATE.match(cell)
                        if match:
                            try:
                                found = date(int(match[1]), int(match[2]), int(match[3]))
                            except ValueError:
                                continue
                            if found.year < 2200 and (newest is None or found > newest):
                                newest = found
    return newest


def default_clock(seed_dirs: list[Path]) -> str:
    """The day after the newest seed date at midnight, or DEFAULT_CLOCK when seeds hold no date."""
    newest = newest_seed_date(seed_dirs)
    if newest is None:
        return DEFAULT_CLOCK
    return (datetime.combine(newest, datetime.min.time()) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")


def parse_clock(clock: str) -> dt.datetime:
    """Accept 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM[:SS]' (or ISO 'T'); naive, read as UTC."""
    try:
        value = dt.datetime.fromisoformat(clock.strip())
    except (ValueError, AttributeError):
        raise ClockError(f"clock {clock!r} is not a date (use YYYY-MM-DD or 'YYYY-MM-DD HH:MM:SS')") from None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    if not 1970 <= value.year <= 9999:
        raise ClockError(f"clock {clock!r} is out of range (1970-9999)")
    return value.replace(microsecond=0)


def normalise_clock(text: str) -> str:
    """A user's --clock ('2024-05-01' or '2024-05-01 12:00:00') as 'YYYY-MM-DD HH:MM:SS'."""
    return parse_clock(text).strftime("%Y-%m-%d %H:%M:%S")


# -- libfaketime, for sandboxed builds ---------------------------------------------------------------

LIBRARY = "libfaketime.so.1"


def faketime_library() -> Path:
    """The path of libfaketime.so.1 on this machine, or SandboxError saying how to install it."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    candidates = [
        Path("/usr/lib") / multiarch / "faketime" / LIBRARY,
        Path("/usr/lib/faketime") / LIBRARY,
        Path("/usr/lib64/faketime") / LIBRARY,
        Path("/usr/local/lib/faketime") / LIBRARY,
    ]
    for path in candidates:
        if path.is_file():
            return path
    found = sorted(Path("/usr/lib").glob(f"*/faketime/{LIBRARY}"))
    if found:
        return found[0]
    raise SandboxError(f"{LIBRARY} not found (the pinned clock needs it); install it: apt-get install faketime")


def clock_env(clock: str, library: Path | None = None) -> dict[str, str]:
    """Environment variables that freeze the child's wall clock at ``clock`` (the monotonic clock stays real)."""
    value = parse_clock(clock)
    return {
        "LD_PRELOAD": str(library or faketime_library()),
        "FAKETIME": value.strftime("%Y-%m-%d %H:%M:%S"),
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # libfaketime's "monotonic fix" re-implements pthread condition waits; with the monotonic clock left
        # real it is not needed, and it made every hand-off between threads ~1000x slower (a queue ping-pong
        # 19 us -> 19 ms), i.e. dbt's thread pool 3-10x slower per node (measured with 0.9.10, bench_add.py)
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
        "TZ": "UTC",
    }


def hand_build_prefix(clock: str) -> str:
    """The shell prefix that runs a command as the harvester's builds ran: the wall clock frozen at ``clock``
    (``faketime -f``, an absolute time: libfaketime keeps it still; the monotonic clock stays real, without
    which dbt hangs), UTC, and Python's string hashing seeded 0 (dbt iterates sets of names: a value built
    from one can come out in another order under another seed). A plain ``faketime '<clock>'`` starts a clock
    that ticks from there, and a column holding ``now()`` then differs from gold by the seconds of the build."""
    value = parse_clock(clock).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"TZ=UTC PYTHONHASHSEED=0 FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0 faketime -f '{value}'"
    )


# -- current-time calls in SQL run in-process -------------------------------------------------------

# each name with its optional empty parentheses in one match: `current_date()` must not leave `()` behind;
# a name is whole (`(?!\w)`): an identifier that begins with one (`current_time_check`) is not a call
_CALLS = re.compile(
    r"\b((?:current_date|current_timestamp|current_time|localtimestamp|localtime)(?!\w)(?:\s*\(\s*\))?"
    r"|today\s*\(\s*\)|now\s*\(\s*\)|get_current_timestamp\s*\(\s*\))",
    re.IGNORECASE,
)


#: the calls DuckDB answers with a TIMESTAMP WITH TIME ZONE (``localtimestamp`` is a plain TIMESTAMP)
_ZONED_CALLS = frozenset({"current_timestamp", "now", "get_current_timestamp"})


def _literal(call: str, clock: str, zoned: bool = False) -> str:
    name = call.lower().split("(")[0].strip()
    day = clock.split(" ")[0]
    if name in {"current_date", "today"}:
        return f"DATE '{day}'"
    if name in {"current_time", "localtime"}:
        return f"TIME '{clock.split(' ')[1]}'"
    if zoned and name in _ZONED_CALLS:
        return f"TIMESTAMPTZ '{clock}+00:00'"  # the sandbox's clock is UTC (clock_env: TZ=UTC)
    return f"TIMESTAMP '{clock}'"


def reads_clock(sql: str) -> bool:
    """Whether ``sql`` calls a current-time function outside quotes and comments (what ``freeze_clock`` replaces)."""
    return freeze_clock(sql, "2000-01-01 00:00:00") != sql


def freeze_clock(sql: str, clock: str, *, zoned: bool = False) -> str:
    """``sql`` with current-time calls (outside quotes and comments) replaced by the pinned clock.

    ``zoned``: ``now()``, ``current_timestamp`` and ``get_current_timestamp()`` become TIMESTAMPTZ literals
    of the same instant, the type a dbt build under the frozen clock gives them. Grading needs that (its
    tables are compared with gold built by dbt: a plain TIMESTAMP there made a true repair score 0 on
    dbt-project-evaluator's ``fct_test_coverage.measured_at``); the mint's screening and the augmentation
    compare SQL with SQL in one engine and keep the plain literal their locked decisions were made with."""
    out: list[str] = []
    i = 0
    code_start = 0
    n = len(sql)

    def flush(end: int) -> None:
        out.append(_CALLS.sub(lambda m: _literal(m.group(0), clock, zoned), sql[code_start:end]))

    while i < n:
        ch = sql[i]
        if ch in "'\"":
            flush(i)
            j = i + 1
            while j < n:
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i : j + 1])
            i = code_start = j + 1
        elif sql.startswith("--", i):
            flush(i)
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = code_start = j
        elif sql.startswith("/*", i):
            flush(i)
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j])
            i = code_start = j
        else:
            i += 1
    flush(n)
    return "".join(out)

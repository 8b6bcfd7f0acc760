"""The pinned clock: libfaketime settings that make `current_date` and `datetime.now()` a fixed date.

libfaketime is preloaded into the child (LD_PRELOAD) with FAKETIME='@<date time>': the clock starts at
that instant when the process starts and then runs forward, so timeouts and durations still behave.
FAKETIME_DONT_FAKE_MONOTONIC=1 keeps the monotonic clock real: faking it makes every Python lock
acquire with a timeout wait forever (measured with libfaketime 0.9.10). The one call that then breaks,
Python's absolute-deadline time.sleep, is patched in the child (inside/child.py).
"""

from __future__ import annotations

import datetime as dt
import sysconfig
from pathlib import Path

from harvester.errors import SandboxError

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


def parse_clock(clock: str) -> dt.datetime:
    """Accept 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM[:SS]' (or ISO 'T'); naive, read as UTC."""
    try:
        value = dt.datetime.fromisoformat(clock.strip())
    except (ValueError, AttributeError) as exc:
        raise SandboxError(f"invalid clock {clock!r}; use 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS'") from exc
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if not 1970 <= value.year <= 9999:
        raise SandboxError(f"clock {clock!r} is out of range")
    return value.replace(microsecond=0)


def clock_env(clock: str, library: Path | None = None) -> dict[str, str]:
    """Environment variables that pin the child's clock to ``clock``."""
    value = parse_clock(clock)
    return {
        "LD_PRELOAD": str(library or faketime_library()),
        "FAKETIME": "@" + value.strftime("%Y-%m-%d %H:%M:%S"),
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # libfaketime's "monotonic fix" re-implements pthread condition waits; with the monotonic clock left
        # real it is not needed, and it made every hand-off between threads ~1000x slower (a queue ping-pong
        # 19 us -> 19 ms), i.e. dbt's thread pool 3-10x slower per node (measured with 0.9.10, bench_add.py)
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
        "TZ": "UTC",
    }

"""The pinned clock: every build runs at a fixed date, at or after the newest date in the seeds.

Models that use ``current_date`` or ``now()`` would otherwise produce a different gold every day.
"""

from __future__ import annotations

import csv
import re
from datetime import date, datetime, timedelta
from pathlib import Path

from harvester.errors import HarvestError

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


def parse_clock(text: str) -> str:
    """Normalise a user's --clock ('2024-05-01' or '2024-05-01 12:00:00') to 'YYYY-MM-DD HH:MM:SS'.

    Parsing is the sandbox's own (the clock it will pin), so what is accepted here always runs there.
    """
    from harvester.errors import SandboxError
    from harvester.sandbox.clock import parse_clock as parse

    try:
        return parse(text).strftime("%Y-%m-%d %H:%M:%S")
    except SandboxError:
        raise ClockError(f"--clock {text!r} is not a date (use YYYY-MM-DD or 'YYYY-MM-DD HH:MM:SS')") from None

"""The pinned clock for SQL run outside the sandbox: current-time functions become literals.

Builds run under libfaketime at the pin's clock; the screening engine runs in-process, where the
real clock would make every ``current_date`` model differ from gold. So before compiled SQL reaches
the engine, each current-time call outside string literals and comments is replaced by a literal of
the pin's clock.
"""

from __future__ import annotations

import re

_CALLS = re.compile(
    r"\b(current_date|current_timestamp|current_time|localtimestamp|localtime|today\s*\(\s*\)|now\s*\(\s*\)"
    r"|get_current_timestamp\s*\(\s*\)|current_timestamp\s*\(\s*\)|current_date\s*\(\s*\))",
    re.IGNORECASE,
)


def _literal(call: str, clock: str) -> str:
    name = call.lower().split("(")[0].strip()
    day = clock.split(" ")[0]
    if name in {"current_date", "today"}:
        return f"DATE '{day}'"
    if name in {"current_time", "localtime"}:
        return f"TIME '{clock.split(' ')[1]}'"
    return f"TIMESTAMP '{clock}'"


def freeze_clock(sql: str, clock: str) -> str:
    """``sql`` with current-time calls (outside quotes and comments) replaced by the pinned clock."""
    out: list[str] = []
    i = 0
    code_start = 0
    n = len(sql)

    def flush(end: int) -> None:
        out.append(_CALLS.sub(lambda m: _literal(m.group(0), clock), sql[code_start:end]))

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
            out.append(sql[i:j + 1])
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

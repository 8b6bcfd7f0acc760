"""What the runner polls while a child runs: the process tree's resident memory, read from /proc.

Read from the host's /proc, so it sees the sandboxed processes whatever they do inside; cheap enough to
poll several times a second. (The workspace's disk use is walked by ``safe_fs.disk_usage``, by fd and
without following links, less often when the walk gets slow: see runner.py.)
"""

from __future__ import annotations

import os


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, resident bytes) for every process we can read."""
    page = os.sysconf("SC_PAGE_SIZE")
    table: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # the command name may contain spaces and parentheses: split after the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        try:
            table[int(entry.name)] = (int(fields[1]), int(fields[21]) * page)
        except (IndexError, ValueError):
            continue
    return table


def tree_rss_bytes(root_pid: int) -> int:
    """Total resident memory of ``root_pid`` and all its descendants (0 when it is gone)."""
    table = _proc_table()
    if root_pid not in table:
        return 0
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack, seen = 0, [root_pid], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += table[pid][1]
        stack.extend(children.get(pid, ()))
    return total

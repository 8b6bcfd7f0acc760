"""Measurements the runner polls while a child runs: the process tree's memory and the workspace's size.

Read from /proc and the file system of the host, so they see the sandboxed processes whatever they do
inside. Both are cheap enough to poll several times a second for small trees and workspaces; the disk
walk is polled less often when it gets slow (see runner.py).
"""

from __future__ import annotations

import os
from pathlib import Path


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


def disk_usage_bytes(root: Path) -> int:
    """Bytes of disk the tree under ``root`` occupies (allocated blocks; symlinks not followed)."""
    total = 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += info.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total

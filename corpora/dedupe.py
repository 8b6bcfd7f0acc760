"""One row per distinct task: forks and copies of a repository mint the same mutation twice.

Two pins of one split group (a repository and its fork, or a template and its copies) often hold the
same model file, so the mint keeps the same mutation under two task ids (the id names the pin). Such
rows teach nothing new and weigh one bug twice; a dataset keeps the first of each (by instance id)
and counts the rest. Tasks are the same when they share their split group, their file and their
broken patch (the fix and the grading follow from those).
"""

from __future__ import annotations

from collections.abc import Sequence

from dbt_harvest.core.task_record import TaskRecord


def distinct(records: Sequence[TaskRecord]) -> tuple[list[TaskRecord], int]:
    """The records without repeats (first instance id of each kept, order kept), and how many were dropped."""
    seen: set[tuple[str, str, str]] = set()
    kept: list[TaskRecord] = []
    for record in sorted(records, key=lambda r: r.instance_id):
        key = (record.split_group, record.file, record.broken_patch)
        if key in seen:
            continue
        seen.add(key)
        kept.append(record)
    order = {id(r): i for i, r in enumerate(records)}
    kept.sort(key=lambda r: order[id(r)])
    return kept, len(records) - len(kept)

"""The corpus feed's finished tasks, kept as each one finishes, so that a stopped run resumes.

``harvest corpus feed`` over the committed corpus runs for the better part of an hour (two reward builds
per task, some through the sandboxed dbt fallback). A run that dies at task 247 of 254 (a lost machine, a
killed shell) used to keep nothing: its report is written only at the end. Each finished task is appended
here as one JSON line, with a digest of the task record it was measured on; the next run with the same
settings takes those results as they are and runs only the rest, and its report is the report of one
unstopped run. A torn last line (the process killed mid-write) is read as "not finished"; a task whose
record changed since (re-minted, another statement) is measured again.

The log lives under ``HARVEST_HOME/feed/``, one file per settings key: the char budget, the tokenizer, whether
rewards run, the agentic variants, the task record format and the prompt's file order. The token budget (``max_length``) is not part
of the key: rows are measured in tokens once, and the cut against the budget is computed at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from dbt_harvest.core.task_record import GENERATOR_VERSION, TaskRecord
from dbt_harvest.train.corpus_feed import TaskFeed
from dbt_harvest.train.lineage import ORDER_VERSION


def settings_key(*, max_file_chars: int, tokenizer: str, rewards: bool, variants: int) -> str:
    """The name of the log for these settings: results measured under other settings are never mixed in."""
    text = json.dumps(
        {
            "max_file_chars": max_file_chars,
            "tokenizer": tokenizer,
            "rewards": rewards,
            "variants": variants,
            "records": GENERATOR_VERSION,
            "order": ORDER_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def log_path(home: Path, key: str) -> Path:
    """Where the log of ``key`` lives under ``home``."""
    return home / "feed" / f"{key}.jsonl"


def record_digest(task: TaskRecord) -> str:
    """The digest of the record a result was measured on (a changed record is measured again)."""
    return hashlib.sha256(task.to_json().encode()).hexdigest()


def load(path: Path, tasks: Iterable[TaskRecord]) -> dict[str, TaskFeed]:
    """The finished results in ``path`` for ``tasks`` whose records are unchanged; unreadable lines (a torn
    tail) and results of other or changed tasks are left out."""
    wanted = {t.instance_id: record_digest(t) for t in tasks}
    found: dict[str, TaskFeed] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return found
    for line in lines:
        try:
            entry = json.loads(line)
            result = TaskFeed.from_record(entry["feed"])
            digest = entry["record"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        if wanted.get(result.instance_id) == digest:
            found[result.instance_id] = result
    return found


def append(path: Path, task: TaskRecord, result: TaskFeed) -> None:
    """Add one finished task to the log, on disk before this returns (a crash right after keeps it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"record": record_digest(task), "feed": result.to_record()}, sort_keys=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def restart(path: Path) -> None:
    """Forget every result of this log (``--fresh``)."""
    path.unlink(missing_ok=True)

"""The audit's run folder: what was asked (run.json), one verdict and one transcript per episode, the report.

Layout::

    RUN/run.json                      split, kinds, driver, limits, the full task list and its hash, seal token
    RUN/episodes/<instance_id>.json   the verdict of one episode (rung, official, strict, reason for people)
    RUN/transcripts/<instance_id>.jsonl  every event of the episode, one JSON object a line
    RUN/report.json, report.md, ladder.png

Every file is written atomically, and an episode's verdict last, so a run killed at any point resumes by
running exactly the tasks without a verdict (and, by default, those that crashed).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env.errors import EnvError

RUN_FORMAT = 1


class RunDirError(EnvError):
    """A run folder is malformed, or belongs to a different audit than the one asked to resume it."""


def task_set_sha256(tasks: list[TaskRecord]) -> str:
    """One hash over the task set: sorted 'instance_id sha256(record)' lines."""
    lines = sorted(f"{t.instance_id} {hashlib.sha256(t.to_json().encode()).hexdigest()}" for t in tasks)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def task_entry(task: TaskRecord) -> dict[str, str]:
    return {
        "instance_id": task.instance_id,
        "kind": task.kind,
        "family": task.family,
        "operator": task.operator,
        "repo": task.repo,
    }


def kinds_label(kinds: list[str] | None) -> str:
    """How a run's kind filter reads for people: 'every kind' or 'completion tasks only'."""
    return f"{' and '.join(kinds)} tasks only" if kinds else "every kind"


def _safe_name(instance_id: str) -> str:
    if "/" in instance_id or instance_id.startswith(".") or "\x00" in instance_id:
        raise RunDirError(f"task id {instance_id!r} cannot name a file")
    return instance_id


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def run_file(self) -> Path:
        return self.root / "run.json"

    def episode_file(self, instance_id: str) -> Path:
        return self.root / "episodes" / f"{_safe_name(instance_id)}.json"

    def transcript_file(self, instance_id: str) -> Path:
        return self.root / "transcripts" / f"{_safe_name(instance_id)}.jsonl"

    # run.json --------------------------------------------------------------------------------------
    def read_run(self) -> dict[str, Any]:
        try:
            data = json.loads(self.run_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(f"{self.root} is not an audit run folder (no run.json)") from None
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{self.run_file}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != RUN_FORMAT or not isinstance(data.get("tasks"), list):
            raise RunDirError(f"{self.run_file}: not an audit run description of format {RUN_FORMAT}")
        return data

    def start(self, description: dict[str, Any]) -> dict[str, Any]:
        """Write run.json for a new run, or check that an existing one describes the same audit."""
        if self.run_file.exists():
            old = self.read_run()
            if old.get("kinds") != description.get("kinds"):
                raise RunDirError(
                    f"{self.root} holds an audit of {kinds_label(old.get('kinds'))}, asked "
                    f"{kinds_label(description.get('kinds'))}; pass the same --kind or choose another --run-dir"
                )
            for key in ("split", "task_set_sha256"):
                if old.get(key) != description.get(key):
                    raise RunDirError(
                        f"{self.root} holds a different audit ({key} {old.get(key)!r}, asked {description.get(key)!r}); "
                        "choose another --run-dir"
                    )
            if old.get("driver", {}).get("name") != description.get("driver", {}).get("name"):
                raise RunDirError(
                    f"{self.root} was run with driver {old['driver'].get('name')!r}; choose another --run-dir"
                )
            return old
        atomic.write_text(
            self.run_file, json.dumps({"format": RUN_FORMAT, **description}, sort_keys=True, indent=1) + "\n"
        )
        return self.read_run()

    # episodes --------------------------------------------------------------------------------------
    def read_episode(self, instance_id: str) -> dict[str, Any] | None:
        path = self.episode_file(instance_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except json.JSONDecodeError:
            return None  # a torn file cannot exist (atomic writes); treat anything unreadable as missing
        return data if isinstance(data, dict) and data.get("instance_id") == instance_id else None

    def write_episode(self, verdict: dict[str, Any], transcript: list[dict[str, Any]]) -> None:
        lines = "".join(json.dumps(event, sort_keys=True, default=str) + "\n" for event in transcript)
        atomic.write_text(self.transcript_file(verdict["instance_id"]), lines)
        atomic.write_text(
            self.episode_file(verdict["instance_id"]), json.dumps(verdict, sort_keys=True, indent=1) + "\n"
        )

    def read_transcript(self, instance_id: str) -> list[dict[str, Any]]:
        path = self.transcript_file(instance_id)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

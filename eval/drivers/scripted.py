"""Drivers that play a known answer: oracle (the true fix), wrong (a confirmed wrong repair), noop, scripts.

For a completion task the true fix and the wrong completions create the missing file (``--- /dev/null``):
the driver writes it without reading it first.

They act through the same tools as a model (read_file, write_file, submit), so they also exercise the
environment end to end: the oracle must score N/N, noop and wrong 0/N, or the harness is broken.
``ScriptedDriver`` plays a fixed list of actions (tests use it to stop an episode at each rung).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dbt_harvest.core.patching import apply_to_text, parse_patch
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.env.environment import RepairEnvironment


def _apply_patch_through_tools(env: RepairEnvironment, patch: str) -> bool:
    """Read each file the patch touches, apply it, write the result; False if it did not apply."""
    from dbt_harvest.core.patching import PatchError

    for file_patch in parse_patch(patch):
        current = "" if file_patch.created else env.read_file(file_patch.path)  # a completion writes a new file
        if current.startswith("error:"):
            env.episode.abandon(f"cannot read {file_patch.path}: {current}")
            return False
        try:
            new = apply_to_text(current, file_patch)
        except PatchError as exc:
            env.episode.abandon(f"the patch does not apply: {exc}")
            return False
        answer = env.write_file(file_patch.path, new)
        if answer.startswith("error:"):
            env.episode.abandon(f"cannot write {file_patch.path}: {answer}")
            return False
    return True


class _Simple:
    name = "?"
    parallel_safe = True

    def prepare(self) -> None:
        """Nothing to load: a scripted driver can always play."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


class OracleDriver(_Simple):
    """Applies the task's true repair (its fix patch), then submits."""

    name = "oracle"

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        if _apply_patch_through_tools(env, task.fix_patch):
            env.submit()


class WrongDriver(_Simple):
    """Applies the task's first wrong repair (plausible, passes local checks, scores 0), then submits."""

    name = "wrong"

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        if not task.wrong_repair_patches:
            env.episode.abandon("the task has no wrong repair (a weak task)")
            return
        if _apply_patch_through_tools(env, task.wrong_repair_patches[0]):
            env.submit()


class NoopDriver(_Simple):
    """Submits the broken project unchanged."""

    name = "noop"

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        env.submit()


@dataclass
class ScriptedDriver:
    """Plays ``actions`` ((tool, args) pairs) in order, stopping when the episode ends."""

    actions: Sequence[tuple[str, Any]]
    name: str = "scripted"
    parallel_safe: bool = True

    def prepare(self) -> None:
        """Nothing to load: a scripted driver can always play."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "actions": len(self.actions)}

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        for tool, args in self.actions:
            if env.episode.done:
                return
            env.episode.act(tool, args)
        env.episode.abandon("the script ended")

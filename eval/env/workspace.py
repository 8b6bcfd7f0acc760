"""An episode's workspace: the task's pin materialized fresh, the broken patch applied, nothing else.

What the agent gets is exactly what a user with the broken repository would have: the tree at the
pinned commit with its packages vendored, the broken patch applied. No ``.git`` (history would leak the
original), no gold (it stays in HARVEST_HOME, read only by the grader outside the sandbox), nothing
from the repair (fix and wrong patches are never written anywhere near the workspace).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.eval.env.errors import EnvError
from dbt_harvest.eval.env.policy import PathPolicy, policy_for
from dbt_harvest.harvester.task_tree import TreeSource


@dataclass(frozen=True)
class TaskWorkspace:
    """A materialized task: where it is and how to build it."""

    root: Path
    project_dir: str
    profile: str
    schema: str
    clock: str
    policy: PathPolicy
    db_file: str = "build.duckdb"
    # dbt selectors of the pin's known failing tests (core.pin.Pin.excluded_tests): left out of every build
    exclude_tests: tuple[str, ...] = ()
    # the pin's toolchain (core.toolchain; None: the installed dbt): every build of the episode runs its dbt
    toolchain: Toolchain | None = None


def materialize(
    task: TaskRecord, pins: Path, scratch: Path | None = None, *, source: TreeSource | None = None
) -> TaskWorkspace:
    """A fresh workspace of ``task`` under ``scratch`` (a new temporary folder); EnvError if it cannot be made.

    The tree is ``harvester.task_tree.broken_tree``'s, the one every consumer of a task gets. ``source``, for
    a task read from a dataset row, says how to rebuild its tree (the row's pin facts, compat patch and
    repository mirror); otherwise the pin is read from ``pins``."""
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.task_tree import broken_tree

    try:
        pin = source.pin if source is not None else read_pin(pin_path(task.pin, pins))
    except HarvestError as exc:
        raise EnvError(f"{task.instance_id}: its pin {task.pin} cannot be read ({exc})") from None
    if pin.commit != task.base_commit:
        raise EnvError(
            f"{task.instance_id}: task is for commit {task.base_commit[:12]}, pin {pin.id} is at {pin.commit[:12]}"
        )
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix="episode-", dir=scratch))
    root = holder / "ws"
    try:
        broken_tree(source or TreeSource(pin), task.broken_patch, root)
        project = discover(root, pin.project_dir)
        policy = policy_for(root, pin.project_dir)
    except HarvestError as exc:
        shutil.rmtree(holder, ignore_errors=True)
        raise EnvError(f"{task.instance_id}: the task workspace cannot be made ({exc})") from None
    except BaseException:
        shutil.rmtree(holder, ignore_errors=True)
        raise
    return TaskWorkspace(
        root=root.resolve(),
        project_dir=pin.project_dir,
        profile=project.profile,
        schema=pin.profile_schema,
        clock=pin.clock,
        policy=policy,
        exclude_tests=pin.excluded_tests,
        db_file=pin.db_file,
        toolchain=pin.toolchain,
    )


def discard(workspace: TaskWorkspace) -> None:
    """Remove the workspace and the temporary folder holding it (by fd: a link inside is never followed)."""
    from dbt_harvest.harvester.sandbox import safe_fs

    safe_fs.rmtree(workspace.root.parent)

"""The broken project of a task, as text files: what a prompt shows and what a reward edits.

A task record names its pin, a commit and the unified diff that breaks one model. Training reads the
project's text files at that commit, applies the ``broken_patch``, and keeps the result in memory.
``ProjectSource`` is the small protocol the rest of train/ depends on; two sources meet it:

- ``PinnedProjectSource`` (the default): the task's pin, materialized by the harvester exactly as the
  mint saw it (``harvester.workspace.template``: the pin's commit from its mirror under HARVEST_HOME, which
  for a local copy fetches from the copy and otherwise from the pin's URL; packages vendored, compat patch
  applied). It works for every spec kind (GitHub, git URL, local path or file:// URL, with or without
  ``--origin``), because it never guesses a repository from its name.
- ``GitProjectSource``: a folder of git repositories named after the task's ``repo`` (``owner__repo``,
  ``owner__repo.git`` or a harvester mirror folder), for training on task records without their pins
  (``[data] repos``), read with pygit2 without a checkout.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from core.task_record import TaskRecord
from train.errors import TrainDataError
from core.patching import PatchError, apply_to_text, parse_patch

#: File kinds a dbt project keeps its logic in; seeds and binaries stay out of prompts.
TEXT_SUFFIXES = (".sql", ".yml", ".yaml", ".md")


class ProjectSource(Protocol):
    def broken_files(self, task: TaskRecord) -> Mapping[str, str]:
        """Repo-relative path -> text of every project text file, with the task's bug applied."""
        ...


class PinnedProjectSource:
    """Reads each task's project from its pin under ``pins`` (the harvester's template of the pin).

    A task whose pin file is not in ``pins`` goes to ``fallback`` when one is given (e.g. a
    GitProjectSource over HARVEST_HOME/mirrors), else is refused with what to do.
    """

    def __init__(self, pins: Path, fallback: ProjectSource | None = None) -> None:
        self.pins = Path(pins)
        self.fallback = fallback

    def original_files(self, task: TaskRecord) -> dict[str, str]:
        """The project's text files at the pin's commit, before the task's bug."""
        from core.errors import HarvestError
        from core.pin import pin_path, read_pin
        from harvester.workspace import template

        path = pin_path(task.pin, self.pins)
        pin = read_pin(path)
        if pin.commit != task.base_commit:
            raise TrainDataError(f"{task.instance_id}: its pin {task.pin} is at {pin.commit[:12]}, the task at {task.base_commit[:12]}")
        try:
            tree = template(pin)
        except HarvestError as exc:
            raise TrainDataError(f"{task.instance_id}: cannot materialize its pin {pin.id} ({exc})") from None
        return dict(_files_in(str(tree), pin.id, task.project_dir))

    def broken_files(self, task: TaskRecord) -> Mapping[str, str]:
        from core.pin import pin_path

        if not pin_path(task.pin, self.pins).is_file():
            if self.fallback is not None:
                return self.fallback.broken_files(task)
            raise TrainDataError(
                f"{task.instance_id}: its pin {task.pin} is not in {self.pins}; set HARVEST_PINS to the pins folder "
                "it was minted from, or [data] repos to a folder of its git repositories"
            )
        return _with_bug(task, self.original_files(task))


class GitProjectSource:
    """Reads projects from local git repositories named ``owner__repo`` (or ``owner__repo.git``)."""

    def __init__(self, repos_root: Path) -> None:
        self.repos_root = Path(repos_root)

    def _repo_path(self, task: TaskRecord) -> Path:
        from harvester.gitstore import mirror_key

        url = task.repo if "://" in task.repo or task.repo.startswith("git@") else f"https://github.com/{task.repo}"
        slug = task.repo.rstrip("/").removesuffix(".git").split("/")[-2:]
        stem = "__".join(slug)
        candidates = [self.repos_root / mirror_key(url), self.repos_root / stem, self.repos_root / f"{stem}.git"]
        candidates += sorted(self.repos_root.glob(f"{stem}-*"))
        for path in candidates:
            if path.is_dir():
                return path
        raise TrainDataError(
            f"no local git repository for {task.repo} under {self.repos_root} "
            f"(looked for the harvester mirror {mirror_key(url)}, {stem}, {stem}.git)"
        )

    def broken_files(self, task: TaskRecord) -> Mapping[str, str]:
        return _with_bug(task, _files_at(str(self._repo_path(task)), task.base_commit, task.project_dir))


def _with_bug(task: TaskRecord, original: Mapping[str, str]) -> dict[str, str]:
    try:
        changed = apply_diff(original, task.broken_patch)
    except PatchError as exc:
        raise TrainDataError(f"{task.instance_id}: broken_patch does not apply ({exc})") from None
    return {**original, **changed}


_SKIPPED_DIRS = frozenset({"dbt_packages", "target", "logs", ".git"})


def _wanted(path: str, prefix: str) -> bool:
    return path.endswith(TEXT_SUFFIXES) and (not prefix or prefix == "." or path.startswith(prefix + "/"))


@lru_cache(maxsize=64)
def _files_in(root: str, pin_id: str, project_dir: str) -> dict[str, str]:
    """Text files of a materialized tree (``pin_id`` keys the cache), repo-relative, as _files_at reads them."""
    base = Path(root)
    prefix = project_dir.strip("/")
    files: dict[str, str] = {}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base)
        if any(part in _SKIPPED_DIRS for part in rel.parts[:-1]) or path.is_symlink() or not path.is_file():
            continue
        name = rel.as_posix()
        if _wanted(name, prefix):
            try:
                files[name] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return files


@lru_cache(maxsize=64)
def _files_at(repo_path: str, commit: str, project_dir: str) -> dict[str, str]:
    import pygit2

    try:
        repo = pygit2.Repository(repo_path)
        tree = repo.revparse_single(commit).peel(pygit2.Tree)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise TrainDataError(f"{repo_path}: cannot read commit {commit} ({exc})") from None
    prefix = project_dir.strip("/")
    files: dict[str, str] = {}

    def walk(node: "pygit2.Tree", base: str) -> None:
        for entry in node:
            path = posixpath.join(base, entry.name) if base else entry.name
            if entry.type_str == "tree":
                if path.split("/")[-1] in _SKIPPED_DIRS:
                    continue
                walk(repo[entry.id], path)
            elif _wanted(path, prefix):
                try:
                    files[path] = repo[entry.id].data.decode("utf-8")
                except UnicodeDecodeError:
                    continue

    walk(tree, "")
    return files


def apply_diff(files: Mapping[str, str], diff: str) -> dict[str, str]:
    """Apply a (multi-file) unified diff to in-memory files strictly; return the changed files only.

    Raises core.patching.PatchError when the diff is malformed, does not match, or names a file
    the project does not have (creating files is not an edit of the project).
    """
    changed: dict[str, str] = {}
    for file_patch in parse_patch(diff):
        base = changed.get(file_patch.path, files.get(file_patch.path))
        if base is None:
            raise PatchError(f"the diff edits {file_patch.path}, which is not a file of the project")
        changed[file_patch.path] = apply_to_text(base, file_patch)
    return changed


def relevant_files(task: TaskRecord, files: Mapping[str, str], max_chars: int) -> dict[str, str]:
    """What a prompt shows: the mutated file first, then schema files beside it, within ``max_chars``."""
    if task.file not in files:
        raise TrainDataError(f"{task.instance_id}: the mutated file {task.file} is not in the project")
    chosen = {task.file: files[task.file]}
    budget = max_chars - len(files[task.file])
    folder = posixpath.dirname(task.file)
    for path in sorted(files):
        if path in chosen or posixpath.dirname(path) != folder or not path.endswith((".yml", ".yaml")):
            continue
        if len(files[path]) <= budget:
            chosen[path] = files[path]
            budget -= len(files[path])
    return chosen


def corrected_files(task: TaskRecord, broken: Mapping[str, str]) -> dict[str, str]:
    """The true repair: the task's ``fix_patch`` applied to the broken project (changed files only)."""
    try:
        return apply_diff(broken, task.fix_patch)
    except PatchError as exc:
        raise TrainDataError(f"{task.instance_id}: fix_patch does not apply ({exc})") from None

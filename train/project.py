"""The broken project of a task, as text files: what a prompt shows and what a reward edits.

Training reads a task's project exactly as the environment materializes it (``harvester.task_tree``): the
pin's tree with the task's ``broken_patch`` applied, made on disk by ``broken_tree`` and listed by
``project_files`` (repository-relative paths, the package root included for a package built from its
``integration_tests/``, vendored packages and build output left out, as ``list_files`` leaves them out).
``ProjectSource`` is the small protocol the rest of train/ depends on; two sources meet it:

- ``PinnedProjectSource`` (the default): the task's pin, materialized by the harvester exactly as the
  mint saw it (``harvester.workspace.template``: the pin's commit from its mirror under HARVEST_HOME, which
  for a local copy fetches from the copy and otherwise from the pin's URL; packages vendored, compat patch
  and seed augmentation applied). It works for every spec kind and every layout, because it never guesses a
  repository from its name.
- ``GitProjectSource``: a folder of git repositories named after the task's ``repo`` (``owner__repo``,
  ``owner__repo.git`` or a harvester mirror folder), for training on task records without their pins
  (``[data] repos``): the commit exported (no packages: there is no pin to name them), then the same
  ``copy_broken`` and ``project_files``.

Each source keeps the last tasks' files in memory (a reward asks for them on every rollout).
"""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.patching import PatchError, apply_to_text, parse_patch
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.train.errors import PromptCoverageError, TrainDataError

#: How many tasks' files a source keeps in memory.
CACHED_TASKS = 64


class ProjectSource(Protocol):
    def broken_files(self, task: TaskRecord) -> Mapping[str, str]:
        """Repo-relative path -> text of every project text file, with the task's bug applied."""
        ...


class _TreeSource:
    """What both sources share: the broken tree made from a base tree (``_base``), listed, kept in memory
    for the last ``CACHED_TASKS`` tasks (a reward asks on every rollout). The cache is per process: a copy
    sent to a reward worker starts empty."""

    def _base(self, task: TaskRecord) -> Path:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)

    def _cache(self) -> OrderedDict[tuple[str, str], Mapping[str, str]]:
        if "_files" not in self.__dict__:
            self._files: OrderedDict[tuple[str, str], Mapping[str, str]] = OrderedDict()
        return self._files

    def _tree_files(self, task: TaskRecord) -> Mapping[str, str]:
        """``project_files`` of the task's broken tree, made from its base in a temporary folder."""
        from dbt_harvest.harvester.task_tree import copy_broken, project_files

        cache = self._cache()
        key = (task.instance_id, task.broken_patch)
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        base = self._base(task)
        with tempfile.TemporaryDirectory(prefix="train-task-") as tmp:
            try:
                tree = copy_broken(base, task.broken_patch, Path(tmp) / "ws")
            except PatchError as exc:
                raise TrainDataError(f"{task.instance_id}: broken_patch does not apply ({exc})") from None
            except HarvestError as exc:
                raise TrainDataError(f"{task.instance_id}: its broken tree cannot be made ({exc})") from None
            files = MappingProxyType(project_files(tree))
        cache[key] = files
        while len(cache) > CACHED_TASKS:
            cache.popitem(last=False)
        return files


class PinnedProjectSource(_TreeSource):
    """Reads each task's project from its pin under ``pins`` (the harvester's template of the pin).

    A task whose pin file is not in ``pins`` goes to ``fallback`` when one is given (e.g. a
    GitProjectSource over HARVEST_HOME/mirrors), else is refused with what to do.
    """

    def __init__(self, pins: Path, fallback: ProjectSource | None = None) -> None:
        self.pins = Path(pins)
        self.fallback = fallback

    def _base(self, task: TaskRecord) -> Path:
        from dbt_harvest.core.pin import pin_path, read_pin
        from dbt_harvest.harvester.task_tree import TreeSource

        try:
            pin = read_pin(pin_path(task.pin, self.pins))
        except HarvestError as exc:
            raise TrainDataError(f"{task.instance_id}: its pin {task.pin} cannot be read ({exc})") from None
        if pin.commit != task.base_commit:
            raise TrainDataError(
                f"{task.instance_id}: its pin {task.pin} is at {pin.commit[:12]}, the task at {task.base_commit[:12]}"
            )
        try:
            return TreeSource(pin).template()
        except HarvestError as exc:
            raise TrainDataError(f"{task.instance_id}: cannot materialize its pin {pin.id} ({exc})") from None

    def original_files(self, task: TaskRecord) -> dict[str, str]:
        """The project's text files at the pin's commit, before the task's bug."""
        from dbt_harvest.harvester.task_tree import project_files

        return project_files(self._base(task))

    def broken_files(self, task: TaskRecord) -> Mapping[str, str]:
        from dbt_harvest.core.pin import pin_path

        if not pin_path(task.pin, self.pins).is_file():
            if self.fallback is not None:
                return self.fallback.broken_files(task)
            raise TrainDataError(
                f"{task.instance_id}: its pin {task.pin} is not in {self.pins}; set HARVEST_PINS to the pins folder "
                "it was minted from, or [data] repos to a folder of its git repositories"
            )
        return self._tree_files(task)


class GitProjectSource(_TreeSource):
    """Reads projects from local git repositories named ``owner__repo`` (or ``owner__repo.git``)."""

    def __init__(self, repos_root: Path) -> None:
        self.repos_root = Path(repos_root)

    def _repo_path(self, task: TaskRecord) -> Path:
        from dbt_harvest.harvester.gitstore import mirror_key

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

    def _base(self, task: TaskRecord) -> Path:
        """The commit's tree, exported once per process (harvester.gitstore: no .git, links kept)."""
        import pygit2

        from dbt_harvest.harvester.gitstore import GitStore

        repo_path = self._repo_path(task)
        exports: dict[tuple[str, str], Path] = self.__dict__.setdefault("_exports", {})
        key = (str(repo_path), task.base_commit)
        if key not in exports:
            if "_scratch" not in self.__dict__:
                self._scratch = tempfile.TemporaryDirectory(prefix="train-repos-")
            dest = Path(self._scratch.name) / str(len(exports))
            try:
                GitStore(Path(self._scratch.name)).export(pygit2.Repository(str(repo_path)), task.base_commit, dest)
            except (HarvestError, KeyError, ValueError, pygit2.GitError) as exc:
                raise TrainDataError(f"{repo_path}: cannot read commit {task.base_commit} ({exc})") from None
            exports[key] = dest
        return exports[key]

    def broken_files(self, task: TaskRecord) -> Mapping[str, str]:
        return self._tree_files(task)


def apply_diff(files: Mapping[str, str], diff: str) -> dict[str, str]:
    """Apply a (multi-file) unified diff to in-memory files strictly; return the changed files only.

    Raises core.patching.PatchError when the diff is malformed, does not match, or names a file
    the project does not have (a diff may create a file only with ``--- /dev/null``: a completion task's
    missing model).
    """
    changed: dict[str, str] = {}
    for file_patch in parse_patch(diff):
        base = changed.get(file_patch.path, files.get(file_patch.path))
        if file_patch.created:
            if base is not None:
                raise PatchError(f"the diff creates {file_patch.path}, which the project already has")
            base = ""
        if base is None:
            raise PatchError(f"the diff edits {file_patch.path}, which is not a file of the project")
        changed[file_patch.path] = apply_to_text(base, file_patch)
    return changed


def relevant_files(task: TaskRecord, files: Mapping[str, str], max_chars: int) -> dict[str, str]:
    """What a single-turn prompt shows: the reported tables' models, their upstream lineage and the YAML
    that documents them, within ``max_chars``, in an order seeded by the task (``train.lineage.symptom_view``).

    The set depends on the task's reported (graded) tables and the ORIGINAL project only (the fix applied
    before measuring), never on which file was mutated, and the order on a digest of the task's id; the files
    shown are the broken ones. When the broken file is not in the set (a lineage the budget cuts, or a
    ``ref()`` the text does not show), the prompt could not contain the bug: PromptCoverageError.
    """
    from dbt_harvest.train.lineage import symptom_view

    if task.kind == "completion":
        return contract_files(task, files, max_chars)
    if task.file not in files:
        raise TrainDataError(f"{task.instance_id}: the mutated file {task.file} is not in the project")
    original = {**files, **corrected_files(task, files)}  # sizes and refs of the project before the bug
    view = symptom_view(original, task.grading.condition_tabs, max_chars, seed=task.instance_id)
    if not view.covers(task.file):
        why = "beyond max_file_chars" if task.file in view.skipped else "not on the reported tables' ref() lineage"
        raise PromptCoverageError(
            f"{task.instance_id}: the broken model is {why} ({len(view.paths)} files shown for "
            f"{', '.join(view.tables)}); raise [data] max_file_chars or leave the row out"
        )
    return {path: files[path] for path in view.paths}


def contract_files(task: TaskRecord, files: Mapping[str, str], max_chars: int) -> dict[str, str]:
    """What a completion task's single-turn prompt shows: the models upstream of the missing model and the
    YAML that documents them and it (its contract), within ``max_chars``, in the seeded order; never the
    missing file (it is the answer). The lineage is read from the project with the file written back, so
    the missing model's own ``ref()``s lead to its parents."""
    from dbt_harvest.train.completion import missing_files
    from dbt_harvest.train.lineage import symptom_view

    missing = missing_files(task)
    if any(path in files for path in missing):
        raise TrainDataError(f"{task.instance_id}: a completion task's project still has one of {', '.join(missing)}")
    original = {**files, **corrected_files(task, files)}
    view = symptom_view(
        original,
        task.grading.condition_tabs,
        max_chars + sum(len(original.get(p, "")) for p in missing),
        seed=task.instance_id,
    )
    return {path: files[path] for path in view.paths if path in files}


def corrected_files(task: TaskRecord, broken: Mapping[str, str]) -> dict[str, str]:
    """The true repair: the task's ``fix_patch`` applied to the broken project (changed files only)."""
    try:
        return apply_diff(broken, task.fix_patch)
    except PatchError as exc:
        raise TrainDataError(f"{task.instance_id}: fix_patch does not apply ({exc})") from None

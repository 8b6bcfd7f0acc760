"""A task's project as every consumer sees it: one way to materialize it, one way to list its files.

A task is its pin's tree (the commit exported, packages vendored, compat patch and seed augmentation
applied: ``harvester.workspace.template``) with the task's ``broken_patch`` applied on top. Every
consumer gets exactly that tree, made here: the eval environment's workspace, ``harvest tasks
materialize`` and ``harvest score --task`` (from a dataset row), the GRPO reward's pristine workspace
(``harvester.grading.edited``), the Spider2 export and the training rows (``train.project``). What a
training prompt shows is ``project_files`` of that tree: repository-relative paths (a package built from
its ``integration_tests/`` has its models at the repository root, outside ``project_dir``), vendored
packages, build output and VCS folders left out, as the environment's ``list_files`` leaves them out.

``TreeSource`` says where the pin's tree comes from: the pin alone (its compat patch and augmentation
from the pins folder, its bytes from the mirror under HARVEST_HOME), or, for a dataset row, the row's
own patch texts and a local repository mirror.
"""

from __future__ import annotations

import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dbt_harvest.core.patching import apply_patch
from dbt_harvest.core.pin import Pin

#: Folders that are never part of the project an agent edits: vendored packages, build output, VCS.
NOT_PROJECT = frozenset({"dbt_packages", "dbt_modules", "target", "logs", ".git"})
#: Top-level entries that belong to the sandbox or the harvester, never to the project.
HIDDEN_PREFIXES = (".harvest",)
HIDDEN_SUFFIXES = (".duckdb", ".duckdb.wal")
#: File kinds a dbt project keeps its logic and contracts in; seeds and binaries stay out of prompts.
TEXT_SUFFIXES = (".sql", ".yml", ".yaml", ".md")
#: A file larger than this is not shown (the environment's read_file refuses it too).
MAX_TEXT_BYTES = 100_000


@dataclass(frozen=True)
class TreeSource:
    """Where a pin's tree comes from. ``None`` fields default to the pin's own (pins folder, mirror)."""

    pin: Pin
    compat_text: str | None = None
    fetch_from: str | None = None
    augment_text: str | None = None
    synth_text: str | None = None
    port_text: str | None = None

    def template(self) -> Path:
        """The pin's materialized tree (cached under HARVEST_HOME/templates, made on first use)."""
        from dbt_harvest.harvester.workspace import template

        return template(
            self.pin,
            compat_text=self.compat_text,
            fetch_from=self.fetch_from,
            augment_text=self.augment_text,
            synth_text=self.synth_text,
            port_text=self.port_text,
        )


def strip_vcs(root: Path) -> None:
    """Remove every ``.git`` under ``root`` (history would leak the original), by fd, links not followed."""
    from dbt_harvest.harvester.sandbox import safe_fs

    found = [
        rel
        for rel, _ in safe_fs.walk(root, descend=lambda rel, _: PurePosixPath(rel).name != ".git")
        if PurePosixPath(rel).name == ".git"
    ]
    for rel in found:
        entry = safe_fs.lstat(root, rel)
        if entry is not None and entry.kind == "dir":
            safe_fs.rmtree(root / rel)
        else:
            safe_fs.remove(root, rel)


def copy_broken(base: Path, broken_patch: str, dest: Path) -> Path:
    """``dest`` (must not exist): ``base`` copied (links kept as links), no VCS, ``broken_patch`` applied."""
    from dbt_harvest.harvester.workspace import TEMPLATE_MARKER

    shutil.copytree(base, dest, symlinks=True, ignore=shutil.ignore_patterns(TEMPLATE_MARKER))
    strip_vcs(dest)
    apply_patch(dest, broken_patch)
    return dest


def broken_tree(source: TreeSource, broken_patch: str, dest: Path) -> Path:
    """The task's broken workspace at ``dest``: the pin's template copied, no VCS, the broken patch applied."""
    return copy_broken(source.template(), broken_patch, dest)


def is_hidden(parts: tuple[str, ...]) -> bool:
    """The sandbox's own files (``.harvest*`` at the top, the build database): never listed, never read."""
    if not parts:
        return False
    return parts[0].startswith(HIDDEN_PREFIXES) or (len(parts) == 1 and parts[0].endswith(HIDDEN_SUFFIXES))


def project_files(
    root: Path, suffixes: tuple[str, ...] = TEXT_SUFFIXES, max_bytes: int = MAX_TEXT_BYTES
) -> dict[str, str]:
    """Repository-relative path -> UTF-8 text of every project file of the tree at ``root`` with one of
    ``suffixes``: what an agent can list and read there. Nothing under ``NOT_PROJECT`` folders, no sandbox
    file, no link (read beneath the root by fd, never followed), no file over ``max_bytes`` or not UTF-8."""
    from dbt_harvest.harvester.sandbox import safe_fs

    def descend(rel: str, _: object) -> bool:
        parts = PurePosixPath(rel).parts
        return parts[-1] not in NOT_PROJECT and not is_hidden(parts)

    files: dict[str, str] = {}
    for rel, info in safe_fs.walk(root, descend=descend):
        parts = PurePosixPath(rel).parts
        if not stat.S_ISREG(info.st_mode) or is_hidden(parts) or NOT_PROJECT & set(parts[:-1]):
            continue
        if not rel.endswith(suffixes) or info.st_size > max_bytes:
            continue
        try:
            files[rel] = safe_fs.read_bytes(root, rel, max_bytes=max_bytes).decode("utf-8")
        except (UnicodeDecodeError, safe_fs.UnsafePathError):
            continue
    return files

"""The fix of a history pin: the fix commit's model files over its parent's tree, read from the repository.

A history pin records which files the fix changed, the fix commit and the sha256 of the change as a unified
diff, never the change itself (it is the repository's code, like the rest of the tree, and is read again from
the repository's history wherever the pin is materialized). Reading it checks the recorded hash, so a
history that was rewritten under the same commit ids cannot pass for the pinned fix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from dbt_harvest.core.errors import HarvestError, PinError
from dbt_harvest.core.home import mirrors_dir
from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.gitstore import GitStore
from dbt_harvest.harvester.sandbox import safe_fs


class FixError(HarvestError):
    """A fix cannot be read from the repository or applied to a tree; the message says which file and why."""


@dataclass(frozen=True)
class Fix:
    """A fix commit's change of some files: each file's text at the parent (``before``) and at the fix
    (``after``). A file absent on one side is None there."""

    commit: str
    parent: str
    files: tuple[str, ...]
    before: tuple[str | None, ...]
    after: tuple[str | None, ...]

    @property
    def patch(self) -> str:
        """The change as a unified diff (parent -> fix), files in the recorded order."""
        return "".join(make_patch(f, b, a) for f, b, a in zip(self.files, self.before, self.after))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.patch.encode()).hexdigest()

    def text_before(self, file: str) -> str | None:
        return self.before[self.files.index(file)]

    def text_after(self, file: str) -> str | None:
        return self.after[self.files.index(file)]


def file_text(repo: pygit2.Repository, commit: str, path: str) -> str | None:
    """A regular file's text at ``commit`` (None where the commit has no such file); FixError if not UTF-8."""
    data = GitStore(mirrors_dir()).read_file(repo, commit, path)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        raise FixError(f"{path} at {commit[:12]} is not UTF-8 text") from None


def read_fix(repo: pygit2.Repository, parent: str, commit: str, files: Sequence[str]) -> Fix:
    """The change of ``files`` from ``parent`` to ``commit`` as the repository holds them."""
    for sha in (parent, commit):
        try:
            repo.revparse_single(sha).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            raise FixError(f"commit {sha[:12]} is not in the repository's history (fetch its mirror again)") from None
    ordered = tuple(sorted(files))
    return Fix(
        commit,
        parent,
        ordered,
        tuple(file_text(repo, parent, f) for f in ordered),
        tuple(file_text(repo, commit, f) for f in ordered),
    )


def pin_fix(pin: Pin, repo: pygit2.Repository) -> Fix:
    """A history pin's fix, read from ``repo`` and checked against the hash the pin records."""
    if not pin.is_history:
        raise PinError(f"{pin.id} is not a history pin (it records no fix commit)")
    fix = read_fix(repo, pin.commit, pin.fix_commit, pin.fix_files)
    if fix.sha256 != pin.fix_sha256:
        raise PinError(
            f"{pin.id}: the change of {', '.join(pin.fix_files)} from {pin.commit[:12]} to "
            f"{pin.fix_commit[:12]} does not match the pin's fix_sha256 {pin.fix_sha256[:12]} "
            "(the repository's history was rewritten?)"
        )
    return fix


def apply_fix(root: Path, fix: Fix) -> None:
    """Write the fix into the parent's tree at ``root``: every file must hold its parent text first (so a
    compat patch or a second application cannot be silently overwritten); a file the fix deletes is removed."""
    for file, before, after in zip(fix.files, fix.before, fix.after):
        try:  # beneath ``root`` and never through a link the repository planted (a dataset row names the files)
            present = safe_fs.read_text(root, file) if safe_fs.is_file(root, file) else None
            if present != before:
                raise FixError(
                    f"cannot apply the fix {fix.commit[:12]} to {file}: the tree does not hold its parent text"
                )
            if after is None:
                safe_fs.remove(root, file)
            else:
                safe_fs.write_text(root, file, after)
        except (safe_fs.UnsafePathError, UnicodeDecodeError) as exc:
            raise FixError(f"cannot apply the fix {fix.commit[:12]} to {file}: {exc}") from None

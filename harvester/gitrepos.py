"""Turn folders of files into deterministic local git repositories (pygit2, never the git CLI).

Why it exists: the embedded example (`harvest demo`) and every test fixture are plain folders shipped in
this repository, but the harvester only ever reads *git repositories at exact commits*. This module
writes those repositories: one commit of a folder, or a history of successive versions with tags (a dbt
package at 0.1.0, 0.2.0, ...), and a package mirror laid out as ``DIR/<org>/<package_name>`` exactly as
``harvest add --package-mirror DIR`` reads it.

Everything is deterministic: a fixed author and committer, fixed timestamps (one day apart per commit),
sorted trees and fixed file modes, so the same files give the same commit ids on every machine. That
lets tests and pins name commits that never change.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from dbt_harvest.core.errors import HarvestError

if TYPE_CHECKING:
    import pygit2

#: The identity every generated commit carries.
AUTHOR_NAME = "dbt-harvest fixtures"
AUTHOR_EMAIL = "fixtures@dbt-harvest.invalid"
#: 2024-01-01T00:00:00Z; commit ``i`` is stamped one day after commit ``i - 1``.
BASE_TIME = 1_704_067_200
TIME_STEP = 86_400

#: Names never copied from a source folder into a repository.
_SKIP_NAMES = frozenset({".git", "__pycache__", ".DS_Store"})

_MODE_BLOB = 0o100644
_MODE_EXEC = 0o100755
_MODE_LINK = 0o120000
_MODE_TREE = 0o040000
_MODE_GITLINK = 0o160000


class GitRepoError(HarvestError):
    """A fixture or example repository could not be written (bad input folder, destination in use...)."""


@dataclass(frozen=True)
class Symlink:
    """A symbolic link entry in an overlay: the link stores ``target`` verbatim (may leave the tree)."""

    target: str


@dataclass(frozen=True)
class Gitlink:
    """A submodule entry in an overlay: a tree entry pointing at ``commit`` of some other repository."""

    commit: str


#: What an overlay may put at a path: file text, file bytes, a symlink, a submodule, or None (delete).
FileContent: TypeAlias = str | bytes | Symlink | Gitlink | None


@dataclass(frozen=True)
class GitRepo:
    """A repository written by :func:`make_git_repo`.

    ``commits`` are 40-hex ids, oldest first (``commits[-1]`` is the branch head); ``tags`` maps each tag
    name to the commit id it points at.
    """

    path: Path
    branch: str
    commits: tuple[str, ...]
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def head(self) -> str:
        """The newest commit (the branch tip)."""
        return self.commits[-1]

    def spec(self, commit: str | None = None) -> str:
        """``<path>@<commit>``: the spec `harvest add` takes for this repository (head by default)."""
        return f"{self.path}@{commit or self.head}"


def make_git_repo(
    src: Path | None,
    dest: Path,
    *,
    commits: Sequence[Mapping[str, Any]] | None = None,
    tags: Mapping[str, int] | None = None,
    branch: str = "main",
    bare: bool = False,
) -> GitRepo:
    """Write a git repository at ``dest`` whose history is ``src`` followed by ``commits``.

    - ``src``: a folder; its whole content becomes the first commit. ``None`` starts from an empty
      tree (then ``commits`` must say what goes in).
    - ``commits``: later commits, oldest first, each a mapping with any of
        ``"src"``: a folder that REPLACES the whole tree (a full snapshot, e.g. a package version);
        ``"files"``: ``{relative path: str | bytes | Symlink | Gitlink | None}`` applied on top
        (None deletes the path);
        ``"message"``: the commit message (default ``"commit <n>"``);
        ``"tag"``: a tag name for this commit (same as an entry in ``tags``).
    - ``tags``: tag name -> index into the resulting commit list (0 is ``src``'s commit).

    Tags are lightweight. The working tree is checked out at the head unless ``bare``. ``dest`` must not
    exist or be an empty folder. The same inputs give the same commit ids on every machine.
    """
    import pygit2

    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise GitRepoError(f"{dest} already exists and is not an empty folder; pick a fresh destination")
    steps = _history_steps(src, commits)
    wanted_tags = _wanted_tags(steps, tags)
    dest.mkdir(parents=True, exist_ok=True)
    repo = pygit2.init_repository(str(dest), bare=bare, initial_head=branch)
    ids = _commit_steps(repo, steps, branch)
    for name, index in sorted(wanted_tags.items()):
        repo.references.create(f"refs/tags/{name}", pygit2.Oid(hex=ids[index]))
    if not bare:
        repo.checkout_head(strategy=pygit2.enums.CheckoutStrategy.FORCE)
    return GitRepo(
        path=dest.resolve(),
        branch=branch,
        commits=tuple(ids),
        tags={name: ids[index] for name, index in sorted(wanted_tags.items())},
    )


def _history_steps(src: Path | None, commits: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    """The commits to write, oldest first: ``src``'s (when given), then ``commits``; GitRepoError when none."""
    steps: list[Mapping[str, Any]] = []
    if src is not None:
        steps.append({"src": Path(src), "message": "initial commit"})
    steps.extend(commits or ())
    if not steps:
        raise GitRepoError("nothing to commit: give a source folder or at least one commit")
    return steps


def _wanted_tags(steps: Sequence[Mapping[str, Any]], tags: Mapping[str, int] | None) -> dict[str, int]:
    """Tag name -> commit index, from the steps' ``"tag"`` keys and ``tags``; GitRepoError for a step with an
    unknown key or a tag pointing past the last commit."""
    wanted: dict[str, int] = {}
    for index, step in enumerate(steps):
        unknown = set(step) - {"src", "files", "message", "tag"}
        if unknown:
            raise GitRepoError(f"commit {index}: unknown key(s) {', '.join(map(repr, sorted(unknown)))}")
        if "tag" in step:
            wanted[str(step["tag"])] = index
    for name, index in (tags or {}).items():
        if not 0 <= index < len(steps):
            raise GitRepoError(f"tag {name!r} points at commit {index}, but there are {len(steps)} commits")
        wanted[name] = index
    return wanted


def _commit_steps(repo: pygit2.Repository, steps: Sequence[Mapping[str, Any]], branch: str) -> list[str]:
    """Commit each step on ``branch`` (a snapshot folder, then its file overlay), one day apart from
    BASE_TIME; returns the commit ids, oldest first."""
    import pygit2

    entries: dict[str, tuple[int, bytes]] = {}  # path -> (mode, content)
    ids: list[str] = []
    parents: list[Any] = []
    for index, step in enumerate(steps):
        if "src" in step:
            entries = _read_folder(Path(step["src"]))
        for rel, content in (step.get("files") or {}).items():
            _apply(entries, _clean_rel(rel), content)
        tree = _write_tree(repo, entries)
        when = pygit2.Signature(AUTHOR_NAME, AUTHOR_EMAIL, BASE_TIME + index * TIME_STEP, 0)
        message = str(step.get("message") or f"commit {index}")
        oid = repo.create_commit(
            f"refs/heads/{branch}",
            when,
            when,
            message if message.endswith("\n") else message + "\n",
            tree,
            parents,
        )
        ids.append(str(oid))
        parents = [oid]
    return ids


def make_versioned_repo(dest: Path, versions: Mapping[str, Path], *, branch: str = "main") -> GitRepo:
    """A package's release history: one commit per version folder, each tagged with its version name.

    ``versions`` maps a tag (``"0.1.0"``, ``"v0.2.1"``...) to a folder holding that version's whole tree;
    commits are made in ascending version order whatever the mapping's order.
    """
    ordered = sorted(versions.items(), key=lambda item: _version_key(item[0]))
    return make_git_repo(
        None,
        dest,
        commits=[{"src": Path(folder), "message": f"release {tag}", "tag": tag} for tag, folder in ordered],
        branch=branch,
    )


def make_package_mirror(dest: Path, packages: Mapping[str, Mapping[str, Path] | Path]) -> Path:
    """Lay out a package mirror: ``DEST/<org>/<package_name>`` git repositories named by hub id.

    ``packages`` maps a hub id (``"harvestlabs/shop_utils"``) to either ``{tag: version folder}`` or a
    folder whose sub-folders are named by tag (``shop_utils/0.1.0/``, ``shop_utils/0.2.0/``...). Each
    package becomes a repository with one tagged commit per version (see :func:`make_versioned_repo`).
    Returns ``dest``, the folder to pass as ``--package-mirror``.
    """
    dest = Path(dest)
    for hub_id, versions in sorted(packages.items()):
        parts = hub_id.split("/")
        if len(parts) != 2 or not all(parts) or any(p in {".", ".."} for p in parts):
            raise GitRepoError(f"hub id {hub_id!r} must look like <org>/<package_name>")
        if isinstance(versions, (str, os.PathLike)):
            folder = Path(versions)
            if not folder.is_dir():
                raise GitRepoError(f"{hub_id}: {folder} is not a folder of version folders")
            versions = {child.name: child for child in folder.iterdir() if child.is_dir()}
        if not versions:
            raise GitRepoError(f"{hub_id}: no versions given")
        make_versioned_repo(dest / parts[0] / parts[1], versions)
    return dest.resolve()


def _version_key(tag: str) -> tuple[int, Any]:
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(tag.removeprefix("v")))
    except InvalidVersion:
        return (1, tag)


def _clean_rel(rel: str) -> str:
    parts = [p for p in str(rel).replace("\\", "/").split("/") if p not in {"", "."}]
    if not parts or ".." in parts or ".git" in parts:
        raise GitRepoError(f"bad path {rel!r} in a commit's files (must be relative, inside the tree)")
    return "/".join(parts)


def _read_folder(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and symlink under ``folder`` (not following links), keyed by POSIX relative path."""
    if not folder.is_dir():
        raise GitRepoError(f"{folder} is not a folder")
    found: dict[str, tuple[int, bytes]] = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_NAMES)
        base = Path(root)
        for name in list(dirs):
            if (base / name).is_symlink():  # os.walk lists a link to a folder as a dir; keep it a link
                dirs.remove(name)
                files.append(name)
        for name in sorted(files):
            if name in _SKIP_NAMES:
                continue
            path = base / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found[rel] = (_MODE_LINK, os.readlink(path).encode())
            else:
                executable = bool(path.stat().st_mode & stat.S_IXUSR)
                found[rel] = (_MODE_EXEC if executable else _MODE_BLOB, path.read_bytes())
    return found


def _apply(entries: dict[str, tuple[int, bytes]], rel: str, content: FileContent) -> None:
    if content is None:
        prefix = rel + "/"
        for key in [k for k in entries if k == rel or k.startswith(prefix)]:
            del entries[key]
        return
    if isinstance(content, Symlink):
        entries[rel] = (_MODE_LINK, content.target.encode())
    elif isinstance(content, Gitlink):
        entries[rel] = (_MODE_GITLINK, content.commit.encode())
    elif isinstance(content, str):
        entries[rel] = (_MODE_BLOB, content.encode("utf-8"))
    elif isinstance(content, bytes):
        entries[rel] = (_MODE_BLOB, content)
    else:
        raise GitRepoError(f"{rel}: unsupported content {type(content).__name__}")


def _write_tree(repo: Any, entries: Mapping[str, tuple[int, bytes]]) -> Any:
    """Write nested trees bottom-up and return the root tree id."""
    import pygit2

    nested: dict[str, Any] = {}
    for rel, value in entries.items():
        *dirs, leaf = rel.split("/")
        node = nested
        for part in dirs:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise GitRepoError(f"{rel}: a parent path is a file")
            node = child
        if isinstance(node.get(leaf), dict):
            raise GitRepoError(f"{rel}: is both a file and a folder")
        node[leaf] = value

    def build(node: Mapping[str, Any]) -> Any:
        builder = repo.TreeBuilder()
        for name in sorted(node):
            value = node[name]
            if isinstance(value, dict):
                builder.insert(name, build(value), _MODE_TREE)
            else:
                mode, data = value
                if mode == _MODE_GITLINK:
                    builder.insert(name, pygit2.Oid(hex=data.decode()), mode)
                else:
                    builder.insert(name, repo.create_blob(data), mode)
        return builder.write()

    return build(nested)

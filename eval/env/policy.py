"""The file policy of an episode: which paths an agent may list, read and write, enforced on the filesystem.

Paths are relative to the workspace root (the repository root, as in ``TaskRecord.file``). Every
component is checked with ``lstat`` so a symlink anywhere on the way is refused rather than followed;
``..``, absolute paths and NUL bytes are refused before touching the disk; the reads, writes and listings
themselves go through ``harvester.sandbox.safe_fs`` (resolved beneath the root, no link followed). Writes are allowed only
inside the dbt project's model, macro, seed and test folders (read from ``dbt_project.yml``, plus the
parent project's folders when the built project is a package's ``integration_tests/``), only for
SQL/YAML/CSV/Markdown files, and never under ``dbt_packages`` or ``target``. The sandbox's own files
(``.harvest_*``, the build database) are hidden from listing and reading.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dbt_harvest.eval.env.errors import InvalidAction
from dbt_harvest.harvester.sandbox import safe_fs
from dbt_harvest.harvester.task_tree import NOT_PROJECT, is_hidden

#: Folder names never written (vendored packages, build output, VCS): what is not the project.
NEVER_WRITE = NOT_PROJECT
WRITABLE_SUFFIXES = (".sql", ".yml", ".yaml", ".csv", ".md")
MAX_READ_BYTES = 100_000
MAX_WRITE_CHARS = 200_000


@dataclass(frozen=True)
class PathPolicy:
    """Where an agent may act inside one workspace."""

    root: Path  # resolved workspace root
    writable: tuple[str, ...]  # root-relative folders (POSIX), e.g. ("models", "macros", "seeds", "tests")

    def describe(self) -> str:
        return ", ".join(f"{w}/" for w in self.writable) or "(nothing)"


def _clean_folder(project_dir: str, folder: str) -> str | None:
    joined = PurePosixPath(project_dir) / folder if project_dir not in ("", ".") else PurePosixPath(folder)
    parts: list[str] = []
    for part in joined.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    if not parts or PurePosixPath(*parts).is_absolute() or NEVER_WRITE & set(parts):
        return None
    return "/".join(parts)


def policy_for(root: Path, project_dir: str) -> PathPolicy:
    """The policy of a workspace: its project's (and a parent package's) model/macro/seed/test folders."""
    from dbt_harvest.harvester.discovery import discover

    root = Path(root).resolve()
    projects = [project_dir or "."]
    if projects[0] != "." and (root / "dbt_project.yml").is_file():
        projects.append(".")
    writable: list[str] = []
    for rel in projects:
        project = discover(root, rel)
        for folder in (*project.model_paths, *project.macro_paths, *project.seed_paths, *project.test_paths):
            clean = _clean_folder(rel, folder)
            if clean and clean not in writable:
                writable.append(clean)
    return PathPolicy(root=root, writable=tuple(writable))


def _parts(path: str) -> tuple[str, ...]:
    if not isinstance(path, str):
        raise InvalidAction("path must be a string")
    if "\x00" in path or "\\" in path:
        raise InvalidAction(f"path {path!r} holds a NUL byte or a backslash; use '/' separated relative paths")
    pure = PurePosixPath(path.strip())
    if pure.is_absolute():
        raise InvalidAction(f"path {path!r} is absolute; paths are relative to the workspace root, e.g. models/x.sql")
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    if ".." in parts:
        raise InvalidAction(f"path {path!r} climbs out with '..'; paths stay inside the workspace")
    return parts


def _walk_no_symlinks(policy: PathPolicy, parts: tuple[str, ...], *, must_exist: bool) -> Path:
    """The path for ``parts`` under the root, refusing any component that is a symlink."""
    for index in range(len(parts)):
        rel = "/".join(parts[: index + 1])
        entry = safe_fs.lstat(policy.root, rel)
        if entry is None:
            if must_exist:
                raise InvalidAction(f"{rel} does not exist; call list_files to see what is there")
            break
        if entry.kind == "link":
            raise InvalidAction(f"{rel} is a symbolic link; links are not followed")
        if entry.kind != "dir" and index < len(parts) - 1:
            raise InvalidAction(f"{rel} is not a folder")
    return policy.root.joinpath(*parts)


def resolve_read(policy: PathPolicy, path: str) -> tuple[Path, str]:
    """An existing, visible path to read or list -> (absolute path, normalized relative path)."""
    parts = _parts(path)
    if is_hidden(parts):
        raise InvalidAction(f"{path} belongs to the sandbox, not the project")
    return _walk_no_symlinks(policy, parts, must_exist=True), "/".join(parts) or "."


def check_write(policy: PathPolicy, path: str) -> tuple[Path, str]:
    """A path the agent may write -> (absolute path, normalized relative path), or InvalidAction saying why."""
    parts = _parts(path)
    rel = "/".join(parts)
    if not parts:
        raise InvalidAction("write_file needs a file path, e.g. models/orders.sql")
    if NEVER_WRITE & set(parts):
        raise InvalidAction(f"{rel}: files under dbt_packages, target, logs or .git are not writable")
    if is_hidden(parts):
        raise InvalidAction(f"{rel} belongs to the sandbox, not the project")
    if not any(rel.startswith(folder + "/") for folder in policy.writable):
        raise InvalidAction(f"{rel} is outside the writable folders; write only under {policy.describe()}")
    if not rel.lower().endswith(WRITABLE_SUFFIXES):
        raise InvalidAction(f"{rel}: only {', '.join(WRITABLE_SUFFIXES)} files may be written")
    target = _walk_no_symlinks(policy, parts, must_exist=False)
    entry = safe_fs.lstat(policy.root, rel)
    if entry is not None and entry.kind != "file":
        raise InvalidAction(f"{rel} is a folder, not a file")
    return target, rel


def read_text(policy: PathPolicy, rel: str) -> str:
    """A file's UTF-8 text, opened beneath the root without following any link, capped in size."""
    try:
        data = safe_fs.read_bytes(policy.root, rel, max_bytes=MAX_READ_BYTES)
    except safe_fs.UnsafePathError as exc:
        entry = safe_fs.lstat(policy.root, rel)
        if entry is not None and entry.kind == "dir":
            raise InvalidAction(f"{rel} is not a regular file; call list_files on a folder") from None
        if entry is not None and entry.kind == "file" and entry.size > MAX_READ_BYTES:
            raise InvalidAction(f"{rel} is {entry.size} bytes, over the {MAX_READ_BYTES} byte read limit") from None
        raise InvalidAction(f"{rel} cannot be read ({exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidAction(f"{rel} is not a UTF-8 text file") from None


def write_text(policy: PathPolicy, target: Path, rel: str, content: str) -> None:
    """Create missing folders (never through a link) and replace the file atomically, beneath the root."""
    if not isinstance(content, str):
        raise InvalidAction("content must be a string (the whole new file)")
    if len(content) > MAX_WRITE_CHARS:
        raise InvalidAction(f"content is {len(content)} characters, over the {MAX_WRITE_CHARS} limit")
    try:
        safe_fs.write_bytes(
            policy.root, rel, content.encode("utf-8")
        )  # replaces a link itself, never writes through one
    except safe_fs.UnsafePathError as exc:
        raise InvalidAction(f"{rel} cannot be written ({exc})") from None


def list_tree(policy: PathPolicy, start: Path, rel: str, limit: int = 400) -> list[str]:
    """Files under ``start`` (relative to the root), sandbox files hidden, links shown but not followed."""
    entry = safe_fs.lstat(policy.root, rel)
    if entry is not None and entry.kind == "file":
        return [rel]
    skip_heavy = not (set(PurePosixPath(rel).parts) & {"dbt_packages", "target"})
    found: list[str] = []

    def heavy(path: str) -> bool:
        name = PurePosixPath(path).name
        return (
            name == ".git"
            or is_hidden(PurePosixPath(path).parts)
            or (skip_heavy and name in ("dbt_packages", "target", "logs"))
        )

    for path, info in safe_fs.walk(policy.root, "" if rel == "." else rel, descend=lambda p, _: not heavy(p)):
        parts = PurePosixPath(path).parts
        if is_hidden(parts) or ".git" in parts:
            continue
        if stat.S_ISLNK(info.st_mode):
            found.append(f"{path} -> (symbolic link, not followed)")
        elif stat.S_ISDIR(info.st_mode):
            if heavy(path):
                found.append(f"{path}/ (not expanded; list it to see inside)")
        else:
            found.append(path)
        if len(found) > limit:
            break
    return found

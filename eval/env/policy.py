"""The file policy of an episode: which paths an agent may list, read and write, enforced on the filesystem.

Paths are relative to the workspace root (the repository root, as in ``TaskRecord.file``). Every
component is checked with ``lstat`` so a symlink anywhere on the way is refused rather than followed;
``..``, absolute paths and NUL bytes are refused before touching the disk. Writes are allowed only
inside the dbt project's model, macro, seed and test folders (read from ``dbt_project.yml``, plus the
parent project's folders when the built project is a package's ``integration_tests/``), only for
SQL/YAML/CSV/Markdown files, and never under ``dbt_packages`` or ``target``. The sandbox's own files
(``.harvest_*``, the build database) are hidden from listing and reading.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from eval.env.errors import InvalidAction

#: Top-level workspace entries that belong to the sandbox, never to the project.
HIDDEN_PREFIXES = (".harvest",)
HIDDEN_SUFFIXES = (".duckdb", ".duckdb.wal")
#: Folder names never written (vendored packages, build output, VCS).
NEVER_WRITE = frozenset({"dbt_packages", "target", "logs", ".git", "dbt_modules"})
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
    from harvester.discovery import discover

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


def is_hidden(parts: tuple[str, ...]) -> bool:
    """The sandbox's own files: never listed, never read."""
    if not parts:
        return False
    return parts[0].startswith(HIDDEN_PREFIXES) or (len(parts) == 1 and parts[0].endswith(HIDDEN_SUFFIXES))


def _walk_no_symlinks(policy: PathPolicy, parts: tuple[str, ...], *, must_exist: bool) -> Path:
    """The path for ``parts`` under the root, refusing any component that is a symlink."""
    current = policy.root
    for index, part in enumerate(parts):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            if must_exist:
                shown = "/".join(parts[: index + 1])
                raise InvalidAction(f"{shown} does not exist; call list_files to see what is there") from None
            return policy.root.joinpath(*parts)
        if stat.S_ISLNK(info.st_mode):
            raise InvalidAction(f"{'/'.join(parts[: index + 1])} is a symbolic link; links are not followed")
    return current


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
    if target.exists() and not target.is_file():
        raise InvalidAction(f"{rel} is a folder, not a file")
    return target, rel


def read_text(target: Path, rel: str) -> str:
    """A file's UTF-8 text, opened without following a final symlink, capped in size."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise InvalidAction(f"{rel} cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidAction(f"{rel} is not a regular file; call list_files on a folder")
        if info.st_size > MAX_READ_BYTES:
            raise InvalidAction(f"{rel} is {info.st_size} bytes, over the {MAX_READ_BYTES} byte read limit")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_READ_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidAction(f"{rel} is not a UTF-8 text file") from None


def write_text(policy: PathPolicy, target: Path, rel: str, content: str) -> None:
    """Create missing folders (re-checking each for links) and replace the file atomically."""
    if not isinstance(content, str):
        raise InvalidAction("content must be a string (the whole new file)")
    if len(content) > MAX_WRITE_CHARS:
        raise InvalidAction(f"content is {len(content)} characters, over the {MAX_WRITE_CHARS} limit")
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    # re-walk after mkdir: nothing on the way may have become a link
    _walk_no_symlinks(policy, PurePosixPath(rel).parts[:-1], must_exist=True)
    fd, tmp = tempfile.mkstemp(prefix=".agent-", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8"))
        os.replace(tmp, target)  # replaces a link itself, never writes through one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def list_tree(policy: PathPolicy, start: Path, rel: str, limit: int = 400) -> list[str]:
    """Files under ``start`` (relative to the root), sandbox files hidden, links shown but not followed."""
    if start.is_file():
        return [rel]
    skip_heavy = not (set(PurePosixPath(rel).parts) & {"dbt_packages", "target"})
    found: list[str] = []
    for folder, dirs, files in os.walk(start, followlinks=False):
        base = Path(folder).relative_to(policy.root)
        kept = []
        for name in sorted(dirs):
            parts = (*base.parts, name)
            if is_hidden(parts) or name == ".git" or (skip_heavy and name in ("dbt_packages", "target", "logs")):
                if not is_hidden(parts) and name != ".git":
                    found.append("/".join(parts) + "/ (not expanded; list it to see inside)")
                continue
            if os.path.islink(os.path.join(folder, name)):
                found.append("/".join(parts) + " -> (symbolic link, not followed)")
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            parts = (*base.parts, name)
            if not is_hidden(parts):
                found.append("/".join(parts))
        if len(found) > limit:
            break
    return found

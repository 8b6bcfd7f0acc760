"""The one rule for host code touching a workspace: resolve every path beneath the root, follow no link.

A sandboxed child (a Python model, a hook, an agent's SQL) can write anything into its workspace,
including symlinks to host files and folders, and swap a folder for a link between two host actions.
Host code that opens ``workspace / "target" / "manifest.json"`` by name follows such links and reads,
writes or deletes outside the workspace. So host code never does that; it goes through this module,
which:

- resolves a workspace-relative path component by component beneath an fd of the workspace root, with
  no symlink and no magic link allowed anywhere on the way: ``openat2`` with ``RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where the kernel has it (Linux 5.6+, probed once), else
  a walk that opens each folder with ``O_DIRECTORY | O_NOFOLLOW`` relative to the previous one;
- reads, copies and hashes regular files only (a FIFO, device or socket is refused, never opened for
  long), up to a byte bound, from the open fd (what was checked is what is read);
- creates and replaces files through the parent folder's fd (temp file + rename inside the workspace);
- removes files and trees through fds as well (every folder opened with ``O_NOFOLLOW`` relative to its
  parent), so deleting a workspace cannot delete a folder it links to;
- walks a tree the same way, never following or opening a link, for listing and disk accounting.

``..``, absolute paths and NUL bytes in a relative path are refused before the disk is touched. The
workspace root itself is the host's own folder (its parents are never writable by a child); only its
last component is opened with ``O_NOFOLLOW``. Every refusal is an ``UnsafePathError`` that names the
path and what was wrong with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dbt_harvest.core.errors import SandboxError

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
#: Default byte bound of a file read into memory (results, manifests, agent files are far smaller).
READ_LIMIT = 256 << 20
_CHUNK = 1 << 20


class UnsafePathError(SandboxError):
    """A workspace path is a link, climbs out, is not the kind of file expected, or is too large."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE)
    number = _SYS_OPENAT2[os.uname().machine]
    fd = _libc().syscall(number, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


@functools.lru_cache(maxsize=1)
def openat2_available() -> bool:
    """Whether this kernel (and any seccomp policy around us) lets us call openat2 with RESOLVE_* flags."""
    if os.uname().machine not in _SYS_OPENAT2 or os.environ.get("HARVEST_NO_OPENAT2"):
        return False
    try:
        root = os.open("/", _DIR_FLAGS)
    except OSError:
        return False
    try:
        os.close(_openat2(root, ".", _DIR_FLAGS, 0))
        return True
    except (OSError, AttributeError):
        return False
    finally:
        os.close(root)


def method() -> str:
    """How paths are resolved here: 'openat2' or 'O_NOFOLLOW walk' (for reports and tests)."""
    return "openat2" if openat2_available() else "O_NOFOLLOW walk"


def parts_of(rel: str | PurePosixPath) -> tuple[str, ...]:
    """The components of a workspace-relative path; refuses absolute paths, '..', NUL and backslashes."""
    text = str(rel)
    if "\x00" in text:
        raise UnsafePathError(f"path {text!r} holds a NUL byte")
    pure = PurePosixPath(text)
    if pure.is_absolute():
        raise UnsafePathError(f"path {text!r} is absolute; workspace paths are relative to the workspace root")
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    if ".." in parts:
        raise UnsafePathError(f"path {text!r} climbs out of the workspace with '..'")
    return parts


def relative_to_root(root: Path, path: Path | str) -> str:
    """``path`` (absolute under ``root``, or already relative) as a root-relative POSIX string (lexical)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        return "/".join(parts_of(str(path)))
    try:
        rel = candidate.relative_to(root)
    except ValueError:
        raise UnsafePathError(f"{candidate} is not inside the workspace {root}") from None
    return "/".join(parts_of(rel.as_posix()))


def open_root(root: Path) -> int:
    """An fd of the workspace root (its last component must not be a link)."""
    try:
        return os.open(root, _DIR_FLAGS | os.O_NOFOLLOW)
    except OSError as exc:
        raise UnsafePathError(f"workspace {root} cannot be opened as a folder ({exc.strerror})") from None


def _explain(rel: str, exc: OSError) -> UnsafePathError:
    if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
        why = "a symbolic link (or a file where a folder should be) is on the way; links are never followed"
    elif exc.errno == errno.ENOENT:
        why = "it does not exist"
    else:
        why = exc.strerror or str(exc)
    error = UnsafePathError(f"workspace path {rel or '.'} cannot be opened safely: {why}")
    error.errno = exc.errno  # type: ignore[attr-defined]
    return error


def open_at(root_fd: int, rel: str, flags: int, mode: int = 0o644) -> int:
    """Open ``rel`` beneath ``root_fd`` with ``flags``, no link followed anywhere; raises OSError."""
    parts = parts_of(rel)
    if not parts:
        return os.dup(root_fd) if flags & os.O_DIRECTORY else os.open(".", flags | os.O_CLOEXEC, dir_fd=root_fd)
    if openat2_available():
        return _openat2(root_fd, "/".join(parts), flags, mode)
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _root(root: Path) -> Iterator[int]:
    fd = open_root(Path(root))
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _parent(root: Path, rel: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """(fd of the parent folder of ``rel``, its last component), the parent opened safely (and made)."""
    parts = parts_of(rel)
    if not parts:
        raise UnsafePathError("the workspace root itself is not a file path")
    with _root(root) as root_fd:
        parent = "/".join(parts[:-1])
        if create and parent:
            make_dirs_at(root_fd, parent)
        try:
            fd = open_at(root_fd, parent, _DIR_FLAGS)
        except OSError as exc:
            raise _explain(parent, exc) from None
        try:
            yield fd, parts[-1]
        finally:
            os.close(fd)


def make_dirs_at(root_fd: int, rel: str) -> None:
    """Create the folders of ``rel`` beneath ``root_fd`` one by one, refusing any link on the way."""
    fd = os.dup(root_fd)
    try:
        for part in parts_of(rel):
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise _explain(rel, exc) from None
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


def make_dirs(root: Path, rel: str | Path) -> None:
    """``mkdir -p`` of a workspace-relative folder, never through a link."""
    with _root(root) as fd:
        make_dirs_at(fd, relative_to_root(Path(root), rel))


@dataclass(frozen=True)
class Entry:
    """What sits at a workspace path, without following it."""

    kind: str  # "file" | "dir" | "link" | "other"
    size: int
    mode: int


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def lstat(root: Path, rel: str | Path) -> Entry | None:
    """What is at ``rel`` (the last component not followed), or None when nothing is (or its folder is
    not reachable without a link)."""
    rel = relative_to_root(Path(root), rel)
    if not rel:
        info = os.lstat(root)
        return Entry(_kind(info.st_mode), info.st_size, info.st_mode)
    try:
        with _parent(root, rel) as (fd, name):
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (UnsafePathError, FileNotFoundError, NotADirectoryError):
        return None
    return Entry(_kind(info.st_mode), info.st_size, info.st_mode)


def is_file(root: Path, rel: str | Path) -> bool:
    """Whether ``rel`` is a regular file reachable without a link."""
    entry = lstat(root, rel)
    return entry is not None and entry.kind == "file"


@contextlib.contextmanager
def open_regular(root: Path, rel: str | Path, *, max_bytes: int = READ_LIMIT) -> Iterator[int]:
    """A read-only fd of the regular file ``rel`` (checked on the fd itself), at most ``max_bytes`` long."""
    rel = relative_to_root(Path(root), rel)
    with _root(root) as root_fd:
        try:
            fd = open_at(root_fd, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as exc:
            raise _explain(rel, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"workspace path {rel} is not a regular file")
        if info.st_size > max_bytes:
            raise UnsafePathError(f"workspace file {rel} is {info.st_size} bytes, over the bound of {max_bytes}")
        yield fd
    finally:
        os.close(fd)


def _read_fd(fd: int, max_bytes: int, rel: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise UnsafePathError(f"workspace file {rel} grew past the bound of {max_bytes} bytes while read")


def read_bytes(root: Path, rel: str | Path, *, max_bytes: int = READ_LIMIT) -> bytes:
    """The bytes of a regular workspace file, opened without following any link, at most ``max_bytes``."""
    name = relative_to_root(Path(root), rel)
    with open_regular(root, name, max_bytes=max_bytes) as fd:
        return _read_fd(fd, max_bytes, name)


def read_text(root: Path, rel: str | Path, *, max_bytes: int = READ_LIMIT, errors: str = "strict") -> str:
    """``read_bytes`` decoded as UTF-8."""
    return read_bytes(root, rel, max_bytes=max_bytes).decode("utf-8", errors)


def copy_out(root: Path, rel: str | Path, dest: Path, *, max_bytes: int) -> str:
    """Copy the regular workspace file ``rel`` to ``dest`` on the host (temp file beside it, fsync,
    rename); returns the sha256 of exactly the bytes copied. ``dest`` must be the host's own path."""
    name = relative_to_root(Path(root), rel)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.tmp")
    digest = hashlib.sha256()
    with open_regular(root, name, max_bytes=max_bytes) as fd:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            total = 0
            while True:
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise UnsafePathError(
                        f"workspace file {name} grew past the bound of {max_bytes} bytes while copied"
                    )
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fsync(out)
        except BaseException:
            os.close(out)
            tmp.unlink(missing_ok=True)
            raise
        os.close(out)
    try:
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return digest.hexdigest()


def sha256(root: Path, rel: str | Path, *, max_bytes: int = READ_LIMIT) -> str:
    """Hex sha256 of a regular workspace file, read from the fd that was checked."""
    name = relative_to_root(Path(root), rel)
    digest = hashlib.sha256()
    with open_regular(root, name, max_bytes=max_bytes) as fd:
        total = 0
        while chunk := os.read(fd, _CHUNK):
            total += len(chunk)
            if total > max_bytes:
                raise UnsafePathError(f"workspace file {name} grew past the bound of {max_bytes} bytes while hashed")
            digest.update(chunk)
    return digest.hexdigest()


def open_file(root: Path, rel: str | Path, flags: int, mode: int = 0o644, *, make_parents: bool = False) -> int:
    """An fd of ``rel`` opened with ``flags`` (e.g. a log opened for writing), no link followed; the
    caller closes it. With ``O_CREAT`` the file may be new; whatever exists must be a regular file."""
    name = relative_to_root(Path(root), rel)
    with _root(root) as root_fd:
        parent = "/".join(parts_of(name)[:-1])
        if make_parents and parent:
            make_dirs_at(root_fd, parent)
        try:
            fd = open_at(root_fd, name, flags | os.O_NONBLOCK | os.O_NOCTTY, mode)
        except OSError as exc:
            raise _explain(name, exc) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePathError(f"workspace path {name} is not a regular file")
    if flags & os.O_NONBLOCK == 0:
        os.set_blocking(fd, True)
    return fd


def write_bytes(root: Path, rel: str | Path, data: bytes, *, mode: int = 0o644, make_parents: bool = True) -> None:
    """Replace (or create) ``rel`` with ``data``: a temp file in the same folder, fsync, rename, all
    through the folder's fd (a link at ``rel`` is replaced, never written through)."""
    name = relative_to_root(Path(root), rel)
    with _parent(root, name, create=make_parents) as (fd, last):
        tmp = f".{last}.{secrets.token_hex(6)}.harvest-tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            os.fsync(out)
            os.close(out)
            out = -1
            if stat.S_ISDIR(_lstat_mode(fd, last)):
                raise UnsafePathError(f"workspace path {name} is a folder, not a file")
            os.replace(tmp, last, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            if out >= 0:
                os.close(out)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise


def write_text(root: Path, rel: str | Path, text: str, **kwargs: object) -> None:
    """``write_bytes`` of UTF-8 text."""
    write_bytes(root, rel, text.encode("utf-8"), **kwargs)  # type: ignore[arg-type]


def _lstat_mode(dir_fd: int, name: str) -> int:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return 0


def remove(root: Path, rel: str | Path) -> bool:
    """Remove ``rel`` (a file, a link itself, or a whole folder by fd); True when something was removed.
    A folder of ``rel`` that is a link is refused, never followed."""
    name = relative_to_root(Path(root), rel)
    try:
        with _parent(root, name) as (fd, last):
            return _remove_at(fd, last)
    except UnsafePathError as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            return False
        raise


def _remove_at(dir_fd: int, name: str) -> bool:
    mode = _lstat_mode(dir_fd, name)
    if not mode:
        return False
    if stat.S_ISDIR(mode):
        _rmtree_at(dir_fd, name)
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


def _open_subdir(dir_fd: int, name: str) -> int:
    return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)


def _rmtree_at(dir_fd: int, name: str) -> None:
    """Empty and remove the folder ``name`` of ``dir_fd``: every level opened with O_NOFOLLOW, so a folder
    swapped for a link meanwhile fails to open instead of being followed."""
    fd = _open_subdir(dir_fd, name)
    try:
        with os.scandir(fd) as entries:
            children = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for child, is_dir in children:
            try:
                if is_dir:
                    _rmtree_at(fd, child)
                else:
                    os.unlink(child, dir_fd=fd)
            except FileNotFoundError:
                pass
            except (NotADirectoryError, OSError) as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                os.unlink(child, dir_fd=fd)  # it became a link or a file: remove that, do not follow it
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def rmtree(path: Path) -> None:
    """Remove the folder ``path`` (a workspace, or a folder holding one) and everything in it, by fd:
    a link inside is removed, never followed. ``path``'s parent is the host's own; missing is fine."""
    path = Path(path)
    try:
        parent = os.open(path.parent, _DIR_FLAGS)
    except FileNotFoundError:
        return
    try:
        _remove_at(parent, path.name)
    finally:
        os.close(parent)


def walk(
    root: Path, rel: str | Path = "", descend: Callable[[str, os.stat_result], bool] | None = None
) -> Iterator[tuple[str, os.stat_result]]:
    """(root-relative path, lstat) of everything under ``rel``, by fd, links reported but never followed
    or opened. Folders come before their contents, names in sorted order; ``descend(path, stat)`` may
    keep the walk out of a folder; a folder swapped for a link during the walk is skipped."""
    start = relative_to_root(Path(root), rel) if str(rel) not in ("", ".") else ""
    with _root(root) as root_fd:
        try:
            top = open_at(root_fd, start, _DIR_FLAGS) if start else os.dup(root_fd)
        except OSError as exc:
            raise _explain(start, exc) from None
    try:
        yield from _walk_fd(top, start, descend)
    finally:
        os.close(top)


def _walk_fd(
    fd: int, prefix: str, descend: Callable[[str, os.stat_result], bool] | None
) -> Iterator[tuple[str, os.stat_result]]:
    with os.scandir(fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        rel = f"{prefix}/{name}" if prefix else name
        yield rel, info
        if stat.S_ISDIR(info.st_mode) and (descend is None or descend(rel, info)):
            try:
                sub = _open_subdir(fd, name)
            except OSError:
                continue
            try:
                if os.fstat(sub).st_ino == info.st_ino:
                    yield from _walk_fd(sub, rel, descend)
            finally:
                os.close(sub)


def readlink(root: Path, rel: str | Path) -> str:
    """The target text of the symlink at ``rel`` (read through its folder's fd, never followed)."""
    name = relative_to_root(Path(root), rel)
    with _parent(root, name) as (fd, last):
        try:
            return os.readlink(last, dir_fd=fd)
        except OSError as exc:
            raise _explain(name, exc) from None


def symlink(root: Path, rel: str | Path, target: str) -> None:
    """Create the symlink ``rel`` -> ``target`` (the link itself; nothing is followed)."""
    name = relative_to_root(Path(root), rel)
    with _parent(root, name, create=True) as (fd, last):
        os.symlink(target, last, dir_fd=fd)


def disk_usage(root: Path) -> int:
    """Bytes of disk the tree under ``root`` occupies (allocated blocks), walked by fd without links."""
    try:
        info = os.lstat(root)
    except OSError:
        return 0
    total = info.st_blocks * 512
    try:
        for _, entry in walk(root):
            total += entry.st_blocks * 512
    except (UnsafePathError, OSError):
        pass
    return total


__all__ = [
    "Entry",
    "UnsafePathError",
    "copy_out",
    "disk_usage",
    "is_file",
    "lstat",
    "make_dirs",
    "method",
    "open_file",
    "open_regular",
    "openat2_available",
    "parts_of",
    "read_bytes",
    "read_text",
    "readlink",
    "relative_to_root",
    "remove",
    "rmtree",
    "sha256",
    "symlink",
    "walk",
    "write_bytes",
    "write_text",
]

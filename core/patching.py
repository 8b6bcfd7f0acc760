"""Unified diffs between file versions: make one, apply one strictly (no fuzz), to text or a tree.

Tasks carry their broken, fix and wrong-repair edits as unified diffs (what people and SWE-style
datasets expect). A file a patch creates or deletes (a completion task's missing model) is written the
way git writes it: ``--- /dev/null`` or ``+++ /dev/null``. Application is exact: every context and removed line must match, otherwise a
PatchError says which file and hunk, so a patch never half-applies to a tree.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.core import atomic
from dbt_harvest.core.errors import HarvestError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_EOL = "\\ No newline at end of file"
DEV_NULL = "/dev/null"


class PatchError(HarvestError):
    """A patch is malformed or does not apply exactly."""


@dataclass(frozen=True)
class FilePatch:
    path: str
    hunks: tuple[tuple[int, tuple[str, ...]], ...]  # (old start line, lines with ' ', '-', '+' prefixes)
    created: bool = False  # ``--- /dev/null``: the file does not exist before
    deleted: bool = False  # ``+++ /dev/null``: the file does not exist after


def make_patch(path: str, old: str | None, new: str | None, context: int = 3) -> str:
    """A git-style unified diff of one file (``a/path`` -> ``b/path``); '' when nothing changed.

    ``old=None`` creates the file (``--- /dev/null``), ``new=None`` deletes it (``+++ /dev/null``)."""
    if old == new:
        return ""
    lines = difflib.unified_diff(
        _split(old or ""),
        _split(new or ""),
        fromfile=DEV_NULL if old is None else f"a/{path}",
        tofile=DEV_NULL if new is None else f"b/{path}",
        n=context,
        lineterm="",
    )
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line[:-1])
        else:
            out.append(line)
            if line[:1] in " -+" and not line.startswith(("---", "+++")):
                out.append(_NO_EOL)
    return "\n".join(out) + "\n"


def _split(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def parse_patch(patch: str) -> tuple[FilePatch, ...]:
    """Parse a (possibly multi-file) unified diff."""
    files: list[FilePatch] = []
    # lines end at "\n" alone, as git reads them: a CRLF file's patch lines keep their "\r" (splitlines
    # took "\r\n" for one break and dropped it, so such a patch never applied to its own file)
    lines = patch.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError("malformed patch: '---' header without '+++'")
        old_path = lines[i][4:].split("\t")[0]
        path = lines[i + 1][4:].split("\t")[0]
        created, deleted = old_path == DEV_NULL, path == DEV_NULL
        if created and deleted:
            raise PatchError("malformed patch: both sides are /dev/null")
        if deleted:
            path = old_path[2:] if old_path.startswith("a/") else old_path
        else:
            path = path[2:] if path.startswith("b/") else path
        _check_path(path)
        i += 2
        hunks: list[tuple[int, tuple[str, ...]]] = []
        while i < len(lines) and lines[i].startswith("@@"):
            match = _HUNK.match(lines[i])
            if not match:
                raise PatchError(f"malformed hunk header in {path}: {lines[i]!r}")
            old_len = int(match[2]) if match[2] is not None else 1
            new_len = int(match[4]) if match[4] is not None else 1
            start = int(match[1])
            i += 1
            body: list[str] = []
            seen_old = seen_new = 0
            while i < len(lines) and (seen_old < old_len or seen_new < new_len or lines[i] == _NO_EOL):
                line = lines[i]
                if line == _NO_EOL:
                    if not body:
                        raise PatchError(f"malformed hunk in {path}")
                    body[-1] = body[-1] + _NO_EOL
                elif line[:1] in (" ", "-", "+"):
                    body.append(line)
                    seen_old += line[0] in " -"
                    seen_new += line[0] in " +"
                elif line == "":
                    body.append(" ")
                    seen_old += 1
                    seen_new += 1
                else:
                    raise PatchError(f"malformed hunk line in {path}: {line!r}")
                i += 1
            if seen_old != old_len or seen_new != new_len:
                raise PatchError(f"truncated hunk in {path}")
            hunks.append((start, tuple(body)))
        if deleted and any(line[0] != "-" for _, body in hunks for line in body):
            raise PatchError(f"malformed patch: the deletion of {path} keeps or adds lines")
        if created and any(line[0] != "+" for _, body in hunks for line in body):
            raise PatchError(f"malformed patch: the creation of {path} keeps or removes lines")
        files.append(FilePatch(path, tuple(hunks), created=created, deleted=deleted))
    if not files:
        raise PatchError("empty or malformed patch: no file headers")
    return tuple(files)


def _check_path(path: str) -> None:
    parts = Path(path).parts
    if "\x00" in path or "\\" in path:
        raise PatchError(f"patch path {path!r} holds a NUL byte or a backslash")
    if path.startswith("/") or ".." in parts or not parts:
        raise PatchError(f"patch path {path!r} leaves the project")


def apply_to_text(text: str, file_patch: FilePatch) -> str:
    """Apply one file's hunks to its text exactly; raise PatchError on any mismatch."""
    lines = _split(text)
    out: list[str] = []
    cursor = 0
    for start, body in file_patch.hunks:
        index = max(start - 1, 0) if any(line[0] in " -" for line in body) else start
        if index < cursor or index > len(lines):
            raise PatchError(f"{file_patch.path}: hunk at line {start} does not apply")
        out.extend(lines[cursor:index])
        cursor = index
        for line in body:
            content, no_eol = (line[1 : -len(_NO_EOL)], True) if line.endswith(_NO_EOL) else (line[1:], False)
            full = content if no_eol else content + "\n"
            if line[0] in " -":
                if cursor >= len(lines) or lines[cursor] != full:
                    raise PatchError(f"{file_patch.path}: hunk at line {start} does not match the file")
                cursor += 1
                if line[0] == " ":
                    out.append(full)
            else:
                out.append(full)
    out.extend(lines[cursor:])
    return "".join(out)


def apply_patch(root: Path, patch: str) -> tuple[str, ...]:
    """Apply a patch to files under ``root``; all files are checked before any is written. A file the
    patch creates must not exist; one it deletes must hold exactly the removed lines, and is removed."""
    results: dict[Path, str | None] = {}
    for file_patch in parse_patch(patch):
        target = (root / file_patch.path).resolve()
        if not target.is_relative_to(root.resolve()):
            raise PatchError(f"patch path {file_patch.path!r} leaves the project")
        if target.exists() and not target.is_file():
            raise PatchError(f"patch path {file_patch.path!r} is a folder, not a file")
        if file_patch.created and target.exists():
            raise PatchError(f"patch creates {file_patch.path!r}, which already exists")
        if file_patch.deleted and not target.is_file():
            raise PatchError(f"patch deletes {file_patch.path!r}, which does not exist")
        try:
            # the bytes as they are: a patch made from a CRLF file (safe_fs reads bytes) carries its "\r"s
            old = target.read_bytes().decode("utf-8") if target.is_file() else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise PatchError(f"patch path {file_patch.path!r} cannot be read as text ({exc})") from None
        try:
            new = apply_to_text(old, file_patch)
        except PatchError:
            if "\r" not in old:
                raise
            # a patch written against the file's newline-translated text, as this function once read it
            new = apply_to_text(old.replace("\r\n", "\n").replace("\r", "\n"), file_patch)
        if file_patch.deleted and new:
            raise PatchError(f"{file_patch.path}: the deletion does not remove the whole file")
        results[target] = None if file_patch.deleted else new
    for target, text in results.items():
        if text is None:
            target.unlink()
        else:
            atomic.write_text(target, text)
    return tuple(str(p.relative_to(root.resolve())) for p in results)

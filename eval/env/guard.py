"""The agent's write policy, held for every route: after a dbt or SQL action the project is what the agent wrote.

``write_file`` is the only way the policy lets an agent change project files (model, macro, seed and
test folders; SQL, YAML, CSV, Markdown). But an agent's SQL runs: a model with a ``pre_hook`` running
``COPY … TO 'models/x.py'`` writes a byte-exact Python model that the next ``dbt build`` would run, and
the project's own Python models can write anything into the workspace. The sandbox stops both from
reaching the host; this guard stops them from changing the project. It keeps the expected state of the
workspace (every file's hash, every folder, every link the template shipped) and a host-only copy of the
expected files (``shadow``, beside the workspace, never bound into a sandbox). After each action that
runs dbt or SQL, ``enforce`` walks the workspace (``safe_fs``, no link followed) and compares:

- outside dbt's output places (the project's ``target-path`` and ``log-path``, the build database, the
  grader's capture, the sandbox's own ``.harvest*`` files) any file or folder created, changed or
  removed is a violation;
- anywhere, a symbolic link that was not in the template is a violation.

Violations are undone (new things removed, changed or removed files put back from the shadow) and the
action fails with a message naming them. The DuckDB lockdown of agent builds (no folder writable, see
``tools.DUCKDB_SCOPE``) already stops SQL from creating files; this is the check that holds whatever the
route.
"""

from __future__ import annotations

import hashlib
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from dbt_harvest.eval.env.errors import EnvError
from dbt_harvest.harvester.sandbox import safe_fs

#: Files of a workspace the sandbox and the grader own (hidden from the agent, rewritten by every run).
SANDBOX_PREFIX = ".harvest"
CAPTURE_FILES = ("gold.duckdb", "gold.duckdb.wal")
#: Per-file bound of what the guard hashes and keeps (project files are far smaller; a larger one is
#: a violation in itself when it appears).
MAX_FILE_BYTES = 256 << 20
MAX_LISTED = 12


@dataclass(frozen=True)
class Expected:
    """What should be at one path: a folder, a file with this sha256, or a link with this target."""

    kind: str  # "dir" | "file" | "link"
    value: str = ""


@dataclass(frozen=True)
class Change:
    """One difference between the workspace and what the agent wrote."""

    path: str
    what: str  # "created", "changed", "removed", "symbolic link"

    def describe(self) -> str:
        return f"{self.what} {self.path}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _output_paths(root: Path, project_dir: str) -> tuple[str, ...]:
    """The project's target and log folders (root-relative), as its dbt_project.yml names them."""
    import yaml

    prefix = "" if project_dir in ("", ".") else project_dir.strip("/") + "/"
    config: Any = {}
    try:
        config = yaml.safe_load(safe_fs.read_text(root, f"{prefix}dbt_project.yml", max_bytes=1 << 20)) or {}
    except (safe_fs.UnsafePathError, yaml.YAMLError, UnicodeDecodeError):
        config = {}
    found: list[str] = []
    for key, default in (("target-path", "target"), ("log-path", "logs")):
        value = config.get(key, default) if isinstance(config, dict) else default
        try:
            rel = "/".join(safe_fs.parts_of(f"{prefix}{value}")) if isinstance(value, str) else ""
        except safe_fs.UnsafePathError:
            rel = ""
        found.append(rel or f"{prefix}{default}")
    return tuple(dict.fromkeys(found))


class WorkspaceGuard:
    """The expected state of one episode's workspace, and the check that keeps the workspace there."""

    def __init__(self, root: Path, project_dir: str, db_file: str, shadow: Path) -> None:
        self.root = Path(root)
        self.shadow = Path(shadow)
        self.outputs = _output_paths(self.root, project_dir)
        self.db_files = (db_file, db_file + ".wal", *CAPTURE_FILES)
        self.expected: dict[str, Expected] = {}

    # -- what counts -------------------------------------------------------------------------------
    def is_output(self, rel: str) -> bool:
        """dbt's and the sandbox's own places: their content may change during a build."""
        parts = PurePosixPath(rel).parts
        if not parts:
            return False
        if parts[0].startswith(SANDBOX_PREFIX) or (len(parts) == 1 and rel in self.db_files):
            return True
        return any(rel == out or rel.startswith(out + "/") for out in self.outputs)

    # -- the expected state --------------------------------------------------------------------------
    @classmethod
    def take(cls, root: Path, project_dir: str, db_file: str = "build.duckdb") -> WorkspaceGuard:
        """Record the workspace as it is now (right after materializing) as the expected state."""
        root = Path(root)
        guard = cls(root, project_dir, db_file, root.with_name(f".{root.name}.expected"))
        safe_fs.rmtree(guard.shadow)
        guard.shadow.mkdir(parents=True)
        for rel, info in guard._entries():
            if stat.S_ISLNK(info.st_mode):
                guard.expected[rel] = Expected("link", safe_fs.readlink(root, rel))
            elif stat.S_ISDIR(info.st_mode):
                guard.expected[rel] = Expected("dir")
            elif stat.S_ISREG(info.st_mode):
                try:
                    digest = safe_fs.copy_out(root, rel, guard.shadow / rel, max_bytes=MAX_FILE_BYTES)
                except safe_fs.UnsafePathError as exc:
                    raise EnvError(f"the workspace cannot be guarded: {exc}") from None
                guard.expected[rel] = Expected("file", digest)
        return guard

    def record_write(self, rel: str, data: bytes) -> None:
        """``write_file`` changed ``rel``: it (and any folder it created) is now expected."""
        parts = PurePosixPath(rel).parts
        for index in range(1, len(parts)):
            self.expected.setdefault("/".join(parts[:index]), Expected("dir"))
        self.expected[rel] = Expected("file", _digest(data))
        target = self.shadow / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def _entries(self) -> list[tuple[str, Any]]:
        """Everything outside the output places, and every link anywhere (folders of outputs are walked
        only to find links)."""
        found = []
        for rel, info in safe_fs.walk(self.root):
            if not self.is_output(rel) or stat.S_ISLNK(info.st_mode):
                found.append((rel, info))
        return found

    # -- the check -----------------------------------------------------------------------------------
    def changes(self) -> list[Change]:
        """How the workspace differs from the expected state now."""
        seen: set[str] = set()
        changes: list[Change] = []
        for rel, info in self._entries():
            seen.add(rel)
            want = self.expected.get(rel)
            if stat.S_ISLNK(info.st_mode):
                if want is None or want.kind != "link" or safe_fs.readlink(self.root, rel) != want.value:
                    changes.append(Change(rel, "symbolic link"))
            elif want is None:
                changes.append(Change(rel, "created"))
            elif stat.S_ISDIR(info.st_mode):
                if want.kind != "dir":
                    changes.append(Change(rel, "changed"))
            elif not stat.S_ISREG(info.st_mode) or want.kind != "file" or info.st_size > MAX_FILE_BYTES:
                changes.append(Change(rel, "changed"))
            else:
                try:
                    same = safe_fs.sha256(self.root, rel, max_bytes=MAX_FILE_BYTES) == want.value
                except safe_fs.UnsafePathError:
                    same = False
                if not same:
                    changes.append(Change(rel, "changed"))
        for rel in self.expected:
            if rel not in seen and not self.is_output(rel):
                changes.append(Change(rel, "removed"))
        return changes

    def undo(self, changes: list[Change]) -> None:
        """Put the workspace back: remove what is not expected, restore what is, top folders first."""
        removed: list[str] = []
        for change in sorted(changes, key=lambda c: (len(PurePosixPath(c.path).parts), c.path)):
            if any(change.path.startswith(done + "/") for done in removed):
                continue
            if change.what != "removed":
                safe_fs.remove(self.root, change.path)
                removed.append(change.path)
        for rel in sorted(self.expected, key=lambda r: (len(PurePosixPath(r).parts), r)):
            if self.is_output(rel):
                continue
            want = self.expected[rel]
            entry = safe_fs.lstat(self.root, rel)
            if want.kind == "dir" and entry is None:
                safe_fs.make_dirs(self.root, rel)
            elif want.kind == "link" and entry is None:
                safe_fs.symlink(self.root, rel, want.value)
            elif want.kind == "file" and entry is None:
                safe_fs.write_bytes(self.root, rel, (self.shadow / rel).read_bytes())

    def enforce(self, action: str) -> str:
        """'' when the workspace is as the agent wrote it; else undo the changes and say what they were."""
        changes = self.changes()
        if not changes:
            return ""
        self.undo(changes)
        shown = ", ".join(change.describe() for change in changes[:MAX_LISTED])
        more = f" and {len(changes) - MAX_LISTED} more" if len(changes) > MAX_LISTED else ""
        return (
            f"the {action} action changed project files, which only write_file may do ({shown}{more}); "
            "the change was undone"
        )

    def close(self) -> None:
        """Remove the shadow copy."""
        safe_fs.rmtree(self.shadow)


__all__ = ["Change", "Expected", "WorkspaceGuard"]

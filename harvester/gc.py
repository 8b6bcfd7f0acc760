"""What killed runs leave under HARVEST_HOME, found by name and age, for `harvest gc`.

Every write that can be interrupted stages its work beside the destination and renames it into place,
so a run killed halfway leaves only recognisable leftovers, never a half-written artefact:

- ``builds/<repo>/<run>/`` whose ``source/`` is still there: a `harvest add` that did not finish (a
  finished add removes ``source/`` and keeps only the build logs and the first ``target/``);
- ``templates/<pin>.old`` (a template being replaced) and ``templates/.<pin>.*`` (one being made);
- hidden staging folders anywhere under HARVEST_HOME: ``.<name>.building-*`` and ``.<name>.old-*``
  (dataset builds), ``.<name>.partial-*`` (exports), ``.<name>.*.tmp`` / ``.<name>.*.old`` (mirrors,
  the example);
- ``tmp/*``: scratch of mint shards and atomic writes.

Only entries whose last modification is older than ``min_age_s`` are reported, so a run still working
(whose staging folders are fresh) is left alone. Nothing is removed here unless ``remove`` is called.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

#: hidden staging names (the mkdtemp prefixes/suffixes of the modules that write them)
_STAGING = (".*.building-*", ".*.old-*", ".*.partial-*", ".*.tmp", ".*.old")
#: how deep under HARVEST_HOME staging folders are looked for (datasets and exports are written by users'
#: --out, usually shallow; deeper trees such as builds/ are large and have their own rule)
_MAX_DEPTH = 3


@dataclass(frozen=True)
class Leftover:
    """One thing a killed run left: where, why it is a leftover, its size and age."""

    path: Path
    kind: str
    bytes: int
    age_s: float

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "kind": self.kind, "bytes": self.bytes, "age_s": round(self.age_s)}


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                pass
    return total


def _newest_mtime(path: Path) -> float:
    """The newest modification time in ``path`` (a run still writing into a folder keeps it young)."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                try:
                    newest = max(newest, (Path(root) / name).lstat().st_mtime)
                except OSError:
                    pass
    return newest


def find_leftovers(home: Path, min_age_s: float = 2 * 3600.0, now: float | None = None) -> list[Leftover]:
    """Leftovers of killed runs under ``home`` older than ``min_age_s``, sorted by path."""
    now = time.time() if now is None else now
    found: dict[Path, str] = {}
    builds = home / "builds"
    if builds.is_dir():
        for repo in builds.iterdir():
            if repo.is_dir():
                for run in repo.iterdir():
                    if run.is_dir() and (run / "source").exists():
                        found[run] = "unfinished `harvest add` build"
    templates = home / "templates"
    if templates.is_dir():
        for entry in templates.iterdir():
            if entry.name.endswith(".old"):
                found[entry] = "replaced template"
            elif entry.name.startswith(".") and entry.is_dir():
                found[entry] = "template being made"
    tmp = home / "tmp"
    if tmp.is_dir():
        for entry in tmp.iterdir():
            found[entry] = "scratch"
    for root, dirs, _files in os.walk(home):
        depth = len(Path(root).relative_to(home).parts)
        for name in list(dirs):
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in _STAGING):
                found.setdefault(Path(root) / name, "staging folder of an interrupted write")
                dirs.remove(name)
        if depth >= _MAX_DEPTH - 1 or Path(root) in (builds, tmp):
            dirs[:] = []
    out = []
    for path, kind in sorted(found.items()):
        try:
            age = now - _newest_mtime(path)
        except OSError:
            continue
        if age >= min_age_s:
            out.append(Leftover(path, kind, _size(path), age))
    return out


def remove(leftovers: list[Leftover]) -> int:
    """Remove the leftovers; return the bytes freed."""
    freed = 0
    for item in leftovers:
        if item.path.is_dir() and not item.path.is_symlink():
            shutil.rmtree(item.path, ignore_errors=True)
        else:
            item.path.unlink(missing_ok=True)
        freed += item.bytes
    return freed

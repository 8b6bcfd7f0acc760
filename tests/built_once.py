"""Build an expensive session fixture once per test run, across xdist workers, and hand each worker a copy.

Under ``pytest -n 2`` every worker is its own session, so a session fixture such as the harvested example
(a sandboxed ``harvest add``: about 45 s of real builds) was built once per worker. Here the first worker
to ask builds it into a folder shared by the run (under a file lock; the other worker waits for it or,
usually, finds it done), and every worker then works on a private copy of that folder: no worker sees
another's writes, exactly as when each built its own.

The built value is pickled beside the folder; the copy's value is the same with every path (and every
string holding a path) under the shared folder moved to the private one. Files inside the folder that
name the shared folder (a git mirror's origin, say) keep reading the shared, never-written build.
A build that died half-way leaves no ``done`` mark and is started again from an empty folder.
"""

from __future__ import annotations

import copy
import dataclasses
import fcntl
import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

_DONE, _VALUE = ".built-once-done", ".built-once-value.pickle"


def rebase(value: Any, old: Path, new: Path) -> Any:
    """``value`` with every :class:`Path` under ``old`` (and every ``old`` inside a string) moved to ``new``;
    dataclasses (frozen ones too), lists, tuples and dicts are walked, anything else is returned as is."""
    if isinstance(value, Path):
        return new / value.relative_to(old) if value.is_relative_to(old) else value
    if isinstance(value, str):
        return value.replace(str(old), str(new))
    if isinstance(value, list):
        return [rebase(v, old, new) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(rebase(v, old, new) for v in value)
    if isinstance(value, dict):
        return {rebase(k, old, new): rebase(v, old, new) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        moved = copy.copy(value)
        for field in dataclasses.fields(value):
            object.__setattr__(moved, field.name, rebase(getattr(value, field.name), old, new))
        return moved
    return value


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]) -> T:
    """``build(folder)`` run once per test run; the calling worker gets a private copy of the folder and of
    the value. Without xdist it simply builds into a fresh folder of this session."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build(factory.mktemp(name))
    shared = factory.getbasetemp().parent / f"built-once-{name}"
    with _locked(shared.with_name(shared.name + ".lock")):
        if not (shared / _DONE).exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            value = build(shared)
            (shared / _VALUE).write_bytes(pickle.dumps(value))
            (shared / _DONE).touch()
    private = factory.mktemp(name)
    shutil.copytree(shared, private, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(_DONE, _VALUE))
    return rebase(pickle.loads((shared / _VALUE).read_bytes()), shared, private)

"""The suite's own machinery: longest modules first (tests/scheduling.py), fixtures built once (tests/built_once.py)."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from tests.built_once import built_once, rebase
from tests.scheduling import longest_first


def test_modules_run_longest_first_unknown_at_the_median_and_each_module_keeps_its_order() -> None:
    ids = [
        "tests/a.py::t1",
        "tests/a.py::t2",
        "tests/b.py::t1",
        "tests/new.py::t1",
        "tests/c.py::t1",
        "tests/c.py::t2[x]",
        "tests/c.py::t2[y]",
    ]
    seconds = {"tests/a.py": 5.0, "tests/b.py": 30.0, "tests/c.py": 100.0, "tests/gone.py": 1.0}
    ordered = [ids[i] for i in longest_first(ids, seconds)]
    # median of (5, 30, 100, 1) is 17.5: the new module goes between b and a
    assert ordered == [
        "tests/c.py::t1",
        "tests/c.py::t2[x]",
        "tests/c.py::t2[y]",
        "tests/b.py::t1",
        "tests/new.py::t1",
        "tests/a.py::t1",
        "tests/a.py::t2",
    ]
    assert longest_first(ids, {}) == list(range(len(ids)))  # nothing measured: collection order


@dataclasses.dataclass(frozen=True)
class _Inner:
    where: Path
    spec: str


@dataclasses.dataclass(frozen=True)
class _Outer:
    home: Path
    inner: _Inner
    files: list[Path]
    named: dict[str, Path]
    elsewhere: Path
    count: int


def test_rebase_moves_every_path_under_the_old_root_and_nothing_else(tmp_path: Path) -> None:
    old, new = tmp_path / "shared", tmp_path / "private"
    value = _Outer(
        home=old / "home",
        inner=_Inner(old / "repo", f"{old / 'repo'}@abc"),
        files=[old / "a", old / "b"],
        named={"x": old / "x"},
        elsewhere=tmp_path / "other",
        count=3,
    )
    moved = rebase(value, old, new)
    assert moved == _Outer(
        home=new / "home",
        inner=_Inner(new / "repo", f"{new / 'repo'}@abc"),
        files=[new / "a", new / "b"],
        named={"x": new / "x"},
        elsewhere=tmp_path / "other",
        count=3,
    )
    assert value.home == old / "home"  # the original is untouched


def test_built_once_builds_once_across_workers_and_each_gets_a_private_copy(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw9")  # as under xdist: the build folder is shared by the run
    builds: list[Path] = []

    def build(root: Path) -> _Inner:
        builds.append(root)
        (root / "data.txt").write_text("built")
        return _Inner(root / "data.txt", f"{root}/data.txt")

    name = f"probe-{uuid.uuid4().hex[:8]}"
    first = built_once(tmp_path_factory, name, build)
    second = built_once(tmp_path_factory, name, build)
    assert len(builds) == 1, builds
    assert first.where != second.where and first.where != builds[0] / "data.txt"
    assert first.where.read_text() == second.where.read_text() == "built"
    assert first.spec == f"{first.where.parent}/data.txt"
    first.where.write_text("changed by one worker")
    assert second.where.read_text() == "built" and (builds[0] / "data.txt").read_text() == "built"
    assert sorted(p.name for p in first.where.parent.iterdir()) == ["data.txt"]  # no marks copied


def test_a_build_that_died_is_started_again_from_an_empty_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw9")
    name = f"probe-{uuid.uuid4().hex[:8]}"

    def dies(root: Path) -> None:
        (root / "half.txt").write_text("half")
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError):
        built_once(tmp_path_factory, name, dies)
    again = built_once(tmp_path_factory, name, lambda root: sorted(p.name for p in root.iterdir()))
    assert again == []

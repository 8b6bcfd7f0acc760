"""The distribution: one import root, every file of every layer shipped, the console script pointing in.

The wheel is built here from a copy of the source files (what an sdist holds: pyproject.toml, the
README and ``src/dbt_harvest/`` with its layer links followed), offline with the setuptools already installed, and
read back as a zip. A layer file the mapping misses (a new data folder, a SQL macro, a JSON table) is named
by the test instead of surfacing as a missing file for users of a released package. CI additionally
installs the wheel into a fresh virtualenv and runs the CLI from outside the checkout (``.ci/wheel``).
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dbt_harvest import LAYERS

ROOT = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = "dbt_harvest"
_JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".harvest*")


def _source_files() -> list[str]:
    """Every file of the root package and the layers, as the wheel names it (``core/x.py`` ->
    ``dbt_harvest/core/x.py``, ``src/dbt_harvest/__init__.py`` -> ``dbt_harvest/__init__.py``)."""
    return sorted(
        str(path.relative_to(folder.parent if folder.name == ROOT_PACKAGE else ROOT))
        if folder.name == ROOT_PACKAGE
        else f"{ROOT_PACKAGE}/{path.relative_to(ROOT)}"
        for folder in (ROOT / "src" / ROOT_PACKAGE, *(ROOT / layer for layer in LAYERS))
        for path in folder.rglob("*")
        if path.is_file() and not {"__pycache__"} & set(path.parts) and path.suffix != ".pyc"
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    tree = tmp_path_factory.mktemp("sdist-tree")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=_JUNK)  # follows the layer links, as an sdist does
    out = tmp_path_factory.mktemp("wheelhouse")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("dbt_harvest-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_has_one_top_level_package(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {ROOT_PACKAGE}


def test_every_layer_file_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    shipped = set(wheel.namelist())
    missing = [name for name in _source_files() if name not in shipped]
    assert not missing, f"{len(missing)} files not shipped, e.g. {missing[:10]}"
    assert f"{ROOT_PACKAGE}/harvester/example/projects/shop_analytics/dbt_project.yml" in shipped


def test_the_console_script_points_into_the_root_package(wheel: zipfile.ZipFile) -> None:
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel.read(entry_points).decode())
    assert dict(parser["console_scripts"]) == {"harvest": f"{ROOT_PACKAGE}.cli:run"}

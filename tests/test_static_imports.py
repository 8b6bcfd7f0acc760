"""Static tools read the one import root from the checkout itself, with no import hook and no install.

``dbt_harvest.<layer>`` is a committed symbolic link in ``src/dbt_harvest/`` (docs/DESIGN.md, "Layers"), so
mypy and pyright resolve ``from dbt_harvest.core.atomic import sha256_file`` to the function's real
signature. Before the links, setup.py mapped the layers at install time and both tools saw ``Any`` (or a
missing module) for every such import. Each check runs the tool with the site's packages out of reach, so
only the checkout's own files can answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = "from dbt_harvest.core.atomic import sha256_file\nreveal_type(sha256_file)\n"


def test_every_layer_is_a_link_to_its_folder() -> None:
    from dbt_harvest import LAYERS

    for layer in LAYERS:
        link = ROOT / "src" / "dbt_harvest" / layer
        assert link.is_symlink(), f"src/dbt_harvest/{layer} is not a link"
        assert os.readlink(link) == f"../../{layer}", f"src/dbt_harvest/{layer} -> {os.readlink(link)}"


def test_mypy_resolves_an_import_to_its_real_signature(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-site-packages",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(probe),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert 'Revealed type is "def (path: pathlib.Path) -> builtins.str"' in done.stdout, done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("node") is None, reason="pyright runs on Node.js, which this machine lacks")
def test_pyright_resolves_an_import_to_its_real_signature(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    # the checkout's configuration, pointed at the probe; no interpreter, so no site-packages to fall back on
    (tmp_path / "pyrightconfig.json").write_text(
        json.dumps(
            {"extraPaths": [str(ROOT / "src")], "pythonVersion": "3.11", "venvPath": str(tmp_path), "venv": "none"}
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "probe.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(done.stdout)
    said = [d["message"] for d in report["generalDiagnostics"]]
    assert 'Type of "sha256_file" is "(path: Path) -> str"' in said, said

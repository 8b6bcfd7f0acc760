"""A repository of 100,000 files: `harvest add` refuses it with one line, before building anything,
and leaves no pin and no half-exported tree."""

from __future__ import annotations

from pathlib import Path

import pygit2
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.harvester.gitstore import MAX_FILES


def _huge_repo(path: Path, files: int = 100_000, per_dir: int = 1000) -> str:
    repo = pygit2.init_repository(str(path), bare=False, initial_head="main")
    blob = repo.create_blob(b"select 1 as id\n")
    root = repo.TreeBuilder()
    project = repo.create_blob(b"name: huge\nprofile: huge\n")
    root.insert("dbt_project.yml", project, pygit2.GIT_FILEMODE_BLOB)
    models = repo.TreeBuilder()
    for d in range(files // per_dir):
        sub = repo.TreeBuilder()
        for i in range(per_dir):
            sub.insert(f"m_{d}_{i}.sql", blob, pygit2.GIT_FILEMODE_BLOB)
        models.insert(f"part{d:03d}", sub.write(), pygit2.GIT_FILEMODE_TREE)
    root.insert("models", models.write(), pygit2.GIT_FILEMODE_TREE)
    sig = pygit2.Signature("fixture", "fixture@example.com", 1_700_000_000, 0)
    return str(repo.create_commit("refs/heads/main", sig, sig, "100k files", root.write(), []))


def test_a_repository_of_100000_files_is_refused(tmp_path: Path) -> None:
    assert MAX_FILES < 100_000
    commit = _huge_repo(tmp_path / "huge")
    env = {"HARVEST_HOME": str(tmp_path / "home"), "HARVEST_PINS": str(tmp_path / "pins")}
    result = CliRunner().invoke(main, ["add", f"{tmp_path / 'huge'}@{commit}"], env=env)
    assert result.exit_code == 1
    # a slow export (a loaded machine) may print the progress heartbeat (`harvesting … (10s)`) first
    errors = [line for line in result.stderr.strip().splitlines() if not line.startswith("harvesting ")]
    assert f"more than {MAX_FILES} files" in result.stderr and len(errors) == 1
    assert not (tmp_path / "pins").exists() or not list((tmp_path / "pins").glob("*.toml"))
    leftovers = [p for p in (tmp_path / "home" / "builds").rglob("*") if p.is_file() and p.suffix == ".sql"]
    assert not leftovers

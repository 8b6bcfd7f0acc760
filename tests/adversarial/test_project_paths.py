"""Project paths from a repository are resolved against the exported tree before the host reads them
(issue 14, class 6). A ``dbt_project.yml`` whose ``model-paths`` climbs out with ``..`` made the host hash
a file outside the repository into the pin; a ``packages.yml`` ``local:`` package at an absolute path was
read on the host before any sandbox could contain it. Both are refused with one clear line, before
anything is built or read, and the victims outside the repository are untouched and unread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.errors import PackageError, ProjectError
from dbt_harvest.harvester.gitrepos import Symlink, make_git_repo
from dbt_harvest.harvester.gitstore import GitStore

SECRET = "TOPSECRET-9a1c"
UP = "../" * 40  # more than enough to reach / from wherever the tree is exported


def _victim(tmp_path: Path) -> Path:
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "secret.sql").write_text(f"select '{SECRET}' as leaked\n")
    (folder / "dbt_project.yml").write_text(f"name: {SECRET.lower().replace('-', '_')}\n")
    (folder / "packages.yml").write_text("packages: []\n")
    return folder


def _add(tmp_path: Path, files: dict[str, object]) -> tuple[int, str]:
    repo = make_git_repo(None, tmp_path / "repo", commits=[{"files": files}])
    env = {"HARVEST_HOME": str(tmp_path / "home"), "HARVEST_PINS": str(tmp_path / "pins")}
    result = CliRunner().invoke(main, ["add", f"{repo.path}@{repo.head}", "--clock", "2024-06-30"], env=env)
    return result.exit_code, result.stderr


def _pins(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "pins").glob("*.toml")) if (tmp_path / "pins").is_dir() else []


@pytest.mark.parametrize("key", ["model-paths", "seed-paths", "macro-paths", "test-paths"])
def test_project_folders_that_climb_out_of_the_repository_are_refused(tmp_path: Path, key: str) -> None:
    victim = _victim(tmp_path)
    escape = UP + str(victim).lstrip("/")
    code, err = _add(
        tmp_path,
        {
            "dbt_project.yml": f'name: climber\nprofile: climber\n{key}: ["{"models" if key == "model-paths" else "x"}", "{escape}"]\n',
            "models/orders.sql": "select 1 as id\n",
        },
    )
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"{key} entry" in err and "resolves outside the repository" in err
    assert SECRET not in err and _pins(tmp_path) == []
    assert not (tmp_path / "home" / "builds").exists() or not list((tmp_path / "home" / "builds").rglob("build1"))


def test_a_project_folder_that_is_a_link_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    """A symlink inside the tree that points out of it is dropped at export; one chained through a
    folder that lands outside is refused at discovery."""
    from dbt_harvest.harvester.discovery import discover

    victim = _victim(tmp_path)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "dbt_project.yml").write_text('name: p\nmodel-paths: ["linked/..", "up"]\n')
    os.symlink(victim, tree / "up")
    with pytest.raises(ProjectError, match="model-paths entry 'up' resolves outside the repository"):
        discover(tree)


def test_a_local_package_outside_the_repository_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from dbt_harvest.harvester.packages import resolve_packages

    victim = _victim(tmp_path)
    project = tmp_path / "tree"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: root_project\n")
    store = GitStore(tmp_path / "mirrors")
    for local in (str(victim), os.path.relpath(victim, project), "sub/../../victim"):
        (project / "packages.yml").write_text(f"packages:\n  - local: {local}\n")
        with pytest.raises(PackageError, match="resolves outside the repository") as info:
            resolve_packages(project, store, None, network=False)
        assert SECRET.lower().replace("-", "_") not in str(info.value)  # the victim's project name: never read
    os.symlink(victim, project / "inside_link")
    (project / "packages.yml").write_text("packages:\n  - local: inside_link\n")
    with pytest.raises(PackageError, match="resolves outside the repository"):
        resolve_packages(project, store, None, network=False)


def test_harvest_add_refuses_a_local_package_outside_the_repository(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    code, err = _add(
        tmp_path,
        {
            "dbt_project.yml": "name: with_local\nprofile: with_local\n",
            "models/orders.sql": "select 1 as id\n",
            "packages.yml": f"packages:\n  - local: {victim}\n",
        },
    )
    assert code == 1 and "resolves outside the repository" in err and "dbt deps" not in err, err
    assert len(err.strip().splitlines()) == 1 and _pins(tmp_path) == []


def test_packages_yml_is_rendered_without_the_harvesters_environment(tmp_path: Path, monkeypatch) -> None:
    """{{ env_var('HF_TOKEN') }} in a git URL must not carry the harvester's secret to a host."""
    from dbt_harvest.harvester.packages.specs import read_declared

    monkeypatch.setenv("HF_TOKEN", SECRET)
    project = tmp_path / "tree"
    project.mkdir()
    (project / "packages.yml").write_text(
        "packages:\n  - git: \"https://example.invalid/{{ env_var('HF_TOKEN') }}/pkg.git\"\n    revision: v1\n"
    )
    with pytest.raises(PackageError) as info:
        read_declared(project)
    assert SECRET not in str(info.value) and "HF_TOKEN" in str(info.value)
    (project / "packages.yml").write_text(
        "packages:\n  - git: \"https://example.invalid/{{ env_var('HF_TOKEN', 'none') }}/pkg.git\"\n    revision: v1\n"
    )
    (spec,) = read_declared(project).specs
    assert SECRET not in spec.git and spec.git == "https://example.invalid/none/pkg.git"


def test_a_dangling_symlink_chain_is_dropped_at_export_with_its_reason(tmp_path: Path) -> None:
    """A chain a -> b -> missing stays inside the tree lexically; dbt then failed on it with a bare
    FileNotFoundError. It is now skipped, and says why."""
    repo = make_git_repo(
        None,
        tmp_path / "repo",
        commits=[
            {
                "files": {
                    "dbt_project.yml": "name: chain\n",
                    "models/orders.sql": "select 1 as id\n",
                    "models/a.sql": Symlink("b.sql"),
                    "models/b.sql": Symlink("missing.sql"),
                    "models/c.sql": Symlink("orders.sql"),
                }
            }
        ],
    )
    store = GitStore(tmp_path / "mirrors")
    report = store.export(store.mirror(str(repo.path)), repo.head, tmp_path / "tree")
    reasons = {s.path: s.reason for s in report.skipped}
    assert set(reasons) == {"models/a.sql", "models/b.sql"}
    assert all("leads nowhere" in reason for reason in reasons.values())
    assert not os.path.lexists(tmp_path / "tree/models/a.sql") and (tmp_path / "tree/models/c.sql").is_file()


def test_a_packages_install_path_outside_the_project_is_refused_before_anything_is_removed(tmp_path: Path) -> None:
    """Vendoring empties the install folder first; pointed outside (by '..' or by a link) it would
    delete a host folder."""
    from dbt_harvest.harvester.packages import install_path

    victim = _victim(tmp_path)
    project = tmp_path / "tree"
    project.mkdir()
    os.symlink(victim, project / "linked")
    for value in (UP + str(victim).lstrip("/"), "linked", str(victim)):
        (project / "dbt_project.yml").write_text(f'name: p\npackages-install-path: "{value}"\n')
        with pytest.raises(PackageError, match="leaves the project"):
            install_path(project)
    assert (victim / "secret.sql").is_file()

"""The manifest's code commit: recorded for a dbt-harvest checkout, never for a repository the code merely sits in."""

from __future__ import annotations

from pathlib import Path

from dbt_harvest.harvester.gitrepos import make_git_repo
from dbt_harvest.train.manifest import project_git
from tests.checkout import IN_CHECKOUT, ROOT


def test_the_checkout_itself_records_its_commit() -> None:
    found = project_git(ROOT)
    if IN_CHECKOUT:
        assert len(found["commit"]) == 40 and isinstance(found["dirty"], bool)
    else:
        assert found == {"commit": None, "dirty": None}


def test_code_installed_inside_another_repository_records_none(tmp_path: Path) -> None:
    """A virtualenv inside a user's own git project: site-packages/dbt_harvest is not that project."""
    source = tmp_path / "src"
    (source / "models").mkdir(parents=True)
    (source / "models" / "a.sql").write_text("select 1\n")
    user_project = tmp_path / "analytics"
    make_git_repo(source, user_project)
    installed = user_project / ".venv" / "lib" / "site-packages" / "dbt_harvest"
    installed.mkdir(parents=True)
    assert project_git(installed) == {"commit": None, "dirty": None}
    assert project_git(user_project)["commit"]  # the same call on a work tree root does record it


def test_no_repository_at_all_records_none(tmp_path: Path) -> None:
    assert project_git(tmp_path) == {"commit": None, "dirty": None}

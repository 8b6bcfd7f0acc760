"""The write/read policy of the environment, on a small dbt project of our own (no dbt run needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbt_harvest.eval.env.errors import InvalidAction
from dbt_harvest.eval.env.policy import check_write, policy_for, resolve_read
from dbt_harvest.eval.env.tools import list_files, read_file, write_file
from dbt_harvest.eval.env.workspace import TaskWorkspace


def test_writable_folders_come_from_dbt_project_yml(toy_ws: TaskWorkspace) -> None:
    assert toy_ws.policy.writable == ("models", "extra_models", "macros", "data", "tests")


@pytest.mark.parametrize(
    "path",
    [
        "models/marts/orders.sql",
        "extra_models/new.sql",
        "data/seed.csv",
        "macros/m.sql",
        "tests/t.sql",
        "models/marts/_schema.yml",
        "models/new/deep/x.sql",
    ],
)
def test_allowed_writes(toy_ws: TaskWorkspace, path: str) -> None:
    answer = write_file(toy_ws, path, "select 42 as answer\n")
    assert path in answer
    assert (toy_ws.root / path).read_text() == "select 42 as answer\n"


@pytest.mark.parametrize(
    "path, why",
    [
        ("dbt_project.yml", "outside the writable folders"),
        ("analyses/a.sql", "outside the writable folders"),
        ("dbt_packages/pkg/models/p.sql", "dbt_packages"),
        ("models/dbt_packages/x.sql", "dbt_packages"),
        ("target/x.sql", "target"),
        ("../escape.sql", "climbs out"),
        ("models/../../escape.sql", "climbs out"),
        ("/etc/passwd", "absolute"),
        ("models/link_out/x.sql", "symbolic link"),
        ("models/secret.sql", "symbolic link"),
        ("models/run.py", "only"),
        ("models/marts", "only|folder"),
        (".harvest_profile/profiles.yml", "belongs to the sandbox"),
        ("models\\x.sql", "backslash"),
        ("", "needs a file path"),
    ],
)
def test_refused_writes(toy_ws: TaskWorkspace, path: str, why: str) -> None:
    with pytest.raises(InvalidAction, match=why):
        check_write(toy_ws.policy, path)
    with pytest.raises(InvalidAction):
        write_file(toy_ws, path, "select 1")
    assert (toy_ws.root.parent / "outside" / "secret.txt").read_text() == "TOP-SECRET-TOKEN\n"
    assert not (toy_ws.root.parent / "escape.sql").exists()


def test_reads_refuse_links_escapes_and_sandbox_files(toy_ws: TaskWorkspace) -> None:
    assert read_file(toy_ws, "models/marts/orders.sql") == "select 1 as id\n"
    assert read_file(toy_ws, "dbt_packages/pkg/models/p.sql") == "select 2\n"  # packages are readable, not writable
    for path in (
        "models/secret.sql",
        "models/link_out/secret.txt",
        "../outside/secret.txt",
        "/etc/hostname",
        ".harvest_profile/profiles.yml",
        "build.duckdb",
    ):
        with pytest.raises(InvalidAction):
            read_file(toy_ws, path)
    with pytest.raises(InvalidAction, match="does not exist"):
        resolve_read(toy_ws.policy, "models/nope.sql")


def test_listing_hides_the_sandbox_and_does_not_follow_links(toy_ws: TaskWorkspace) -> None:
    listing = list_files(toy_ws, ".")
    assert "models/marts/orders.sql" in listing
    assert ".harvest_profile" not in listing and "build.duckdb" not in listing
    assert "secret.txt" not in listing
    assert "symbolic link" in listing
    assert "dbt_packages/ (not expanded" in listing
    assert "dbt_packages/pkg/models/p.sql" in list_files(toy_ws, "dbt_packages")


def test_a_write_replaces_a_link_instead_of_writing_through_it(toy_ws: TaskWorkspace, tmp_path: Path) -> None:
    # a link planted as the final component is refused, the target outside is untouched
    os.symlink(tmp_path / "outside" / "secret.txt", toy_ws.root / "macros" / "planted.sql")
    with pytest.raises(InvalidAction, match="symbolic link"):
        write_file(toy_ws, "macros/planted.sql", "x")
    assert (tmp_path / "outside" / "secret.txt").read_text() == "TOP-SECRET-TOKEN\n"


def test_integration_tests_projects_may_also_write_the_package_models(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "models").mkdir(parents=True)
    (root / "integration_tests/seeds").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: pkg\nprofile: pkg\n")
    (root / "integration_tests/dbt_project.yml").write_text("name: pkg_it\nprofile: pkg_it\nseed-paths: [seeds]\n")
    policy = policy_for(root, "integration_tests")
    assert "models" in policy.writable and "integration_tests/seeds" in policy.writable
    assert "integration_tests/models" in policy.writable

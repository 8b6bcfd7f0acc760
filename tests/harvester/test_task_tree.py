"""One way to materialize and list a task's project (harvester.task_tree), whatever the layout.

The case that failed: training read a task's project with a tree walk of its own that kept only files
under ``project_dir``. For a package built from its ``integration_tests/`` (the package is ``../``, the
layout of most of the committed corpus) the mutated model lives at the repository root, so every such task
was refused with "broken_patch does not apply". Training now reads the tree the environment builds, and
lists it the way the environment's ``list_files`` does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbt_harvest.core.patching import PatchError, make_patch
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord
from dbt_harvest.harvester.task_tree import copy_broken, project_files

ROOT_MODEL = "models/meter_usage.sql"
ORIGINAL = "select meter_id, sum(coalesce(volume, 0)) as used from {{ ref('stg_readings') }} group by 1\n"
BROKEN = ORIGINAL.replace("coalesce(volume, 0)", "volume")


def _package_tree(root: Path) -> Path:
    """A package repository laid out as Fivetran's: models at the root, integration_tests/ builds it."""
    files = {
        "dbt_project.yml": "name: meters\nversion: '1.0'\nconfig-version: 2\n",
        ROOT_MODEL: ORIGINAL,
        "models/_models.yml": "version: 2\nmodels:\n  - name: meter_usage\n",
        "macros/helpers.sql": "{% macro one() %}1{% endmacro %}\n",
        "README.md": "# meters\n",
        "integration_tests/dbt_project.yml": "name: meters_it\nprofile: it\nconfig-version: 2\n",
        "integration_tests/packages.yml": "packages:\n  - local: ../\n",
        "integration_tests/seeds/readings.csv": "meter_id,volume\n1,2\n",
        "integration_tests/dbt_packages/dbt_utils/macros/m.sql": "{% macro m() %}{% endmacro %}\n",
        "integration_tests/target/compiled/x.sql": "select 1\n",
        "integration_tests/logs/dbt.log": "log\n",
        ".harvest_profile/profiles.yml": "secret: 1\n",
        "sub/.git": "gitdir: elsewhere\n",
        "models/big.md": "x" * 200_000,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "build.duckdb").write_bytes(b"\0" * 16)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    outside = root.parent / "outside.sql"
    outside.write_text("select 'host secret'\n")
    os.symlink(outside, root / "models" / "linked.sql")
    return root


def test_project_files_lists_what_an_agent_sees(tmp_path: Path) -> None:
    tree = _package_tree(tmp_path / "repo")
    files = project_files(tree)
    assert sorted(files) == [
        "README.md",
        "dbt_project.yml",
        "integration_tests/dbt_project.yml",
        "integration_tests/packages.yml",
        "macros/helpers.sql",
        "models/_models.yml",
        ROOT_MODEL,
    ]  # the package root included; no packages, output, VCS, link, sandbox file
    assert files[ROOT_MODEL] == ORIGINAL


def test_project_files_agrees_with_the_environments_listing(tmp_path: Path) -> None:
    from dbt_harvest.eval.env.policy import PathPolicy, list_tree

    tree = _package_tree(tmp_path / "repo")
    policy = PathPolicy(root=tree.resolve(), writable=("models",))
    listed = {p for p in list_tree(policy, tree, ".", limit=10_000) if not p.endswith(("/", ")"))}
    files = project_files(tree)
    assert set(files) == {p for p in listed if p.endswith((".sql", ".yml", ".yaml", ".md")) and p != "models/big.md"}


def test_copy_broken_applies_the_patch_outside_project_dir_and_strips_vcs(tmp_path: Path) -> None:
    tree = _package_tree(tmp_path / "repo")
    dest = copy_broken(tree, make_patch(ROOT_MODEL, ORIGINAL, BROKEN), tmp_path / "ws")
    assert (dest / ROOT_MODEL).read_text() == BROKEN and (tree / ROOT_MODEL).read_text() == ORIGINAL
    assert not (dest / ".git").exists() and not (dest / "sub" / ".git").exists()
    assert (dest / "models" / "linked.sql").is_symlink()  # copied as a link, never followed
    with pytest.raises(PatchError):
        copy_broken(tree, make_patch("models/absent.sql", ORIGINAL, BROKEN), tmp_path / "ws2")


def test_training_reads_a_package_layout_task_from_its_repository(tmp_path: Path) -> None:
    """GitProjectSource (and PinnedProjectSource, through the same copy_broken + project_files)."""
    from dbt_harvest.harvester.gitrepos import make_git_repo
    from dbt_harvest.train.project import GitProjectSource, corrected_files

    src = tmp_path / "src"
    for rel, text in {
        "dbt_project.yml": "name: meters\n",
        ROOT_MODEL: ORIGINAL,
        "integration_tests/dbt_project.yml": "name: meters_it\n",
        "integration_tests/packages.yml": "packages:\n  - local: ../\n",
    }.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    repo = make_git_repo(src, tmp_path / "repos" / "acme__meters", bare=True)
    task = TaskRecord(
        instance_id="acme__meters.00000000.null.drop_coalesce_default.00000000",
        pin="acme__meters@" + "0" * 12,
        repo="acme/meters",
        base_commit=repo.head,
        project_dir="integration_tests",
        split="train",
        split_group="acme/meters",
        family="null",
        operator="drop_coalesce_default",
        effect="",
        file=ROOT_MODEL,
        broken_patch=make_patch(ROOT_MODEL, ORIGINAL, BROKEN),
        fix_patch=make_patch(ROOT_MODEL, BROKEN, ORIGINAL),
        wrong_repair_patches=(),
        grading=GradingSpec(
            gold="g.duckdb", condition_tabs=("meter_usage",), condition_cols=((0,),), ignore_orders=(True,)
        ),
        problem_statement="Usage is missing for meters with an unread volume.",
        local_checks=LocalChecks(True, 0, 0),
        gold_sha256="0" * 64,
        license="MIT",
        versions={},
    )
    source = GitProjectSource(tmp_path / "repos")
    broken = source.broken_files(task)
    assert broken[ROOT_MODEL] == BROKEN and "integration_tests/packages.yml" in broken
    assert corrected_files(task, broken) == {ROOT_MODEL: ORIGINAL}
    assert source.broken_files(task) is broken  # kept in memory: a reward asks on every rollout

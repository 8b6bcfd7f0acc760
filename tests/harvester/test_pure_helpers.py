"""Discovery, clock, licenses and unified diffs: the pure helpers of `harvest add`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dbt_harvest.core.clock import ClockError, default_clock, normalise_clock
from dbt_harvest.core.errors import ProjectError
from dbt_harvest.core.licenses import detect_license, spdx_of_text
from dbt_harvest.core.patching import PatchError, apply_patch, apply_to_text, make_patch, parse_patch
from dbt_harvest.harvester.discovery import discover


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_root_project_is_discovered(tmp_path: Path) -> None:
    _write(tmp_path / "dbt_project.yml", "name: shop\nprofile: shop_profile\nseed-paths: [data]\n")
    project = discover(tmp_path)
    assert (project.rel_dir, project.name, project.profile, project.schema) == (".", "shop", "shop_profile", "main")
    assert project.seed_paths == ("data",)


def test_package_repository_builds_integration_tests(tmp_path: Path) -> None:
    _write(tmp_path / "dbt_project.yml", "name: stripe_like\n")
    _write(
        tmp_path / "integration_tests" / "dbt_project.yml",
        "name: stripe_like_integration_tests\nvars:\n  stripe_like_schema: stripe_like_it\n",
    )
    _write(tmp_path / "integration_tests" / "packages.yml", "packages:\n  - local: ../\n")
    project = discover(tmp_path)
    assert project.rel_dir == "integration_tests"
    assert project.schema == "stripe_like_it"
    assert "local: ../" in project.reason


def test_project_dir_override_and_refusals(tmp_path: Path) -> None:
    _write(tmp_path / "transform" / "dbt_project.yml", "name: t\n")
    with pytest.raises(ProjectError, match="pass --project-dir"):
        discover(tmp_path)
    assert discover(tmp_path, "transform").rel_dir == "transform"
    with pytest.raises(ProjectError, match="leaves the repository"):
        discover(tmp_path, "../..")
    with pytest.raises(ProjectError, match="no dbt project"):
        discover(tmp_path, "nowhere")


def test_clock_defaults_to_the_day_after_the_newest_seed_date(tmp_path: Path) -> None:
    _write(tmp_path / "seeds" / "orders.csv", "id,ordered_at\n1,2024-03-01\n2,2024-06-30 13:00:00\n3,not a date\n")
    assert default_clock([tmp_path / "seeds"]) == "2024-07-01 00:00:00"
    assert default_clock([tmp_path / "nothing"]) == "2024-01-01 00:00:00"
    assert normalise_clock("2025-02-03") == "2025-02-03 00:00:00"
    with pytest.raises(ClockError):
        normalise_clock("yesterday")


def test_licenses(tmp_path: Path) -> None:
    assert detect_license(tmp_path) == "unknown"
    _write(tmp_path / "LICENSE", "MIT License\n\nPermission is hereby granted, free of charge, to any person")
    assert detect_license(tmp_path) == "MIT"
    assert spdx_of_text("Apache License\n Version 2.0, January 2004") == "Apache-2.0"
    assert spdx_of_text("All rights reserved.") == "unknown"


def test_patch_round_trips_on_random_edits() -> None:
    rng = random.Random(7)
    for _ in range(500):
        old = "".join(rng.choice(["select 1\n", "from x\n", "where a\n", ""]) for _ in range(rng.randint(0, 9)))
        old += rng.choice(["", "tail"])
        lines = old.splitlines(keepends=True)
        for _ in range(rng.randint(1, 3)):
            if lines and rng.random() < 0.5:
                lines[rng.randrange(len(lines))] = rng.choice(["changed\n", "no newline"])
            else:
                lines.insert(rng.randint(0, len(lines)), "inserted\n")
        new = "".join(lines)
        if new == old:
            continue
        patch = make_patch("models/m.sql", old, new, context=rng.choice([0, 1, 3]))
        assert apply_to_text(old, parse_patch(patch)[0]) == new
        assert apply_to_text(new, parse_patch(make_patch("models/m.sql", new, old))[0]) == old


def test_patch_refuses_mismatch_and_traversal(tmp_path: Path) -> None:
    _write(tmp_path / "models" / "m.sql", "select 1\n")
    patch = make_patch("models/m.sql", "select 2\n", "select 3\n")
    with pytest.raises(PatchError, match="does not match"):
        apply_patch(tmp_path, patch)
    assert (tmp_path / "models" / "m.sql").read_text() == "select 1\n"
    with pytest.raises(PatchError, match="leaves the project"):
        parse_patch(make_patch("../escape.sql", "a\n", "b\n"))
    with pytest.raises(PatchError):
        parse_patch("not a patch")

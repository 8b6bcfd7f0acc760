"""The GRPO ``duckdb_sql`` reward backend runs a model's completion SQL in the trainer's own process
(issue 14, class 3): it must run on the project's one locked-down DuckDB, like every other place that
executes SQL someone else wrote. Hostile completions written for this repository try to read a host
file, write one, reach the network and run for ever; each scores 0 with its reason, and the host
victims (a secret file, a folder that must stay empty) are untouched.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from train_world import World

from dbt_harvest.train.completion import render_files
from dbt_harvest.train.project import GitProjectSource
from dbt_harvest.train.sql_backend import DuckDBSqlBackend

FILE = "models/paid_revenue.sql"
SECRET = "TOPSECRET-3b7f"


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "secret.csv").write_text(f"value\n{SECRET}\n")
    return folder


def _score(world: World, sql: str, **kwargs: float):  # -> RewardResult
    backend = DuckDBSqlBackend(GitProjectSource(world.repos), world.inputs, **kwargs)
    return backend.score_completion(world.task, render_files({FILE: sql}))


@pytest.mark.parametrize(
    "template",
    [
        "select * from read_csv('{secret}')",
        "select content as value from read_text('{secret}')",
        "select 1 as value; attach '{folder}/stolen.duckdb' as stolen",
        "select 1 as value; copy (select 1) to '{folder}/written.csv'",
        "select 1 as value; install httpfs",
        "select 1 as value; set enable_external_access = true",
    ],
)
def test_completion_sql_cannot_touch_the_host(world: World, victim: Path, template: str) -> None:
    before = sorted(p.name for p in victim.iterdir())
    result = _score(world, template.format(secret=victim / "secret.csv", folder=victim))
    assert result.official == 0 and result.reason.startswith("build failed"), result
    assert SECRET not in result.reason
    assert any(word in result.reason for word in ("disabled", "locked", "Permission")), result.reason
    assert sorted(p.name for p in victim.iterdir()) == before
    assert (victim / "secret.csv").read_text() == f"value\n{SECRET}\n"


def test_a_completion_that_runs_for_ever_is_interrupted(world: World) -> None:
    started = time.monotonic()
    result = _score(world, "select sum(i * i % 7) as value from range(1000000000000) t(i)", statement_seconds=2.0)
    assert result.official == 0 and "ran past 2 s" in result.reason, result
    assert time.monotonic() - started < 60

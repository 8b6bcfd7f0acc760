"""`harvest mint --budget-s`: a mint stopped by its time budget keeps what it decided and, resumed as
often as it takes, ends with exactly the tasks of an unstopped mint (the corpus lock depends on it)."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from dbt_harvest.cli import main


def _unminted_copy(minted, tmp_path):  # type: ignore[no-untyped-def]
    """The minted example's home and pins, copied, with nothing minted yet (reports and tasks removed)."""
    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(minted.home, home, symlinks=True)
    shutil.copytree(minted.pins, pins)
    shutil.rmtree(home / "mint")
    shutil.rmtree(home / "tasks")
    return home, pins


def _task_files(home):  # type: ignore[no-untyped-def]
    folder = home / "tasks" / "train"
    return {p.name: p.read_text() for p in sorted(folder.glob("*.json"))}


def test_a_budgeted_mint_resumed_until_done_keeps_the_unstopped_tasks(minted_example, tmp_path) -> None:  # type: ignore[no-untyped-def]
    home, pins = _unminted_copy(minted_example, tmp_path)
    env = {"HARVEST_HOME": str(home), "HARVEST_PINS": str(pins)}
    pin = minted_example.pin.id
    budget, runs, left_after = 3.0, 0, []
    while runs < 40:
        result = CliRunner().invoke(main, ["mint", pin, "--max-per-model", "1", "--budget-s", str(budget), "--json"],
                                    env=env)
        assert result.exit_code == 0, result.output[-2000:]
        out = json.loads(result.output.strip().splitlines()[-1])
        runs += 1
        left = out["unfinished"]["model_shards"]
        if left == 0:
            break
        if left_after:
            # resumed at least once: each further run gets more, so a loaded machine (where a run decides
            # one candidate past its budget) still finishes in a few runs; every run still resumes
            budget *= 2 if out["this_run"]["candidates"] == 0 else 1.5
        left_after.append(left)
    assert left_after, "the first run finished inside the budget, so nothing was resumed"
    assert runs < 40
    reports = list((home / "mint").rglob("*.part"))
    assert reports == [], "a finished mint leaves no stopped-shard marker"
    expected = {p.name: p.read_text() for p in sorted((minted_example.home / "tasks" / "train").glob("*.json"))}
    assert expected and _task_files(home) == expected


def test_a_spent_budget_decides_nothing_and_writes_no_marker(minted_example, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]

    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, mint, plan

    home, pins = _unminted_copy(minted_example, tmp_path)
    monkeypatch.setenv("HARVEST_HOME", str(home))
    monkeypatch.setenv("HARVEST_PINS", str(pins))
    spent = MintOptions(max_per_model=1, deadline=0.0)
    jobs = plan([minted_example.pin], spent, mint_target(home, pins))
    written = mint([minted_example.pin], spent, mint_target(home, pins), jobs=jobs)
    assert jobs and written == []
    assert not list((home / "mint").rglob("*.done")) and not list((home / "mint").rglob("*.part"))
    assert not (home / "tasks").exists() or not list((home / "tasks").rglob("*.json"))


def test_a_budget_that_runs_out_inside_a_shard_still_decides_a_candidate(minted_example, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A budget shorter than a shard's screening must not stop it before its first decision: a resumed
    shard would re-screen and stop again, forever (seen on a real package with a 60 s budget)."""
    import time
    from dataclasses import replace

    from dbt_harvest.corpora.store import mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, plan
    from dbt_harvest.harvester.mint.shard import run_shard

    home, pins = _unminted_copy(minted_example, tmp_path)
    monkeypatch.setenv("HARVEST_HOME", str(home))
    monkeypatch.setenv("HARVEST_PINS", str(pins))
    jobs = plan([minted_example.pin], MintOptions(max_per_model=1), mint_target(home, pins))
    job = replace(jobs[0], deadline=time.time() + 0.5)  # passes the shard's first look, spent by its first candidate
    result = run_shard(job)
    assert len(result.reports) >= 1

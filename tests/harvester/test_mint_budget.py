"""`harvest mint --budget-s`: a mint stopped by its time budget keeps what it decided and, resumed as
often as it takes, ends with exactly the tasks of an unstopped mint (the corpus lock depends on it). The
resumed-until-done mint itself is tests/cli/test_mint_lock.py's fresh re-mint (one full mint serves both)."""

from __future__ import annotations

import shutil


def _unminted_copy(minted, tmp_path):  # type: ignore[no-untyped-def]
    """The minted example's home and pins, copied, with nothing minted yet (reports and tasks removed)."""
    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(minted.home, home, symlinks=True)
    shutil.copytree(minted.pins, pins)
    shutil.rmtree(home / "mint")
    shutil.rmtree(home / "tasks")
    return home, pins


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

"""The audit end to end with real sandboxed builds: oracle N/N, noop 0/N, wrong 0/N, rungs 3 and 4,
the report (k/N over all tasks, missing and crashed listed), resuming, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.eval.audit.report import build_report, write_report
from dbt_harvest.eval.audit.rundir import RunDir
from dbt_harvest.eval.audit.runner import AuditOptions, run_audit
from dbt_harvest.eval.drivers.scripted import NoopDriver, ScriptedDriver, WrongDriver
from dbt_harvest.eval.ladder import BUILD_FAILS, CHECKS_FAIL, OFFICIAL_FAIL, OFFICIAL_PASS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def oracle_run(dev_world, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """`harvest audit --split dev --driver oracle --json` through the CLI, piped (CliRunner's streams are
    not terminals), with a progress line per episode on stderr and exactly one JSON object on stdout."""
    run_dir = tmp_path_factory.mktemp("audit") / "oracle"
    with dev_world.env():
        result = CliRunner().invoke(
            main,
            ["audit", "--split", "dev", "--driver", "oracle", "--run-dir", str(run_dir), "--json"],
            env={"HARVEST_PROGRESS_INTERVAL": "0"},
        )
    assert result.exit_code == 0, result.output
    assert len(result.stdout.strip().splitlines()) == 1, result.stdout  # --json keeps stdout clean
    n = len(dev_world.tasks)
    progress = [line for line in result.stderr.splitlines() if line.startswith("audit: ")]
    assert [line.split()[1] for line in progress] == [f"{i}/{n}" for i in range(1, n + 1)], result.stderr
    assert progress[-1].startswith(f"audit: {n}/{n} tasks, {n} passed ("), result.stderr
    return run_dir, json.loads(result.stdout)


def test_oracle_scores_n_of_n(oracle_run, dev_world) -> None:
    run_dir, summary = oracle_run
    n = len(dev_world.tasks)
    assert (summary["n"], summary["official"], summary["strict"]) == (n, n, n)
    assert summary["ladder"][str(OFFICIAL_PASS)] == n and not summary["missing"] and not summary["crashed"]
    for name in ("report.md", "report.json", "ladder.png", "run.json"):
        assert (run_dir / name).stat().st_size > 0
    assert (run_dir / "ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    task = dev_world.tasks[0]
    events = RunDir(run_dir).read_transcript(task.instance_id)
    assert [e["tool"] for e in events if e["kind"] == "action"] == ["read_file", "write_file", "submit"]
    assert summary["by_family"]["filter"] == {"n": 1, "official": 1, "strict": 1}


@pytest.mark.parametrize("driver", [NoopDriver(), WrongDriver()], ids=["noop", "wrong"])
def test_noop_and_wrong_score_zero_and_stop_at_rung_5(driver, dev_world, tmp_path: Path) -> None:
    run = RunDir(tmp_path / driver.name)
    with dev_world.env():
        run_audit(run, "dev", dev_world.tasks, driver, AuditOptions(workers=2), pins=dev_world.pins)
        report = write_report(run)
    n = len(dev_world.tasks)
    assert (report["n"], report["official"], report["strict"]) == (n, 0, 0)
    assert report["ladder"][str(OFFICIAL_FAIL)] == n  # silent bugs: build ok, dbt tests pass, official 0
    verdict = run.read_episode(dev_world.tasks[0].instance_id)
    assert verdict["reason"] and "official 0" in verdict["reason"]  # the explainer, for people


def test_scripted_episodes_stop_at_build_fails_and_checks_fail(dev_world, tmp_path: Path) -> None:
    task = dev_world.tasks[0]
    scripts = {
        BUILD_FAILS: [("write_file", {"path": task.file, "content": "select from where;\n"}), ("submit", {})],
        CHECKS_FAIL: [
            ("write_file", {"path": "tests/always_fails.sql", "content": "select 1 as failure\n"}),
            ("submit", {}),
        ],
    }
    with dev_world.env():
        for rung, actions in scripts.items():
            run = RunDir(tmp_path / f"rung{rung}")
            run_audit(run, "dev", [task], ScriptedDriver(actions), AuditOptions(workers=1), pins=dev_world.pins)
            verdict = run.read_episode(task.instance_id)
            assert verdict["rung"] == rung, verdict
            assert verdict["official"] == 0


def test_report_counts_missing_and_crashed_as_zero_and_resume_plays_only_those(
    oracle_run, dev_world, tmp_path: Path
) -> None:
    import shutil

    run_dir = tmp_path / "copy"
    shutil.copytree(oracle_run[0], run_dir)
    run = RunDir(run_dir)
    first, second = dev_world.tasks[0].instance_id, dev_world.tasks[1].instance_id
    run.episode_file(first).unlink()  # missing
    crashed = {**run.read_episode(second), "status": "crashed", "official": 0, "strict": 0, "rung": 0, "error": "boom"}
    run.write_episode(crashed, [])
    report = build_report(run)
    n = len(dev_world.tasks)
    assert report["n"] == n and report["official"] == n - 2
    assert report["missing"] == [first] and report["crashed"] == [second]
    assert report["ladder"]["0"] == 2
    write_report(run)
    markdown = (run_dir / "report.md").read_text()
    assert f"missing: `{first}`" in markdown and "boom" in markdown

    class Counting(NoopDriver):
        played: list[str] = []

        def play(self, env, task, observation):
            Counting.played.append(task.instance_id)
            env.episode.abandon("counted")

    with dev_world.env():
        run_audit(
            run, "dev", dev_world.tasks, _renamed(Counting(), "oracle"), AuditOptions(workers=1), pins=dev_world.pins
        )
    assert sorted(Counting.played) == sorted([first, second])


def test_a_resumed_audit_counts_the_verdicts_it_keeps(oracle_run, dev_world, tmp_path: Path) -> None:
    """Resumed with one episode gone, the progress starts at the kept verdicts (and their passes), then ends at
    n/n; stdout stays one JSON object."""
    import shutil

    run_dir = tmp_path / "resumed"
    shutil.copytree(oracle_run[0], run_dir)
    RunDir(run_dir).episode_file(dev_world.tasks[0].instance_id).unlink()
    with dev_world.env():
        result = CliRunner().invoke(
            main,
            ["audit", "--split", "dev", "--driver", "oracle", "--run-dir", str(run_dir), "--json"],
            env={"HARVEST_PROGRESS_INTERVAL": "0"},
        )
    assert result.exit_code == 0, result.output
    n = len(dev_world.tasks)
    progress = [line.split(" (")[0] for line in result.stderr.splitlines() if line.startswith("audit: ")]
    assert progress == [f"audit: {n - 1}/{n} tasks, {n - 1} passed", f"audit: {n}/{n} tasks, {n} passed"], result.stderr
    assert len(result.stdout.strip().splitlines()) == 1 and json.loads(result.stdout)["official"] == n
    # without --json, each episode played now adds its verdict line on stderr; stdout holds the summary
    RunDir(run_dir).episode_file(dev_world.tasks[0].instance_id).unlink()
    with dev_world.env():
        human = CliRunner().invoke(
            main,
            ["audit", "--split", "dev", "--driver", "oracle", "--run-dir", str(run_dir)],
            env={"HARVEST_PROGRESS_INTERVAL": "0"},
        )
    assert human.exit_code == 0, human.output
    assert f"{dev_world.tasks[0].instance_id}: rung 6 official 1" in human.stderr.splitlines(), human.stderr
    assert "audit: " not in human.stdout and f"official {n}/{n}" in human.stdout, human.stdout


def _renamed(driver, name: str):
    driver.name = name  # a resumed run must be played by the driver that started it
    return driver


def test_a_crashing_driver_is_recorded_not_raised(dev_world, tmp_path: Path) -> None:
    class Crashing(NoopDriver):
        name = "crashing"

        def play(self, env, task, observation):
            raise RuntimeError("the model server went away")

    run = RunDir(tmp_path / "crash")
    with dev_world.env():
        run_audit(run, "dev", dev_world.tasks[:1], Crashing(), AuditOptions(workers=1), pins=dev_world.pins)
    verdict = run.read_episode(dev_world.tasks[0].instance_id)
    assert verdict["status"] == "crashed" and "went away" in verdict["error"]
    assert any(e["kind"] == "crash" for e in run.read_transcript(dev_world.tasks[0].instance_id))


def test_cli_report_and_usage_errors(oracle_run, dev_world) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["audit", "report", str(oracle_run[0]), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["official"] == len(dev_world.tasks)
    assert runner.invoke(main, ["audit", "--split", "dev"]).exit_code == 2  # no driver
    assert runner.invoke(main, ["audit", "--split", "test", "--driver", "noop"]).exit_code == 2  # no recipe
    with dev_world.env():
        other = runner.invoke(main, ["audit", "--split", "dev", "--driver", "noop", "--run-dir", str(oracle_run[0])])
    assert other.exit_code == 1 and "driver 'oracle'" in other.output
    with dev_world.env():  # --kind: the dev world's tasks are all repairs
        none = runner.invoke(
            main,
            [
                "audit",
                "--split",
                "dev",
                "--kind",
                "completion",
                "--driver",
                "oracle",
                "--run-dir",
                str(oracle_run[0].with_name("none")),
            ],
        )
    assert none.exit_code == 1 and "the dev split has no completion tasks" in none.output
    assert not oracle_run[0].with_name("none").exists()  # refused before a run folder is started
    assert runner.invoke(main, ["audit", "--split", "dev", "--kind", "rewrite", "--driver", "oracle"]).exit_code == 2

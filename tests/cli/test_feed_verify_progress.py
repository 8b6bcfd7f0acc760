"""`harvest corpus feed` and `harvest tasks verify` report counted progress as they go (issue 56): piped, each
update is one stderr line with tasks done of total and what was found so far (ok/failed and the rewards;
verified/failed), and `--json` keeps stdout to one JSON object. The measuring and the sandboxed builds are
stood in for (train.corpus_feed.feed, harvester.verify.verify): what is under test is what the commands say
while the work goes on, with the real feed log, report and summary around it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dbt_harvest.cli import main
from dbt_harvest.cli.corpus import FeedTally
from dbt_harvest.cli.tasks import VerifyTally
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord
from dbt_harvest.harvester.verify import CheckResult, TaskVerdict
from dbt_harvest.train.corpus_feed import FeedReport, TaskFeed

PIN = "acme__shop@" + "a" * 12
REWARD_FAILURE = "reward: the true repair scores 0 (a different row count)"


def _record(n: int, split: str = "train") -> TaskRecord:
    """A small train (or dev) task record of the pin PIN."""
    broken = f"--- a/models/m{n}.sql\n+++ b/models/m{n}.sql\n@@ -1 +1 @@\n-select {n}\n+select {n + 1}\n"
    return TaskRecord(
        instance_id=f"acme__shop.aaaaaaaa.flip.{n:08d}",
        pin=PIN,
        repo="acme/shop",
        base_commit="a" * 40,
        project_dir=".",
        split=split,
        split_group="acme/shop",
        family="literal",
        operator="flip",
        effect="wrong values",
        file=f"models/m{n}.sql",
        broken_patch=broken,
        fix_patch=broken,
        wrong_repair_patches=(),
        grading=GradingSpec("gold.duckdb", ("orders",), ((),), (True,)),
        problem_statement=f"Orders look wrong ({n}).",
        local_checks=LocalChecks(True, 2, 0),
        gold_sha256="d" * 64,
        license="MIT",
        versions={},
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """HARVEST_HOME and the pins folder in tmp, and a progress line for every update."""
    (tmp_path / "pins").mkdir()
    return {
        "HARVEST_HOME": str(tmp_path / "home"),
        "HARVEST_PINS": str(tmp_path / "pins"),
        "HARVEST_PROGRESS_INTERVAL": "0",
    }


def _progress_lines(result: Result, label: str) -> list[str]:
    """The piped progress lines of ``label``, without their elapsed time."""
    return [line.rsplit(" (", 1)[0] for line in result.stderr.splitlines() if line.startswith(f"{label}: ")]


# corpus feed -----------------------------------------------------------------------------------------------


class Stopped(Exception):
    """The feed run was killed (a lost machine, a closed shell)."""


def _feed_result(task: TaskRecord) -> TaskFeed:
    """What the feed finds for a task: the third one's true repair does not score 1."""
    if task.instance_id.endswith("3"):
        return TaskFeed(task.instance_id, task.pin, ".", fixed=0, unrepaired=0, failure=REWARD_FAILURE)
    return TaskFeed(task.instance_id, task.pin, ".", fixed=1, unrepaired=0)


def _stand_in_feed(stop_after: int | None = None) -> Callable[..., FeedReport]:
    """train.corpus_feed.feed without rendering or reward builds; ``stop_after``: a run killed after that
    many tasks of its own."""

    def feed(
        tasks: Sequence[TaskRecord],
        project: object,
        tokenizer: object,
        tokenizer_name: str,
        *,
        max_length: int,
        max_file_chars: int,
        rewards: bool = True,
        on_task: Callable[[TaskRecord, TaskFeed], None] | None = None,
        finished: Mapping[str, TaskFeed] | None = None,
    ) -> FeedReport:
        finished = finished or {}
        results, ran = [], 0
        for task in tasks:
            if task.instance_id in finished:
                results.append(finished[task.instance_id])
                continue
            if stop_after is not None and ran == stop_after:
                raise Stopped
            result = _feed_result(task)
            ran += 1
            results.append(result)
            if on_task is not None:
                on_task(task, result)
        resumed = sum(t.instance_id in finished for t in tasks)
        return FeedReport(tuple(results), max_length, max_file_chars, tokenizer_name, 0.0, {}, resumed)

    return feed


@pytest.fixture
def feed_world(monkeypatch: pytest.MonkeyPatch) -> list[TaskRecord]:
    """Three train tasks; the tokenizer and the measuring stood in for."""
    tasks = [_record(n) for n in (1, 2, 3)]
    monkeypatch.setattr("dbt_harvest.train.sft_data.load_train_tasks", lambda tasks_dir: list(tasks))
    monkeypatch.setattr("dbt_harvest.train.tiny.train_tokenizer", lambda vocab_size: object())
    return tasks


def test_corpus_feed_piped_lines_carry_the_counts_and_the_rewards(
    feed_world: list[TaskRecord], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dbt_harvest.train.corpus_feed.feed", _stand_in_feed())
    result = CliRunner().invoke(main, ["corpus", "feed"], env=env)
    assert result.exit_code == 1, result.output  # the third task failed a stage
    assert _progress_lines(result, "corpus feed") == [
        "corpus feed: 1/3 tasks, 1 ok, 0 failed; rewarded 1/0: 1/1 true repairs score 1, 1/1 unrepaired score 0",
        "corpus feed: 2/3 tasks, 2 ok, 0 failed; rewarded 1/0: 2/2 true repairs score 1, 2/2 unrepaired score 0",
        "corpus feed: 3/3 tasks, 2 ok, 1 failed; rewarded 1/0: 2/3 true repairs score 1, 3/3 unrepaired score 0",
    ]
    assert f"{feed_world[2].instance_id}: {REWARD_FAILURE}" in result.stderr.splitlines()
    assert result.stdout.startswith("# Does the corpus feed training?")


def test_corpus_feed_json_stays_one_object_on_stdout_and_a_resumed_run_counts_what_it_kept(
    feed_world: list[TaskRecord], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dbt_harvest.train.corpus_feed.feed", _stand_in_feed(stop_after=1))
    stopped = CliRunner().invoke(main, ["corpus", "feed", "--json"], env=env)
    assert isinstance(stopped.exception, Stopped) and stopped.stdout == ""
    monkeypatch.setattr("dbt_harvest.train.corpus_feed.feed", _stand_in_feed())
    result = CliRunner().invoke(main, ["corpus", "feed", "--json"], env=env)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert report["resumed"] == 1 and report["ok"] == 2 and list(report["failed"]) == [feed_world[2].instance_id]
    assert "resuming: 1 of 3 tasks were measured by an earlier run" in result.stderr
    assert [line.split(";")[0] for line in _progress_lines(result, "corpus feed")] == [
        "corpus feed: 1/3 tasks, 1 ok, 0 failed",  # the kept result, counted at once
        "corpus feed: 2/3 tasks, 2 ok, 0 failed",
        "corpus feed: 3/3 tasks, 2 ok, 1 failed",
    ]


def test_the_feed_tally_leaves_the_rewards_out_when_none_ran() -> None:
    rendered = TaskFeed("t1", PIN, ".")
    tally = FeedTally().plus(rendered).plus(TaskFeed("t2", PIN, ".", failure="render: ValueError: no file"))
    assert tally.line() == "1 ok, 1 failed"
    rewarded = tally.plus(TaskFeed("t3", PIN, ".", fixed=1, unrepaired=1, failure="reward: the unrepaired ..."))
    assert rewarded.line() == "1 ok, 2 failed; rewarded 1/0: 1/1 true repairs score 1, 0/1 unrepaired score 0"


# tasks verify ----------------------------------------------------------------------------------------------


def _verdict(record: TaskRecord) -> TaskVerdict:
    """Every check passes, but the second task's claims do not hold."""
    checks = tuple(CheckResult(name, True, "fine") for name in ("gold_matches", "broken_fails", "repair_passes"))
    claims = CheckResult("claims", not record.instance_id.endswith("2"), "more_rows on orders does not hold")
    return TaskVerdict(record.instance_id, record.pin, (*checks, claims))


@pytest.fixture
def verify_world(monkeypatch: pytest.MonkeyPatch) -> list[TaskRecord]:
    """Three dev tasks; the sandboxed builds stood in for (one verdict per task, in order)."""
    records = [_record(n, "dev") for n in (1, 2, 3)]

    def verify(
        given: Sequence[TaskRecord],
        *,
        sandboxed: bool = True,
        limits: Any = None,
        on_result: Callable[[TaskVerdict], None] | None = None,
    ) -> list[TaskVerdict]:
        verdicts = []
        for record in given:
            verdicts.append(_verdict(record))
            if on_result is not None:
                on_result(verdicts[-1])
        return verdicts

    monkeypatch.setattr("dbt_harvest.cli.tasks._records", lambda split: list(records))
    monkeypatch.setattr("dbt_harvest.harvester.verify.verify", verify)
    return records


def test_tasks_verify_piped_lines_carry_verified_and_failed(
    verify_world: list[TaskRecord], env: dict[str, str]
) -> None:
    result = CliRunner().invoke(main, ["tasks", "verify", "--all"], env=env)
    assert result.exit_code == 1, result.output
    assert _progress_lines(result, "tasks verify") == [
        "tasks verify: 1/3 tasks, 1 verified, 0 failed",
        "tasks verify: 2/3 tasks, 1 verified, 1 failed",
        "tasks verify: 3/3 tasks, 2 verified, 1 failed",
    ]
    first, second, third = (r.instance_id for r in verify_world)
    assert result.stdout.splitlines() == [
        f"{first}: ok",
        f"{second}: FAILED claims (more_rows on orders does not hold)",
        f"{third}: ok",
        "2/3 tasks pass every check; per check: gold_matches 3/3, broken_fails 3/3, repair_passes 3/3, "
        "wrong_repair 0/0, claims 2/3, distinct 0/0",
    ]


def test_tasks_verify_json_stays_one_object_on_stdout(verify_world: list[TaskRecord], env: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["tasks", "verify", "--all", "--json"], env=env)
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)  # the whole of stdout is one JSON object
    assert data["summary"]["ok"] == 2 and [v["ok"] for v in data["tasks"]] == [True, False, True]
    assert _progress_lines(result, "tasks verify")[-1] == "tasks verify: 3/3 tasks, 2 verified, 1 failed"


def test_the_verify_tally_counts_each_verdict_once() -> None:
    tally = VerifyTally()
    for record in (_record(1), _record(2)):
        tally = tally.plus(_verdict(record))
    assert tally == VerifyTally(verified=1, failed=1) and tally.line() == "1 verified, 1 failed"

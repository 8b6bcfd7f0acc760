"""`harvest corpus feed` reports counted progress as it goes (issue 56): piped, each update is one stderr line
with tasks done of total and what was found so far (ok/failed and, with rewards, the reward verdicts), `--json`
keeps stdout to one JSON object, and a run started again after a kill counts at once the results it kept.

Real runs: the train tasks minted from the embedded example (the session's ``minted_example``), rendered with
train.tiny's tokenizer and rewarded by real builds. `harvest tasks verify`'s progress is checked on its real
run in tests/harvester/test_quality.py. The tallies' wording is checked here on its own as well."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.cli.corpus import FeedTally
from dbt_harvest.cli.tasks import VerifyTally
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.harvester.verify import CheckResult, TaskVerdict
from dbt_harvest.train.corpus_feed import TaskFeed

HARVEST = [sys.executable, "-m", "dbt_harvest"]
PIN = "acme__shop@" + "a" * 12
FEED = 3  # train tasks the feed runs over: two sound, the last with a true repair that repairs nothing


def _progress_lines(stderr: str, label: str) -> list[str]:
    """The piped progress lines of ``label``, without their elapsed time."""
    return [line.rsplit(" (", 1)[0] for line in stderr.splitlines() if line.startswith(f"{label}: ")]


def _rewarded_line(done: int) -> str:
    """The progress line after ``done`` of the FEED tasks, rewarded: only the last one fails (its true repair
    scores 0, like its unrepaired project)."""
    ok, failed = min(done, FEED - 1), int(done == FEED)
    return (
        f"corpus feed: {done}/{FEED} tasks, {ok} ok, {failed} failed; rewarded 1/0: {ok}/{done} true repairs "
        f"score 1, {done}/{done} unrepaired score 0"
    )


@pytest.fixture(scope="module")
def feed_home(minted_example, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list[TaskRecord]]:  # type: ignore[no-untyped-def]
    """A copy of the minted example's home whose train split is its first FEED tasks, the last of them with a
    fix that only comments the broken file (its true repair scores 0: a real failed stage); (the environment
    of a piped run printing every update, the tasks in the order the feed takes them)."""
    from dbt_harvest.core.patching import make_patch
    from dbt_harvest.core.task_record import write_task
    from dbt_harvest.train.project import PinnedProjectSource
    from tests.conftest import use_env

    assert len(minted_example.tasks) >= FEED
    home = tmp_path_factory.mktemp("feed") / "home"
    shutil.copytree(minted_example.home, home, symlinks=True)
    folder = home / "tasks" / "train"
    kept, last = minted_example.tasks[: FEED - 1], minted_example.tasks[FEED - 1]
    for task in minted_example.tasks[FEED:]:
        (folder / f"{task.instance_id}.json").unlink()
    with use_env(home, minted_example.pins):
        broken = PinnedProjectSource(minted_example.pins).broken_files(last)[last.file]
    bad = replace(last, fix_patch=make_patch(last.file, broken, broken + "\n-- reviewed\n"))
    write_task(bad, folder)
    env = {"HARVEST_HOME": str(home), "HARVEST_PINS": str(minted_example.pins), "HARVEST_PROGRESS_INTERVAL": "0"}
    return env, [*kept, bad]


def _killed_after_the_first_task(env: dict[str, str]) -> tuple[str, str]:
    """``harvest corpus feed --json`` in a subprocess, killed (SIGKILL, its whole process group) as soon as
    its first progress line comes: (that line, what it wrote on stdout)."""
    proc = subprocess.Popen(
        [*HARVEST, "corpus", "feed", "--json"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    first, seen = "", []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("corpus feed: "):
                first = line
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, _ = proc.communicate(timeout=60)
    assert first, "".join(seen)[-4000:]
    assert proc.returncode == -signal.SIGKILL, proc.returncode  # killed mid-run, not finished
    return first.rsplit(" (", 1)[0], stdout


def test_a_killed_feed_said_how_far_it_got_and_its_rerun_counts_what_it_kept(
    feed_home: tuple[dict[str, str], list[TaskRecord]],
) -> None:
    env, tasks = feed_home
    first, stdout = _killed_after_the_first_task(env)
    assert first == _rewarded_line(1) and stdout == ""  # real reward builds: the fix scores 1, the broken 0
    result = CliRunner().invoke(main, ["corpus", "feed", "--json"], env=env)
    assert result.exit_code == 1, result.output  # the last task failed its reward stage
    report = json.loads(result.stdout)  # the whole of stdout is one JSON object
    kept = report["resumed"]
    assert 1 <= kept < FEED  # the kill came right after the first task was kept (a second may have finished)
    assert f"resuming: {kept} of {FEED} tasks were measured by an earlier run" in result.stderr.splitlines()
    # the kept results counted at once, then one line per task measured now
    assert _progress_lines(result.stderr, "corpus feed") == [_rewarded_line(n) for n in range(kept, FEED + 1)]
    bad = tasks[-1].instance_id
    assert report["ok"] == FEED - 1 and list(report["failed"]) == [bad]
    assert report["failed"][bad].startswith("reward: the true repair scores 0")
    assert f"{bad}: {report['failed'][bad]}" in result.stderr.splitlines()
    assert report["reward"]["tasks"] == FEED and report["reward"]["fixed_scores_1"] == FEED - 1
    assert report["reward"]["unrepaired_scores_0"] == FEED
    # --retry-failed measures the failed task again (its cause is still there) and takes the others as kept
    retried = CliRunner().invoke(main, ["corpus", "feed", "--json", "--retry-failed"], env=env)
    again = json.loads(retried.stdout)
    assert retried.exit_code == 1 and again["resumed"] == FEED - 1 and list(again["failed"]) == [bad]
    assert f"resuming: {FEED - 1} of {FEED} tasks were measured by an earlier run" in retried.stderr.splitlines()


def test_a_feed_without_rewards_counts_rendered_tasks_and_no_reward_verdicts(
    feed_home: tuple[dict[str, str], list[TaskRecord]],
) -> None:
    env, _ = feed_home
    result = CliRunner().invoke(main, ["corpus", "feed", "--no-rewards"], env=env)
    assert result.exit_code == 0, result.output  # the fix that repairs nothing still renders
    assert _progress_lines(result.stderr, "corpus feed") == [
        f"corpus feed: {n}/{FEED} tasks, {n} ok, 0 failed" for n in range(1, FEED + 1)
    ]
    assert "resuming" not in result.stderr  # another setting, another log: nothing kept from the rewarded runs
    assert result.stdout.startswith("# Does the corpus feed training?")


def test_the_feed_tally_leaves_the_rewards_out_when_none_ran() -> None:
    rendered = TaskFeed("t1", PIN, ".")
    tally = FeedTally().plus(rendered).plus(TaskFeed("t2", PIN, ".", failure="render: ValueError: no file"))
    assert tally.line() == "1 ok, 1 failed"
    rewarded = tally.plus(TaskFeed("t3", PIN, ".", fixed=1, unrepaired=1, failure="reward: the unrepaired ..."))
    assert rewarded.line() == "1 ok, 2 failed; rewarded 1/0: 1/1 true repairs score 1, 0/1 unrepaired score 0"


def test_the_feed_report_counts_per_kind_and_what_of_the_lock_it_covers() -> None:
    from dbt_harvest.train.budget import RowLength
    from dbt_harvest.train.corpus_feed import FeedReport, markdown

    row = RowLength("row", 10, 90, 100)
    tasks = (
        TaskFeed("r1", PIN, ".", single_turn=row, agentic=row, fixed=1, unrepaired=0),
        TaskFeed("r2", PIN, ".", agentic=row, single_turn_left_out="r2: beyond", fixed=1, unrepaired=0),
        TaskFeed(
            "c1",
            PIN,
            ".",
            kind="completion",
            single_turn=row,
            agentic=row,
            fixed=0,
            unrepaired=0,
            failure="reward: the true repair scores 0",
        ),
        TaskFeed("h1", PIN, ".", kind="history", single_turn=row, agentic=row),
        TaskFeed("x1", PIN, ".", single_turn=row, agentic=row, fixed=1, unrepaired=0),
    )
    lock = {"locked_train": 5, "fed_as_locked": 3, "fed_otherwise": ["c1"], "not_fed": ["gone"], "not_locked": ["x1"]}
    report = FeedReport(tasks, 4096, 16000, "tiny", 1.0, lock=lock).to_dict()
    assert report["per_kind"]["repair"] == {
        "tasks": 3,
        "single_turn_rows": 2,
        "single_turn_left_out": 1,
        "agentic_rows": 3,
        "rewarded": 3,
        "fixed_scores_1": 3,
        "unrepaired_scores_0": 3,
        "failed": 0,
    }
    assert report["per_kind"]["completion"]["fixed_scores_1"] == 0 and report["per_kind"]["completion"]["failed"] == 1
    assert report["per_kind"]["history"]["rewarded"] == 0  # rendered only: no reward verdict counted
    assert report["lock"] == {
        "locked_train": 5,
        "fed_as_locked": 3,
        "fed_otherwise": ["c1"],
        "not_fed": ["gone"],
        "not_locked": ["x1"],
    }
    text = markdown(report)
    assert "| completion | 1 | 1 | 0 | 1 | 1 | 0 | 1 | 1 |" in text  # rewarded, its true answer 0, unrepaired 0
    assert "3 of its 5 train tasks fed as locked; 1 fed with another record than the lock's, 1 not fed" in text
    assert FeedReport(tasks, 4096, 16000, "tiny", 1.0).to_dict()["lock"] is None
    every = markdown(
        {**report, "position_probe": {**report["position_probe"], "rules": {"longest": 0.5, "position": 0.25}}}
    )
    assert "  - every rule (held-out hit rate): position 25.0%, longest 50.0% (position: " in every


def test_lock_coverage_compares_the_fed_records_with_the_lock_by_its_own_rules(minted_example) -> None:  # type: ignore[no-untyped-def]
    """Real records and a real lock: a record under a renamed gold is fed as locked (the lock's rule), another
    statement is fed otherwise, a locked record not fed and a fed record not locked are named."""
    from dbt_harvest.corpora.tasklock import lock_of, under_gold
    from dbt_harvest.train.corpus_feed import lock_coverage

    tasks = minted_example.tasks
    assert len(tasks) >= 5
    lock = lock_of(tasks[:4], "head")
    fed = [
        tasks[0],
        under_gold(tasks[1], "c" * 64),
        replace(tasks[2], problem_statement=tasks[2].problem_statement + " Also."),
        tasks[4],
    ]
    assert lock_coverage(lock, fed) == {
        "locked_train": 4,
        "fed_as_locked": 2,
        "fed_otherwise": [tasks[2].instance_id],
        "not_fed": [tasks[3].instance_id],
        "not_locked": [tasks[4].instance_id],
    }
    assert lock_coverage(lock, fed, ["other__repo@0123456789ab"])["locked_train"] == 0


def test_the_verify_tally_counts_each_verdict_once() -> None:
    checks = tuple(CheckResult(name, True, "fine") for name in ("gold_matches", "broken_fails", "repair_passes"))
    good = TaskVerdict("t1", PIN, (*checks, CheckResult("claims", True, "holds")))
    bad = TaskVerdict("t2", PIN, (*checks, CheckResult("claims", False, "more_rows on orders does not hold")))
    tally = VerifyTally().plus(good).plus(bad)
    assert tally == VerifyTally(verified=1, failed=1) and tally.line() == "1 verified, 1 failed"


def test_a_verify_sample_is_seeded_and_independent_of_the_listing_order(minted_example) -> None:  # type: ignore[no-untyped-def]
    """`tasks verify --sample N --seed S` picks the same N tasks for the same seed whatever order the store
    lists them in, other tasks for another seed, and all of them when N is not below their number."""
    from dbt_harvest.cli.tasks import _sampled
    from dbt_harvest.core.task_record import read_task

    records = [read_task(p) for p in sorted((minted_example.home / "tasks" / "train").glob("*.json"))]
    assert len(records) >= 3
    picked = [r.instance_id for r in _sampled(records, 2, 7)]
    assert len(picked) == 2 and [r.instance_id for r in _sampled(list(reversed(records)), 2, 7)] == picked
    assert {tuple(r.instance_id for r in _sampled(records, 2, seed)) for seed in range(8)} != {tuple(picked)}
    assert _sampled(records, len(records), 0) == records and _sampled(records, None, 0) == records

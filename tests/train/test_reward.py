"""The single-turn reward: completion parsing, and the REAL scorer on a real DuckDB build of a task."""

from __future__ import annotations

import functools

import pytest
from train_world import REVENUE_BROKEN, REVENUE_OK, REVENUE_WRONG, World

from dbt_harvest.core.patching import make_patch
from dbt_harvest.train.completion import MalformedCompletion, parse_completion, render_files
from dbt_harvest.train.pool import RewardPool
from dbt_harvest.train.project import GitProjectSource
from dbt_harvest.train.reward import RewardResult, make_reward_func
from dbt_harvest.train.sql_backend import DuckDBSqlBackend

FILE = "models/paid_revenue.sql"
PROJECT = {FILE: REVENUE_BROKEN, "models/stg_orders.sql": "select 1\n"}


def test_parse_file_blocks_ignores_prose() -> None:
    text = "I think shipped counts.\n" + render_files({FILE: REVENUE_OK}) + "\nDone."
    assert parse_completion(text, PROJECT) == {FILE: REVENUE_OK}


def test_parse_unified_diff_in_a_fence() -> None:
    diff = make_patch(FILE, REVENUE_BROKEN, REVENUE_OK)
    assert parse_completion(f"```diff\n{diff}```", PROJECT) == {FILE: REVENUE_OK}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("select 1", "no <file"),
        ('<file path="models/new.sql">\nselect 1\n</file>', "not a file of the project"),
        ('<file path="../etc/passwd">\nx\n</file>', "unsafe path"),
        (render_files({FILE: "a"}) + render_files({FILE: "b"}), "given twice"),
        (
            "--- a/models/paid_revenue.sql\n+++ b/models/paid_revenue.sql\n@@ -1,1 +1,1 @@\n-nope\n+x\n",
            "does not apply",
        ),
    ],
)
def test_malformed_completions_are_refused(text: str, reason: str) -> None:
    with pytest.raises(MalformedCompletion, match=reason):
        parse_completion(text, PROJECT)


@pytest.fixture()
def backend(world: World) -> DuckDBSqlBackend:
    return DuckDBSqlBackend(GitProjectSource(world.repos), world.inputs)


def test_real_scorer_fix_scores_1_and_wrong_repairs_score_0(world: World, backend: DuckDBSqlBackend) -> None:
    task = world.task
    fix = backend.score_completion(task, render_files({FILE: REVENUE_OK}))
    assert (fix.official, fix.strict) == (1, 1), fix.reason
    wrong = backend.score_completion(task, render_files({FILE: REVENUE_WRONG}))
    assert wrong.official == 0 and wrong.reason
    unchanged = backend.score_completion(task, render_files({FILE: REVENUE_BROKEN}))
    assert unchanged.official == 0 and unchanged.reason.startswith("no change")
    broken_sql = backend.score_completion(task, render_files({FILE: "select nope from nowhere\n"}))
    assert broken_sql.official == 0 and broken_sql.reason.startswith("build failed")
    assert backend.score_completion(task, "no answer").reason.startswith("malformed")


def test_reward_func_over_a_warm_pool(world: World) -> None:
    factory = functools.partial(DuckDBSqlBackend, GitProjectSource(world.repos), world.inputs)
    with RewardPool(factory, workers=2, timeout_s=60) as pool:
        reward = make_reward_func(pool.score_many, {world.task.instance_id: world.task})
        completions = [
            [{"role": "assistant", "content": render_files({FILE: text})}]
            for text in (REVENUE_OK, REVENUE_WRONG, REVENUE_OK)
        ]
        rewards = reward(prompts=[None] * 3, completions=completions, instance_id=[world.task.instance_id] * 3)
    assert rewards == [1.0, 0.0, 1.0]
    assert reward.tally.summary()["reward_strict_mean"] == pytest.approx(2 / 3)


class SleepyBackend:
    """A backend whose score takes as many seconds as the completion says (to exercise the timeout)."""

    def score_completion(self, task, completion: str) -> RewardResult:
        import time

        time.sleep(float(completion))
        return RewardResult(1, 1, float(completion), "slept")


def test_timeout_counts_as_zero_and_the_worker_is_replaced(world: World) -> None:
    with RewardPool(SleepyBackend, workers=1, timeout_s=1.0) as pool:
        results = pool.score_many([(world.task, "30"), (world.task, "0")])
        assert [r.official for r in results] == [0, 1]
        assert results[0].reason.startswith("timeout")
        assert pool.replaced == 1

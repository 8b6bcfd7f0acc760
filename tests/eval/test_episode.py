"""The episode state machine, the ladder, and the trl protocol, on the toy workspace (no dbt builds).

The grader is replaced by a function returning a chosen Graded, so every rung can be reached
without building; the same rungs are reached with real builds in test_audit.py.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from dbt_harvest.eval.drivers.scripted import ScriptedDriver
from dbt_harvest.eval.env import TOOL_NAMES, RepairEnvironment, tool_schemas
from dbt_harvest.eval.env.episode import ABANDONED, LOOPED, SUBMITTED, TURN_CAP, Episode, EpisodeLimits
from dbt_harvest.eval.env.tools import RunSettings
from dbt_harvest.eval.ladder import (
    BUILD_FAILS,
    CHECKS_FAIL,
    LOOPS,
    MISSING,
    NO_SUBMISSION,
    OFFICIAL_FAIL,
    OFFICIAL_PASS,
    classify,
)
from dbt_harvest.harvester.grading.verdict import Graded
from tests.eval.conftest import toy_task

ROOT = Path(__file__).resolve().parents[2]


def submission(built: bool = True, failed: int = 0, official: int = 0, strict: int = 0) -> Graded:
    return Graded(
        official=official,
        strict=strict,
        built=built,
        first_error="" if built else "boom",
        tests_total=3,
        failed_tests=tuple(f"t{i}" for i in range(failed)),
    )


def episode(ws, result: Graded | None = None, **limits: int) -> Episode:
    return Episode(
        toy_task(),
        ws,
        RunSettings(sandboxed=True),
        EpisodeLimits(**limits),
        grader=lambda task, w, s: result or submission(),
    )


def test_loop_detection_ends_the_episode_on_the_nth_identical_action(toy_ws) -> None:
    ep = episode(toy_ws, repeat_limit=3)
    ep.act("list_files", {"path": "models"})
    ep.act("read_file", {"path": "models/marts/orders.sql"})
    ep.act("read_file", {"path": "models/marts/orders.sql"})
    assert not ep.done
    answer = ep.act("read_file", {"path": "models/marts/orders.sql"})
    assert ep.status == LOOPED and "repeated 3 times" in answer
    assert classify(ep.outcome).rung == LOOPS
    assert ep.act("submit").startswith("error: the episode is over")
    assert ep.turns == 4 and ep.submission is None


def test_turn_cap_and_invalid_actions_are_counted_with_useful_errors(toy_ws) -> None:
    ep = episode(toy_ws, max_turns=5)
    assert "unknown tool 'rm'" in ep.act("rm", {"path": "x"}) and "list_files" in ep.act("rm", {"path": "y"})
    assert "missing required argument 'path'" in ep.act("read_file", {})
    assert "outside the writable folders" in ep.act("write_file", {"path": "dbt_project.yml", "content": "x"})
    assert ep.invalid_actions == 4
    last = ep.act("list_files", {})
    assert ep.status == TURN_CAP and "turn cap of 5" in last
    assert classify(ep.outcome).rung == NO_SUBMISSION
    assert ep.transcript[-1]["kind"] == "end" and ep.transcript[-1]["status"] == TURN_CAP


def test_a_reply_without_a_tool_call_is_invalid_and_repeating_it_is_a_loop(toy_ws) -> None:
    ep = episode(toy_ws, repeat_limit=2)
    assert "no tool call" in ep.no_tool_call("I think the bug is...")
    assert ep.invalid_actions == 1
    ep.no_tool_call("I think the bug is...")
    assert ep.status == LOOPED


def test_malformed_arguments_are_invalid_not_crashes(toy_ws) -> None:
    ep = episode(toy_ws)
    assert "must be a JSON object" in ep.act("read_file", "models/x.sql")
    assert "must be a str" in ep.act("read_file", {"path": 3})
    assert "unknown argument" in ep.act("submit", {"force": True})
    assert "not allowed" in ep.act("dbt", {"command": "run-operation"})
    assert "not a node selector" in ep.act("dbt", {"command": "build", "select": "--vars {x: 1}"})
    assert ep.invalid_actions == 5 and not ep.done


@pytest.mark.parametrize(
    "result, rung",
    [
        (submission(built=False), BUILD_FAILS),
        (submission(failed=2), CHECKS_FAIL),
        (submission(), OFFICIAL_FAIL),
        (submission(official=1, strict=1), OFFICIAL_PASS),
        (submission(failed=1, official=1), OFFICIAL_PASS),  # official pass wins over dbt tests
    ],
)
def test_submitted_rungs(toy_ws, result: Graded, rung: int) -> None:
    ep = episode(toy_ws, result)
    ScriptedDriver([("list_files", {}), ("submit", {})]).play(_env_around(ep), ep.task, "")
    assert ep.status == SUBMITTED
    verdict = classify(ep.outcome)
    assert verdict.rung == rung and verdict.strict == result.strict


def test_scripts_that_stop_early_are_no_submission_and_missing_is_rung_0(toy_ws) -> None:
    ep = episode(toy_ws)
    ScriptedDriver([("list_files", {})]).play(_env_around(ep), ep.task, "")
    assert ep.status == ABANDONED and classify(ep.outcome).rung == NO_SUBMISSION
    assert classify(None).rung == MISSING


def _env_around(ep: Episode) -> RepairEnvironment:
    env = RepairEnvironment({})
    env._episode = ep  # the driver talks to this episode
    return env


# -- trl's environment_factory protocol -------------------------------------------------------------
def test_public_methods_are_exactly_the_tools_plus_reset_and_get_reward() -> None:
    public = {
        n for n, _ in inspect.getmembers(RepairEnvironment, predicate=inspect.isfunction) if not n.startswith("_")
    }
    assert public == set(TOOL_NAMES) | {"reset", "get_reward"}
    assert RepairEnvironment().get_reward() == 0.0  # constructible with no arguments, reward 0 before an episode


def test_tool_schemas_describe_every_argument_as_trl_builds_them() -> None:
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas()}
    assert set(schemas) == set(TOOL_NAMES)
    for name, schema in schemas.items():
        assert schema["description"], name
        for arg, prop in schema["parameters"]["properties"].items():
            assert prop.get("description"), (name, arg)
    assert schemas["dbt"]["parameters"]["properties"]["command"]["enum"] == ["build", "run", "test", "compile", "seed"]
    assert schemas["write_file"]["parameters"]["required"] == ["path", "content"]


def test_reset_without_an_instance_id_is_refused() -> None:
    from dbt_harvest.eval.env import EnvError

    with pytest.raises(EnvError, match="instance_id"):
        RepairEnvironment({}).reset(prompt=[{"role": "user", "content": "x"}])


def test_the_training_default_serves_the_train_split_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbt_harvest.eval.env import EnvError

    monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HARVEST_PINS", str(tmp_path / "pins"))
    with pytest.raises(EnvError, match="train split only"):
        RepairEnvironment().reset(instance_id="some.dev.task")


# -- the explainer never reaches the agent ----------------------------------------------------------
def test_no_agent_facing_module_imports_the_explainer() -> None:
    """eval/env and eval/drivers must not import or call core.scorer's explain (the audit alone does)."""
    offenders = []
    for folder in ("eval/env", "eval/drivers"):
        for path in sorted((ROOT / folder).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and any(a.name in ("explain", "Explanation") for a in node.names):
                    offenders.append(f"{path.name}: from {node.module} import explain")
                if isinstance(node, ast.ImportFrom) and node.module and "explain" in node.module:
                    offenders.append(f"{path.name}: from {node.module}")
                if isinstance(node, ast.Import) and any("explain" in a.name for a in node.names):
                    offenders.append(f"{path.name}: import explain")
                if isinstance(node, ast.Attribute) and node.attr in ("explain", "Explanation"):
                    offenders.append(f"{path.name}: .{node.attr}")
    assert offenders == []
    # and the audit, which shows reasons to people, does use it (so this test would see a real import)
    assert "from dbt_harvest.core.scorer import explain" in (ROOT / "eval/audit/runner.py").read_text()

"""The environment's fallback builds in its warm sandboxed child: the cold verdicts, no state between builds.

Edits the fast path cannot answer (Jinja written, a macro or a test added, a Python model) are graded by a
full sandboxed seed + build. Through a ``WarmBuilds`` they run in one warm child on a workspace reset to
the task's pristine tree: every verdict must equal the cold child's, a build must find nothing an earlier
build left (a file, a relation, a process-wide Python object, a file in the sandbox's /tmp), and closing
ends the child. All builds are real sandboxed dbt builds of the example's dev tasks.
"""

from __future__ import annotations

import pytest

from tests.eval.test_fast_checks import _texts
from tests.property_budget import variants as variants_of

JINJA = "\n{{ config(materialized='table') }}\n"

#: a Python model that leaves a mark in the process, in the sandbox's /tmp and in the workspace
STASH = """
def model(dbt, session):
    import builtins
    builtins.harvest_leak = "stashed"
    with open("/tmp/harvest_leak", "w") as handle:
        handle.write("stashed")
    with open("harvest_leak.txt", "w") as handle:
        handle.write("stashed")
    return session.sql("select 1 as stashed")
"""

#: a Python model that fails when it finds any of those marks
PROBE = """
def model(dbt, session):
    import builtins, os
    found = [where for where, seen in (("memory", hasattr(builtins, "harvest_leak")),
             ("tmp", os.path.exists("/tmp/harvest_leak")), ("workspace", os.path.exists("harvest_leak.txt"))) if seen]
    if found:
        raise RuntimeError("a previous build left " + ", ".join(found))
    return session.sql("select 1 as probed")
"""


def _strip(found) -> dict:
    out = found.to_dict()
    out.pop("wall_s")
    return out


@pytest.mark.deep(
    covered_by=(
        "tests/eval/test_warm_fallback.py::test_the_environment_opens_its_warm_child_on_the_first_fallback_and_ends_it_when_it_closes",
        "tests/eval/test_fast_checks.py::test_an_edit_the_fast_path_cannot_grade_is_built_fresh_and_agrees_with_the_workspace_build",
    )
)
def test_fallback_builds_in_the_warm_child_give_the_cold_verdicts(dev_world) -> None:
    from dbt_harvest.harvester.grading import grade
    from dbt_harvest.harvester.grading.warm import WarmBuilds

    task = dev_world.tasks[0]
    with dev_world.env(), WarmBuilds() as warm:
        broken, fixed, wrong = _texts(task)
        # "wrong+jinja" gives a failing verdict as "broken+failing test" does: played in the deep run only
        variants = variants_of(
            {
                "fixed+jinja": {task.file: fixed + JINJA},
                "wrong+jinja": {task.file: wrong + JINJA},
                "fixed+macro": {
                    task.file: fixed,
                    "macros/harvest_extra.sql": "{% macro harvest_one() %}1{% endmacro %}\n",
                },
                "broken+failing test": {
                    task.file: broken + JINJA,
                    "tests/harvest_always_fails.sql": "select 1 as bad\n",
                },
                "jinja error": {task.file: fixed + "\n{{ harvest_no_such_macro() }}\n"},
            },
            default=("fixed+jinja", "fixed+macro", "broken+failing test", "jinja error"),
        )
        for name, edits in variants.items():
            hot = grade(task, edits, "fast", fallback="naive", tests=True, warm=warm)
            cold = grade(task, edits, "fast", fallback="naive", tests=True)
            assert hot.path == "warm" and cold.path == "naive", (name, hot.path, cold.path)
            assert _strip(hot) == _strip(cold), (name, hot, cold)
        assert warm.builds == len(variants) and warm.child_starts == 1, (warm.builds, warm.child_starts)
        fixed_hot = grade(task, variants["fixed+jinja"], "fast", fallback="naive", tests=True, warm=warm)
        assert (fixed_hot.built, fixed_hot.official, fixed_hot.strict) == (True, 1, 1), fixed_hot
        # another task of the same pin: same child, the partial-parse state primed for the first task reused
        other = next(t for t in dev_world.tasks[1:] if t.pin == task.pin)
        _, other_fixed, other_wrong = _texts(other)
        # the wrong repair last: its verdict (0) is what the assertions after the loop read
        for text in variants_of(
            {"fixed": other_fixed + JINJA, "wrong": other_wrong + JINJA}, default=("wrong",)
        ).values():
            hot = grade(other, {other.file: text}, "fast", fallback="naive", tests=True, warm=warm)
            cold = grade(other, {other.file: text}, "fast", fallback="naive", tests=True)
            assert hot.path == "warm" and _strip(hot) == _strip(cold), (other.instance_id, hot, cold)
        assert hot.official == 0 and warm.primes == 1 and warm.child_starts == 1, (hot, warm.primes)


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/sandbox/test_session.py::test_batches_share_one_child_and_a_restored_variant_matches_a_fresh_build",
        "tests/harvester/test_mint_variants.py::test_a_warm_variant_is_what_a_fresh_workspace_builds_and_identical_inputs_build_once",
    )
)
def test_a_build_in_the_warm_child_finds_nothing_an_earlier_build_left(dev_world) -> None:
    from dbt_harvest.harvester.grading import grade
    from dbt_harvest.harvester.grading.warm import WarmBuilds

    task = dev_world.tasks[0]
    with dev_world.env(), WarmBuilds() as warm:
        _, fixed, _ = _texts(task)
        # 1: a new model, a failing singular test and a Python model that leaves marks everywhere it can
        first = {
            task.file: fixed + JINJA,
            "models/harvest_left.sql": "select 42 as answer\n",
            "tests/harvest_always_fails.sql": "select 1 as bad\n",
            "models/harvest_stash.py": STASH,
        }
        left = grade(task, first, "fast", fallback="naive", tests=True, warm=warm)
        assert left.path == "warm" and left.built and "harvest_always_fails" in " ".join(left.failed_tests), left
        # 2: a different edit that reads the relation build 1 made and probes for its marks: on a clean
        # workspace the relation is missing (the build fails), without the read it builds and passes
        reads = {task.file: fixed + JINJA, "models/harvest_reader.sql": "select * from main.harvest_left\n"}
        probe = {task.file: fixed + JINJA, "models/harvest_probe.py": PROBE}
        for name, edits in (("reads", reads), ("probe", probe)):
            grade(task, first, "fast", fallback="naive", tests=True, warm=warm)  # leave everything again
            hot = grade(task, edits, "fast", fallback="naive", tests=True, warm=warm)
            cold = grade(task, edits, "fast", fallback="naive", tests=True)
            assert _strip(hot) == _strip(cold), (name, hot, cold)
        assert not hot.failed_tests and hot.built and hot.official == 1, hot  # the probe found no mark
        assert warm.child_starts == 1


def test_the_environment_opens_its_warm_child_on_the_first_fallback_and_ends_it_when_it_closes(dev_world) -> None:
    from dbt_harvest.eval.env.environment import EnvSettings, RepairEnvironment

    task = dev_world.tasks[0]
    with dev_world.env():
        _, fixed, _ = _texts(task)
        with RepairEnvironment({task.instance_id: task}, EnvSettings()) as env:
            env.reset(instance_id=task.instance_id)
            warm = env._warm
            assert warm is not None and not warm.is_open
            env.write_file(task.file, fixed)
            assert "PASS" in env.validate()
            assert not warm.is_open  # the fast path answered: no child yet
            env.write_file(task.file, fixed + JINJA)
            assert "PASS" in env.validate()
            assert warm.is_open and warm.builds == 1
            proc = warm._session._proc
            env.submit()
            assert env.get_reward() == 1.0 and warm.builds == 2 and warm.child_starts == 1
        assert not warm.is_open and proc.poll() is not None

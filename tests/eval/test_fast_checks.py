"""validate and submit on the grading fast path give the same answers as the sandboxed dbt build.

The dev world's hand-made tasks are played as scripted episodes twice, once with the fast checks and once
with a full sandboxed ``dbt seed`` + ``dbt build`` per call, for the true fix, the wrong repair, the
untouched broken model, an edit that reads the graded relation back from the built state, and an edit
that does not compile: the validate observation and every field of the submission but its wall time
must agree. An edit that writes Jinja must leave the fast path (None) and still be graded by dbt.
"""

from __future__ import annotations

from pathlib import Path

from dbt_harvest.core.patching import apply_to_text, parse_patch
from tests.property_budget import variants as variants_of


def _texts(task) -> tuple[str, str, str]:
    """(broken, fixed, wrong) text of the task's file."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.harvester.workspace import template

    pin = read_pin(pin_path(task.pin, pins_dir()))
    original = (template(pin) / task.file).read_text(encoding="utf-8")
    broken = apply_to_text(original, parse_patch(task.broken_patch)[0])
    fixed = apply_to_text(broken, parse_patch(task.fix_patch)[0])
    wrong = apply_to_text(broken, parse_patch(task.wrong_repair_patches[0])[0])
    return broken, fixed, wrong


def _reads_the_answer(task) -> str:
    """The model rewritten to select its own built relation, named in plain SQL (no Jinja)."""
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.state import load_state

    table = task.grading.condition_tabs[0]
    node = next(n for n in models(load_state(task.pin).manifest).values() if n.alias == table)
    return f"select * from {node.relation}\n"


def _play(task, text: str, fast: bool, scratch: Path) -> tuple[str, dict]:
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.eval.env.episode import Episode
    from dbt_harvest.eval.env.tools import RunSettings
    from dbt_harvest.eval.env.workspace import discard, materialize

    ws = materialize(task, pins_dir(), scratch)
    try:
        episode = Episode(task, ws, RunSettings(graded_edits=fast))
        episode.act("write_file", {"path": task.file, "content": text})
        validated = episode.act("validate", {})
        episode.act("submit", {})
        assert episode.submission is not None
        found = episode.submission.to_dict()
        found.pop("wall_s")
        return validated, found
    finally:
        discard(ws)


def test_fast_checks_agree_with_the_dbt_build(dev_world, tmp_path: Path) -> None:
    from dbt_harvest.eval.env.graded_edits import validate_edits

    task = dev_world.tasks[0]
    with dev_world.env():
        broken, fixed, wrong = _texts(task)
        # "broken" fails the checks as "wrong" does (the same fast-path verdict): played in the deep run only
        variants = variants_of(
            {
                "fixed": fixed,
                "wrong": wrong,
                "broken": broken,
                "reads_answer": _reads_the_answer(task),
                "syntax": broken.replace("select", "selec", 1),
            },
            default=("fixed", "wrong", "reads_answer", "syntax"),
        )
        for name, text in variants.items():
            assert validate_edits(task, {task.file: text}, fallback=None) is not None, (
                f"{name} should take the fast path"
            )
            fast = _play(task, text, True, tmp_path)
            slow = _play(task, text, False, tmp_path)
            assert fast[1]["built"] == slow[1]["built"], (name, fast, slow)
            assert {k: v for k, v in fast[1].items() if k != "first_error"} == {
                k: v for k, v in slow[1].items() if k != "first_error"
            }, (name, fast, slow)
            if slow[1]["built"]:
                assert fast[0] == slow[0], (name, fast[0], slow[0])
            else:
                assert fast[0].startswith("local checks FAIL: the build fails") and slow[0].startswith(
                    "local checks FAIL: the build fails"
                ), (name, fast[0], slow[0])
        assert _play(task, fixed, True, tmp_path)[1]["official"] == 1


def test_every_dev_task_grades_its_fix_one_and_its_wrong_repair_zero_on_the_fast_path(dev_world) -> None:
    from dbt_harvest.harvester.grading import grade

    with dev_world.env():
        for task in dev_world.tasks:
            broken, fixed, wrong = _texts(task)
            for text, expected in ((fixed, 1), (wrong, 0), (broken, 0)):
                graded = grade(task, {task.file: text}, "fast", fallback=None, tests=True)
                assert graded.built and graded.official == expected, (task.instance_id, expected, graded)
                assert graded.tests_total > 0


def test_jinja_and_non_model_edits_leave_the_fast_path(dev_world) -> None:
    from dbt_harvest.eval.env.graded_edits import validate_edits

    task = dev_world.tasks[0]
    with dev_world.env():
        broken, fixed, _ = _texts(task)
        assert validate_edits(task, {task.file: fixed}, fallback=None) is not None
        assert (
            validate_edits(task, {task.file: fixed + "\n{{ config(materialized='table') }}\n"}, fallback=None) is None
        )
        assert (
            validate_edits(
                task, {task.file: fixed, "macros/extra.sql": "{% macro x() %}1{% endmacro %}\n"}, fallback=None
            )
            is None
        )
        assert validate_edits(task, {"../outside.sql": "select 1"}, fallback=None) is None


def test_a_submission_graded_fast_carries_a_capture_the_explainer_reads(dev_world, tmp_path: Path) -> None:
    from dbt_harvest.core.scorer import explain
    from dbt_harvest.eval.env.graded_edits import submit_edits
    from dbt_harvest.harvester.gold import gold_path

    task = dev_world.tasks[0]
    with dev_world.env():
        _, _, wrong = _texts(task)
        found = submit_edits(task, {task.file: wrong}, tmp_path / "capture.duckdb")
        assert found is not None and found.path == "fast"
        assert found is not None and found.built and found.official == 0
        assert found.capture == tmp_path / "capture.duckdb" and found.capture.is_file()
        text = explain(gold_path(task.gold_sha256), found.capture, task.grading).to_text()
        assert task.grading.condition_tabs[0] in text


def test_an_edit_the_fast_path_cannot_grade_is_built_fresh_and_agrees_with_the_workspace_build(
    dev_world, tmp_path: Path
) -> None:
    """The environment's fallback goes through the same grading function (a fresh sandboxed seed + build
    of pin + broken patch + edits) and answers what building the agent's workspace answers."""
    from dbt_harvest.eval.env.graded_edits import graded_edits

    task = dev_world.tasks[0]
    with dev_world.env():
        _, fixed, _ = _texts(task)
        jinja = fixed + "\n{{ config(materialized='table') }}\n"
        found = graded_edits(task, {task.file: jinja})
        assert found is not None and found.path == "naive", found
        assert (found.built, found.official, found.strict) == (True, 1, 1), found
        assert found.tests_total > 0 and not found.failed_tests
        slow = _play(task, jinja, False, tmp_path)[1]
        assert {k: v for k, v in found.to_dict().items() if k != "wall_s"} == slow, (found, slow)

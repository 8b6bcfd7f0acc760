"""harvester.grading.edited: the single-turn reward's build+score, on the minted example (real builds, real DuckDB).

The true repair of every task scores 1 and its wrong repair 0 through the fast path; one task also goes
through the sandboxed incremental dbt build; completions that try to read the right answer out of the
pin's built state (``{{ this }}``, the relation's own name) score 0 on both paths.
"""

from __future__ import annotations

import pytest

from dbt_harvest.core.patching import apply_to_text, parse_patch


def _texts(task) -> tuple[str, str]:
    """(broken text, fixed text) of the task's file."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.harvester.workspace import template

    pin = read_pin(pin_path(task.pin, pins_dir()))
    original = (template(pin) / task.file).read_text(encoding="utf-8")
    broken = apply_to_text(original, parse_patch(task.broken_patch)[0])
    return broken, apply_to_text(broken, parse_patch(task.fix_patch)[0])


def _wrong(task, broken: str) -> str:
    return apply_to_text(broken, parse_patch(task.wrong_repair_patches[0])[0])


@pytest.fixture(scope="module")
def tasks(minted_example):
    with minted_example.env():
        yield [t for t in minted_example.tasks if t.wrong_repair_patches]


def test_fix_scores_one_and_wrong_repair_zero_on_every_task(minted_example, tasks) -> None:
    from dbt_harvest.harvester.grading.edited import grade

    assert tasks, "the example must mint tasks with wrong repairs"
    with minted_example.env():
        for task in tasks:
            broken, fixed = _texts(task)
            verdict = grade(task, {task.file: fixed}, "fast")
            path = verdict.path
            assert (verdict.official, verdict.strict) == (1, 1), (task.instance_id, path, verdict.reason)
            verdict = grade(task, {task.file: _wrong(task, broken)}, "fast")
            path = verdict.path
            assert verdict.official == 0, (task.instance_id, path)
            assert grade(task, {task.file: broken}, "fast").official == 0


def test_fast_path_cannot_read_the_answer_from_the_built_state(minted_example, tasks) -> None:
    from dbt_harvest.harvester.grading.edited import grade
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.state import load_state

    task = tasks[0]
    with minted_example.env():
        nodes = models(load_state(task.pin).manifest)
        node = next(n for n in nodes.values() if task.file.endswith(n.path))
        cheat = f"select * from {node.relation}\n"
        verdict = grade(task, {task.file: cheat}, "fast")
        path = verdict.path
    assert path == "fast"
    assert verdict.official == 0 and verdict.reason.startswith("build failed"), verdict


def test_sandboxed_incremental_build_agrees_and_refuses_this(minted_example, tasks) -> None:
    from dbt_harvest.harvester.grading.edited import grade, release

    task = tasks[0]
    with minted_example.env():
        broken, fixed = _texts(task)
        fix = grade(task, {task.file: fixed}, "dbt")
        path = fix.path
        assert path == "dbt" and (fix.official, fix.strict) == (1, 1), fix.reason
        # `{{ this }}` is the relation being rebuilt: in the pin's state it holds the right answer
        cheat = grade(task, {task.file: "select * from {{ this }}\n"}, "fast")
        path = cheat.path
        assert path == "dbt", "Jinja in an edit must leave the fast path"
        assert cheat.official == 0 and cheat.reason.startswith("build failed"), cheat
        release(task)


def test_edits_outside_the_project_are_refused_without_building(minted_example, tasks) -> None:
    from dbt_harvest.harvester.grading.edited import grade

    with minted_example.env():
        for bad in ("../escape.sql", "/etc/passwd", ".harvest_profile/profiles.yml", "build.duckdb"):
            verdict = grade(tasks[0], {bad: "select 1"}, "fast")
            path = verdict.path
            assert (verdict.official, path) == (0, "refused"), bad


# --- the fast path's pure parts -----------------------------------------------------------------


def _node(uid: str, raw: str = "", compiled: str = "", parents: tuple[str, ...] = (), materialized: str = "table"):
    from dbt_harvest.harvester.mint.lineage import ModelNode

    name = uid.rsplit(".", 1)[-1]
    return ModelNode(
        uid,
        name,
        f"models/{name}.sql",
        f'"build"."main"."{name}"',
        "main",
        name,
        materialized,
        "sql",
        raw,
        compiled,
        "",
        {},
        parents,
    )


def test_enclosing_edit_keeps_common_prefix_and_suffix() -> None:
    from dbt_harvest.harvester.grading.fast import enclosing_edit

    assert enclosing_edit("select a from t", "select a from t") is None
    edit = enclosing_edit("select a from t where x = 1", "select a from t where x = 12")
    assert edit is not None and edit.apply("select a from t where x = 1") == "select a from t where x = 12"
    assert (edit.start, edit.end, edit.replacement) == (27, 27, "2")


def test_compiled_after_edit_carries_plain_edits_and_refuses_jinja() -> None:
    from dbt_harvest.harvester.grading.fast import Unsupported, compiled_after_edit

    raw = "select id from {{ ref('orders') }} where status = 'paid'\n"
    compiled = 'select id from "build"."main"."orders" where status = \'paid\'\n'
    node = _node("model.p.paid", raw, compiled)
    new = compiled_after_edit(node, raw, raw.replace("'paid'", "'shipped'"))
    assert new == compiled.replace("'paid'", "'shipped'")
    for bad in (
        raw.replace("'paid'", "'{{ var(\"s\") }}'"),  # writes Jinja
        raw.replace("ref('orders')", "ref('payments')"),  # edits inside a tag
        raw + "{# note #}\n",
    ):  # a Jinja comment
        with pytest.raises(Unsupported):
            compiled_after_edit(node, raw, bad)
    with pytest.raises(Unsupported):
        compiled_after_edit(_node("model.p.eph", raw, compiled, materialized="ephemeral"), raw, raw + " ")


def test_closure_is_the_roots_and_their_descendants_parents_first() -> None:
    from dbt_harvest.harvester.grading.fast import closure

    nodes = {
        uid: _node(uid, parents=parents)
        for uid, parents in {
            "model.p.a": (),
            "model.p.b": ("model.p.a",),
            "model.p.c": ("model.p.b", "model.p.d"),
            "model.p.d": (),
            "model.p.e": ("model.p.d",),
        }.items()
    }
    assert closure(nodes, ["model.p.b"]) == ["model.p.b", "model.p.c"]
    order = closure(nodes, ["model.p.a", "model.p.d"])
    assert set(order) == set(nodes) and order.index("model.p.b") < order.index("model.p.c")
    assert order.index("model.p.d") < order.index("model.p.c")


def test_a_view_upstream_that_reads_the_clock_sends_the_rollout_to_dbt() -> None:
    """A view is evaluated when the built state is read, at today's date; the fast path rebuilds under the
    pin's frozen clock. A rebuild set that reads such a view, itself or through other views, must be built by
    dbt; through a table (written under the frozen clock) or without a clock call it stays fast."""
    from dbt_harvest.harvester.grading.fast import clock_views

    views = {
        "model.p.stg_clock": ("select current_date - joined as age from raw", ()),
        "model.p.stg_plain": ("select 'current_date' as label, now_ok from raw -- now()", ()),
        "model.p.over_clock": ("select * from stg_clock", ("model.p.stg_clock",)),
    }
    nodes = {
        uid: _node(uid, compiled=sql, parents=parents, materialized="view") for uid, (sql, parents) in views.items()
    }
    nodes["model.p.frozen"] = _node(
        "model.p.frozen", compiled="select * from stg_clock", parents=("model.p.stg_clock",)
    )
    nodes["model.p.mart"] = _node("model.p.mart", parents=("model.p.over_clock", "model.p.stg_plain"))
    nodes["model.p.safe"] = _node("model.p.safe", parents=("model.p.frozen", "model.p.stg_plain"))
    assert clock_views(nodes, ["model.p.mart"]) == ["model.p.stg_clock"]  # through a view over it
    assert clock_views(nodes, ["model.p.safe"]) == []  # through a table, and a view that only names the clock
    assert clock_views(nodes, ["model.p.stg_clock", "model.p.over_clock", "model.p.mart"]) == []  # rebuilt frozen

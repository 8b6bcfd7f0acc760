"""Patches that create or delete a file (a completion task's missing model), and the record's ``kind``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbt_harvest.core.patching import PatchError, apply_patch, apply_to_text, make_patch, parse_patch
from dbt_harvest.core.task_record import TaskRecordError, kind_of_id, task_from_dict, task_id

MODEL = "select order_id,\n       amount\nfrom {{ ref('stg_orders') }}\nwhere status = 'completed'\n"


def test_a_deleting_and_a_creating_patch_round_trip_a_file(tmp_path: Path) -> None:
    delete = make_patch("models/fct.sql", MODEL, None)
    create = make_patch("models/fct.sql", None, MODEL)
    assert delete.splitlines()[:2] == ["--- a/models/fct.sql", "+++ /dev/null"]
    assert create.splitlines()[:2] == ["--- /dev/null", "+++ b/models/fct.sql"]
    (parsed_delete,), (parsed_create,) = parse_patch(delete), parse_patch(create)
    assert (parsed_delete.path, parsed_delete.deleted, parsed_delete.created) == ("models/fct.sql", True, False)
    assert (parsed_create.path, parsed_create.deleted, parsed_create.created) == ("models/fct.sql", False, True)
    assert apply_to_text(MODEL, parsed_delete) == "" and apply_to_text("", parsed_create) == MODEL

    (tmp_path / "models").mkdir()
    (tmp_path / "models/fct.sql").write_text(MODEL)
    assert apply_patch(tmp_path, delete) == ("models/fct.sql",)
    assert not (tmp_path / "models/fct.sql").exists() and (tmp_path / "models").is_dir()
    assert apply_patch(tmp_path, create) == ("models/fct.sql",)
    assert (tmp_path / "models/fct.sql").read_text() == MODEL


def test_a_creation_over_a_file_or_a_deletion_of_other_text_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models/fct.sql").write_text(MODEL)
    with pytest.raises(PatchError, match="already exists"):
        apply_patch(tmp_path, make_patch("models/fct.sql", None, "select 1\n"))
    assert (tmp_path / "models/fct.sql").read_text() == MODEL
    with pytest.raises(PatchError, match="does not match"):
        apply_patch(tmp_path, make_patch("models/fct.sql", "select 2\n", None))
    assert (tmp_path / "models/fct.sql").read_text() == MODEL
    # a deletion that would leave lines behind (the file grew since) is no deletion
    with pytest.raises(PatchError, match="whole file"):
        apply_patch(tmp_path, make_patch("models/fct.sql", MODEL.splitlines(keepends=True)[0], None))
    assert (tmp_path / "models/fct.sql").read_text() == MODEL
    with pytest.raises(PatchError, match="does not exist"):
        apply_patch(tmp_path, make_patch("models/gone.sql", "x\n", None))
    # hand-written headers that lie about what they do
    with pytest.raises(PatchError, match="both sides"):
        parse_patch("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n")
    with pytest.raises(PatchError, match="keeps or adds"):
        parse_patch("--- a/m.sql\n+++ /dev/null\n@@ -1,2 +1,1 @@\n-x\n y\n")
    with pytest.raises(PatchError, match="leaves the project"):
        parse_patch("--- a/../m.sql\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")


def _record(**changes: object) -> dict:
    broken = make_patch("models/fct.sql", MODEL, None)
    data = {
        "instance_id": task_id("acme__shop", "a" * 40, "complete", "models/fct.sql", broken),
        "pin": "acme__shop@" + "a" * 12,
        "repo": "acme/shop",
        "base_commit": "a" * 40,
        "project_dir": ".",
        "split": "train",
        "split_group": "g",
        "family": "completion",
        "operator": "complete",
        "effect": "missing_model",
        "file": "models/fct.sql",
        "broken_patch": broken,
        "fix_patch": make_patch("models/fct.sql", None, MODEL),
        "wrong_repair_patches": [],
        "grading": {"gold": "g.duckdb", "condition_tabs": ["fct"], "condition_cols": [[0]], "ignore_orders": [True]},
        "problem_statement": "write it",
        "local_checks": {"builds": False, "tests_total": 0, "tests_failed": 0},
        "gold_sha256": "b" * 64,
        "license": "MIT",
        "versions": {},
        "kind": "completion",
    }
    data.update(changes)
    return data


def test_a_completion_record_keeps_its_kind_and_a_repair_record_writes_none() -> None:
    completion = task_from_dict(_record())
    assert completion.kind == "completion" and json.loads(completion.to_json())["kind"] == "completion"
    assert kind_of_id(completion.instance_id) == "completion" and ".complete." in completion.instance_id
    repair = task_from_dict(_record(kind="repair", operator="filter.drop_conjunct", family="filter"))
    assert repair.kind == "repair" and "kind" not in json.loads(repair.to_json())  # old records keep their hashes
    assert task_from_dict(json.loads(repair.to_json())) == repair
    assert kind_of_id("acme__shop.aaaaaaaa.filter.drop_conjunct.1234abcd") == "repair"
    with pytest.raises(TaskRecordError, match="kind 'rewrite'"):
        task_from_dict(_record(kind="rewrite"))
    with pytest.raises(TaskRecordError, match="does not go with kind"):
        task_from_dict(_record(operator="filter.drop_conjunct"))
    with pytest.raises(TaskRecordError, match="does not go with kind"):
        task_from_dict(_record(kind="repair"))

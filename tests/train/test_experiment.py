"""The experiment recipe and state: what `harvest experiment` refuses before it runs anything, and the
report it writes from finished steps (the run itself is the e2e chain's, tests/e2e/test_chain.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.cli.experiment import spider2_lines
from dbt_harvest.train.errors import TrainConfigError
from dbt_harvest.train.experiment import SPIDER2_STEPS, STATE_NAME, Experiment, ExperimentError, load_recipe
from dbt_harvest.train.experiment_report import summarize, to_markdown, write_report

RECIPE = """
[experiment]
name = "exp-a"
claim = "training moves the sealed score"
output_dir = "{out}"

[train]
sft = "sft.toml"

[audit]
max_turns = 4
"""


def _recipe(tmp_path: Path, text: str = RECIPE) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(text.format(out=tmp_path / "out"))
    return path


def _spider2_checkout(folder: Path, ids: tuple[str, ...]) -> Path:
    """A folder in Spider2's layout whose metadata names ``ids`` (no projects, no databases: unplayable)."""
    (folder / "examples").mkdir(parents=True)
    (folder / "evaluation_suite" / "gold").mkdir(parents=True)
    (folder / "examples" / "spider2-dbt.jsonl").write_text(
        "".join(json.dumps({"instance_id": i, "instruction": "fix it", "type": "DBT"}) + "\n" for i in ids)
    )
    params = {"gold": "x.duckdb", "condition_tabs": ["t"], "condition_cols": [[]], "ignore_orders": [True]}
    (folder / "evaluation_suite" / "gold" / "spider2_eval.jsonl").write_text(
        "".join(
            json.dumps({"instance_id": i, "evaluation": {"func": "duckdb_match", "parameters": params}}) + "\n"
            for i in ids
        )
    )
    return folder


def _with_spider2(tmp_path: Path, value: str = "bench/spider2-dbt") -> Path:
    return _recipe(tmp_path, RECIPE.replace("max_turns = 4", f"max_turns = 4\nspider2 = {json.dumps(value)}"))


def test_a_recipe_names_its_runs_relative_to_itself(tmp_path: Path) -> None:
    recipe = load_recipe(_recipe(tmp_path))
    assert recipe.sft == tmp_path / "sft.toml" and recipe.grpo is None
    assert recipe.folder == tmp_path / "out" / "exp-a" and recipe.audit.max_turns == 4
    planned = Experiment(recipe).planned()
    assert planned == [
        "dev-base",
        "power",
        "gate-sft",
        "sft",
        "dev-trained",
        "freeze",
        "sealed-trained",
        "sealed-base",
        "compare",
        "report",
    ]


def test_a_recipe_naming_a_spider2_checkout_plans_both_arms_on_its_sealed_part(tmp_path: Path) -> None:
    from dbt_harvest.eval.spider2.split import committed

    _spider2_checkout(tmp_path / "bench" / "spider2-dbt", committed().sealed[:1])
    recipe = load_recipe(_with_spider2(tmp_path))
    assert recipe.spider2 == (tmp_path / "bench" / "spider2-dbt").resolve()  # relative to the recipe file
    assert load_recipe(_with_spider2(tmp_path, "bench")).spider2 == recipe.spider2  # or the folder holding it
    planned = Experiment(recipe).planned()
    assert planned[planned.index("sealed-base") + 1 :] == [*SPIDER2_STEPS, "compare", "report"]
    assert not set(SPIDER2_STEPS) & set(Experiment(load_recipe(_recipe(tmp_path))).planned())


@pytest.mark.parametrize(
    ("setup", "value", "message"),
    [
        (None, "nowhere", "no folder at"),
        ("empty", "bench", "is not a Spider 2.0-DBT checkout"),
        ("export", "bench", "holds none of Spider 2.0-DBT's instances"),
    ],
)
def test_a_spider2_checkout_that_cannot_be_audited_is_refused_at_load(
    tmp_path: Path, setup: str | None, value: str, message: str
) -> None:
    """Before anything runs: an experiment must not train for hours and then find its Spider2 leg cannot run
    (an export of our own tasks has no sealed part)."""
    if setup == "empty":
        (tmp_path / "bench").mkdir()
    elif setup == "export":
        _spider2_checkout(tmp_path / "bench", ("shop__orders-1",))
    path = _with_spider2(tmp_path, value)
    with pytest.raises(TrainConfigError, match=message):
        load_recipe(path)
    result = CliRunner().invoke(main, ["experiment", str(path)])
    assert result.exit_code == 1 and result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1
    assert "[audit] spider2" in result.stderr


def test_a_spider2_audit_the_ledger_holds_is_claimed_only_from_its_own_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger has this recipe's sealed Spider2 result for the trained arm, but the experiment's run folder
    is not that audit (it was run outside the experiment): the result is not claimed, nothing is played."""
    from dbt_harvest.corpora.recipe import verify_frozen
    from dbt_harvest.eval.spider2 import sealed as ledger
    from dbt_harvest.eval.spider2.split import committed
    from tests.recipes import frozen_run

    monkeypatch.setenv("HARVEST_PINS", str(tmp_path / "pins"))
    (tmp_path / "pins").mkdir()
    _spider2_checkout(tmp_path / "bench" / "spider2-dbt", committed().sealed[:1])
    frozen = verify_frozen(frozen_run(tmp_path / "runs", "claimed"))
    start = ledger.start(tmp_path / "pins", frozen, "recipe", "a" * 64)
    report = {"task_set_sha256": "a" * 64, "driver": {"name": "oracle"}, "n": 48, "official": 1, "strict": 1}
    ledger.record_result(tmp_path / "pins", start, {**report, "missing": [], "crashed": []})
    experiment = Experiment(load_recipe(_with_spider2(tmp_path)))
    experiment._done("freeze", {"run_dir": str(frozen.run_dir), "recipe": frozen.recipe, "adapter_sha256": ""}, 0.1)
    with pytest.raises(ExperimentError, match="sealed Spider2 audit outside this experiment"):
        experiment._spider2_trained()
    assert not (experiment.folder / "audits").exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("max_turns = 4", "max_turns = 4\ntemperature = 1"), "unknown key"),
        (('sft = "sft.toml"', ""), "sft must name"),
        (('claim = "training moves the sealed score"', 'claim = " "'), "claim"),
        (("max_turns = 4", 'driver = "openai"'), "hf driver"),
        (("[audit]", "[extra]"), "unknown section"),
    ],
)
def test_a_bad_recipe_is_refused_in_one_line(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = _recipe(tmp_path, RECIPE.replace(*edit))
    with pytest.raises(TrainConfigError, match=message):
        load_recipe(path)
    result = CliRunner().invoke(main, ["experiment", str(path)])
    assert result.exit_code == 1 and result.stderr.startswith("error:") and len(result.stderr.splitlines()) == 1


def test_a_recipe_changed_after_its_experiment_started_is_refused(tmp_path: Path) -> None:
    path = _recipe(tmp_path)
    experiment = Experiment(load_recipe(path))
    experiment._done("dev-base", {"run_dir": "x", "n": 2, "official": 0, "strict": 0}, 1.0)
    assert json.loads((experiment.folder / STATE_NAME).read_text())["steps"]["dev-base"]["seconds"] == 1.0
    assert Experiment(load_recipe(path)).state["steps"].keys() == {"dev-base"}  # resumed as it was
    path.write_text(path.read_text().replace("max_turns = 4", "max_turns = 5"))
    with pytest.raises(ExperimentError, match="changed since experiment 'exp-a' started"):
        Experiment(load_recipe(path))


def test_the_report_compares_base_and_trained_task_by_task(tmp_path: Path) -> None:
    recipe = load_recipe(_recipe(tmp_path))
    tasks = [
        {
            "instance_id": f"t{i}",
            "official_a": a,
            "official_b": b,
            "rung_a": "wrong",
            "rung_b": "pass" if b else "wrong",
        }
        for i, (a, b) in enumerate([(0, 1), (0, 1), (1, 1), (0, 0)])
    ]
    sealed = {
        "n": 4,
        "difference": 0.5,
        "ci_low": 0.0,
        "ci_high": 1.0,
        "p_value": 0.5,
        "summary": "trained 3/4 vs base 1/4",
        "table": {"both": 1, "only_a": 0, "only_b": 2, "neither": 1},
        "tasks": tasks,
    }
    state = {
        "steps": {
            "sealed-base": {"result": {"run_dir": "b", "n": 4, "official": 1, "strict": 1}, "seconds": 3.0},
            "sealed-trained": {"result": {"run_dir": "t", "n": 4, "official": 3, "strict": 3}, "seconds": 4.0},
            "freeze": {"result": {"recipe": "sft@abc", "run_dir": "r", "adapter_sha256": "0" * 64}, "seconds": 0.1},
            "compare": {"result": {"sealed": sealed}, "seconds": 0.2},
        }
    }
    report = summarize(recipe, state)
    assert (report["sealed"]["base"]["official"], report["sealed"]["trained"]["official"]) == (1, 3)
    text = to_markdown(report)
    assert "| `t0` | 0 | 1 | wrong → pass |" in text and "[+0.000, +1.000]" in text and "only trained 2" in text
    paths = write_report(tmp_path, recipe, state)
    assert json.loads(paths["json"].read_text())["sealed"]["difference"] == 0.5
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["spider2"] is None and "Spider 2.0-DBT" not in text and spider2_lines(report["spider2"]) == []


def test_the_report_gives_both_arms_on_spider2s_sealed_part_and_names_the_unplayable(tmp_path: Path) -> None:
    from dbt_harvest.eval.spider2.split import committed

    _spider2_checkout(tmp_path / "bench" / "spider2-dbt", committed().sealed[:1])
    recipe = load_recipe(_with_spider2(tmp_path))
    gone = {"instance_id": "s2", "status": "crashed", "reason": "not in this checkout's metadata"}
    crashed = {"instance_id": "s3", "status": "crashed", "reason": "the model ran out of memory"}
    says = {
        "base": "evaluate.py stops with an error and prints no score (no instance is submitted: evaluate.py divides by zero)",
        "trained": "evaluate.py prints: 1.0 1 1 (1/1 over the submitted instances only)",
    }

    def arm(name: str, official: int, unplayable: list) -> dict:
        evaluate = {"line": "1.0 1 1" if official else "", "says": says[name]}
        return {
            "run_dir": name,
            "n": 3,
            "official": official,
            "strict": official,
            "evaluate_py": evaluate,
            "unplayable": unplayable,
        }

    compared = {
        "n": 3,
        "difference": 1 / 3,
        "ci_low": 0.0,
        "ci_high": 1.0,
        "p_value": 1.0,
        "summary": "trained 1/3 vs base 0/3 (+1 tasks; 1 gained, 0 lost): NOT distinguishable from noise",
        "table": {"both": 0, "only_a": 0, "only_b": 1, "neither": 2},
        "tasks": [
            {
                "instance_id": i,
                "official_a": 0,
                "official_b": int(i == "s1"),
                "rung_a": 0,
                "rung_b": 6 if i == "s1" else 0,
            }
            for i in ("s1", "s2", "s3")
        ],
    }
    state = {
        "steps": {
            "spider2-base": {"result": arm("base", 0, [gone, crashed]), "seconds": 1.0},
            "spider2-trained": {"result": arm("trained", 1, [gone]), "seconds": 1.0},
            "compare": {"result": {"spider2": compared}, "seconds": 0.1},
        }
    }
    report = summarize(recipe, state)
    part = report["spider2"]
    assert part["checkout"] == str(recipe.spider2) and part["difference"] == 1 / 3
    assert [(u["instance_id"], u["arms"]) for u in part["unplayable"]] == [
        ("s2", ["base", "trained"]),
        ("s3", ["base"]),
    ]
    text = to_markdown(report)
    assert "## Spider 2.0-DBT, sealed part (each arm audited once)" in text
    assert f"| base (no adapter) | 0/3 | {says['base']} |" in text and f"| trained | 1/3 | {says['trained']} |" in text
    assert "| `s1` | 0 | 1 | 0 → 6 |" in text and "only trained 1" in text
    assert "2 instance(s) could not be played; each counts 0 in its arm's k/N:" in text
    assert "- `s2` (base, trained): not in this checkout's metadata" in text
    assert "- `s3` (base): the model ran out of memory" in text
    assert spider2_lines(part) == [
        f"spider2 sealed: base 0/3 ({says['base']})",
        f"spider2 sealed: trained 1/3 ({says['trained']})",
        f"spider2 sealed: {compared['summary']}",
        "spider2 sealed: 2 instance(s) could not be played and count 0: s2, s3 (report.md names them all)",
    ]
    paths = write_report(tmp_path, recipe, state)
    assert json.loads(paths["json"].read_text())["spider2"]["unplayable"][1]["arms"] == ["base"]
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_base_arm_plays_the_recipes_base_without_an_adapter(tmp_path: Path) -> None:
    from dbt_harvest.corpora.recipe import ADAPTER_DIR, verify_frozen
    from dbt_harvest.eval.audit.sealed import SealedAuditError, recipe_driver_options
    from tests.recipes import frozen_run

    frozen = verify_frozen(frozen_run(tmp_path / "runs", "arms"))
    trained = recipe_driver_options(frozen, "copy/of-base", None)
    base = recipe_driver_options(frozen, "copy/of-base", None, "base")
    assert trained["adapter"] == str(frozen.run_dir / ADAPTER_DIR) and base["adapter"] is None
    assert trained["model"] == base["model"] == "copy/of-base" and trained["revision"] == base["revision"]
    with pytest.raises(SealedAuditError, match="without an adapter"):
        recipe_driver_options(frozen, "", str(frozen.run_dir / ADAPTER_DIR), "base")


def test_evaluate_py_is_read_from_the_databases_an_audit_kept(tmp_path: Path) -> None:
    """The line the official evaluate.py prints (k/M over the submitted), or why it prints none, from the
    results folder a Spider2 audit kept, graded against the checkout's gold."""
    import duckdb

    from dbt_harvest.train.experiment import evaluate_py

    checkout = _spider2_checkout(tmp_path / "bench", ("s1", "s2"))
    results = tmp_path / "results"
    for folder in (checkout / "evaluation_suite" / "gold" / "s1", results / "s1", results / "s2"):
        folder.mkdir(parents=True)
        con = duckdb.connect(str(folder / "x.duckdb"))
        con.execute("create table t as select 1 as a")
        con.close()
    (results / "results_metadata.jsonl").write_text("")
    assert evaluate_py(results, checkout)["stops"] == "no instance is submitted: evaluate.py divides by zero"
    lines = [{"instance_id": i, "answer_type": "file", "answer_or_path": "x.duckdb"} for i in ("s1", "s2")]
    (results / "results_metadata.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    said = evaluate_py(results, checkout)  # s2's gold is absent: it scores 0 and is still submitted
    assert (said["line"], said["official"], said["submitted"], said["stops"]) == ("0.5 1 2", 1, 2, "")
    assert said["says"] == "evaluate.py prints: 0.5 1 2 (1/2 over the submitted instances only)"

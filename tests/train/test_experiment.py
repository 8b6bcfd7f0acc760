"""The experiment recipe and state: what `harvest experiment` refuses before it runs anything, and the
report it writes from finished steps (the run itself is the e2e chain's, tests/e2e/test_chain.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.train.errors import TrainConfigError
from dbt_harvest.train.experiment import STATE_NAME, Experiment, ExperimentError, load_recipe
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

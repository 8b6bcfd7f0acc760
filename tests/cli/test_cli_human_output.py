"""Human output: ids are never cut in tables (piped at 80 columns), and records are lines, not dict reprs."""

from __future__ import annotations

import click
from click.testing import CliRunner

from dbt_harvest.cli._tables import id_table, print_table
from dbt_harvest.cli.mint import _run_line
from dbt_harvest.cli.tasks import _grading_lines
from dbt_harvest.core.scorer.spec import GradingSpec

LONG_ID = "acme__a-very-long-repository-name@0123456789ab__models-marts-fct_orders__filter.drop_filter__3f2a9c"


def test_a_long_task_id_is_printed_whole_in_a_table() -> None:
    @click.command()
    def show() -> None:
        table = id_table("task", "split", "family", "operator", "local checks", ids=("task",))
        table.add_row(LONG_ID, "train", "filter", "filter.drop_filter", "silent")
        print_table(table)

    result = CliRunner().invoke(show, env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert LONG_ID in result.stdout, result.stdout
    assert "…" not in result.stdout


def test_grading_spec_and_mint_counts_read_as_lines() -> None:
    spec = GradingSpec("abc.duckdb", ("orders", "customers"), ((0, 2), ()), (True, False))
    lines = _grading_lines(spec)
    assert lines == [
        "gold: abc.duckdb",
        "graded: table orders, gold columns 0, 2 (by index), row order ignored",
        "graded: table customers, every gold column, row order checked",
    ]
    counts = {"candidates": 40, "screened_out": 31, "confirm_rejected": 3, "kept": 6}
    line = _run_line(counts)
    assert line == "40 candidates, 31 screened out, 3 rejected at confirm, 6 kept"
    assert "{" not in line and "{" not in "".join(lines)


def test_help_texts_say_what_options_mean() -> None:
    from dbt_harvest.cli import main

    runner = CliRunner()

    def help_of(*args: str) -> str:
        result = runner.invoke(main, [*args, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return " ".join(result.stdout.split())

    mint = help_of("mint")
    assert "At most this many tasks per dbt model file" in mint and "Seed of the candidate order" in mint
    audit = help_of("audit")
    for said in (
        "oracle applies each task's true fix",
        "noop submits the broken project unchanged",
        "wrong applies the task's confirmed wrong repair",
        "openai: the model name",
        "hf: a local model folder",
    ):
        assert said in audit, said
    for kind, trl_name in (("sft", "SFTConfig"), ("grpo", "GRPOConfig")):
        text = help_of("train", kind)
        assert "[train] max_steps" in text and f"any other field of trl's {trl_name}" in text
        assert f"train/configs/{kind}-qwen-4b.toml" in text
    assert ("[grpo] mode" in help_of("train", "grpo")) and ("[grpo]" not in help_of("train", "sft"))
    score = help_of("score")
    assert "--fail-under" in score and "even at score 0" in score

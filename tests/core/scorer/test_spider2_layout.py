"""Spider 2.0-DBT results folders read as the official ``evaluate.py`` reads them.

Each layout case is written to disk (gold metadata, results metadata, DuckDB files) with the verdicts the
official driver gives it written down here, so CI checks the layout logic without the official code.
Where ``SPIDER2_DIR`` points at a local copy of the Spider2 repository, the same folders also go through
the official ``evaluate.py`` run as a script, and every verdict this project states must be the one it
prints (differential); cases the project reports as not mirrored are only listed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.scorer.spider2 import (
    CRASHES,
    FIXED,
    GRADED,
    NOT_MIRRORED,
    NOT_SUBMITTED,
    Spider2LayoutError,
    Spider2Report,
    read_jsonl_text,
    score_folder,
)

from . import spider2_official as official_code

GOLD_SQL = (
    "CREATE TABLE orders AS SELECT range AS id, range * 1.5 AS amount FROM range(5);"
    "CREATE TABLE notes AS SELECT 'n' || range AS note FROM range(2)"
)
WRONG_SQL = GOLD_SQL.replace("range * 1.5", "range * 2.5")
REVERSED_SQL = GOLD_SQL.replace("FROM range(5)", "FROM range(5) ORDER BY range DESC")
PRED = {"gold": GOLD_SQL, "wrong": WRONG_SQL, "reversed": REVERSED_SQL}
DROP = object()  # a parameter or key left out of a line


def params(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "gold": "shop.duckdb",
        "condition_tabs": ["orders"],
        "condition_cols": [[0, 1]],
        "ignore_orders": [True],
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not DROP}


def duck(**changes: Any) -> dict[str, Any]:
    return {"func": "duckdb_match", "parameters": params(**changes)}


FILE = {"answer_type": "file", "answer_or_path": "shop.duckdb"}


@dataclass(frozen=True)
class Case:
    """One instance of a layout case and the official driver's verdict on it: (status, official, honest)."""

    iid: str
    expect: tuple[str, int | None, int]
    evaluation: Any = field(default_factory=duck)
    result: dict[str, Any] | None = field(default_factory=lambda: dict(FILE))
    pred: str | None = "gold"  # PRED key, or None for no file
    pred_at: str = "shop.duckdb"  # under <results>/<iid>/
    gold_file: bool = True


CASES: tuple[Case, ...] = (
    Case("pass", (GRADED, 1, 1)),
    Case("wrong_values", (GRADED, 0, 0), pred="wrong"),
    Case("missing_file", (GRADED, 0, 0), pred=None),
    Case("not_submitted", (NOT_SUBMITTED, None, 0), result=None),
    Case(
        "subfolder_path",
        (GRADED, 1, 1),
        result={"answer_type": "file", "answer_or_path": "out/shop.duckdb"},
        pred_at="out/shop.duckdb",
    ),
    # the project used to resolve answer_or_path against <results>; officially it is <results>/<iid>/
    Case(
        "path_relative_to_results",
        (GRADED, 0, 0),
        result={"answer_type": "file", "answer_or_path": "path_relative_to_results/shop.duckdb"},
    ),
    Case("answer_type_answer", (FIXED, 0, 0), result={"answer_type": "answer", "answer_or_path": "shop.duckdb"}),
    Case("answer_type_other", (FIXED, 0, 0), result={"answer_type": "db", "answer_or_path": "shop.duckdb"}),
    Case("list_last_entry_decides_pass", (GRADED, 1, 1), pred="wrong", evaluation=[duck(), duck(condition_cols=[[0]])]),
    Case("list_last_entry_decides_fail", (GRADED, 0, 0), pred="wrong", evaluation=[duck(condition_cols=[[0]]), duck()]),
    Case("list_unknown_func_after", (GRADED, 1, 1), evaluation=[duck(), {"func": "foo_match", "parameters": {}}]),
    Case("list_empty", (FIXED, 0, 0), evaluation=[]),
    Case("unknown_func", (FIXED, 0, 0), evaluation={"func": "foo_match", "parameters": params()}),
    Case(
        "tabs_absent_all_gold_tables",
        (GRADED, 1, 1),
        evaluation=duck(condition_tabs=DROP, condition_cols=DROP, ignore_orders=DROP),
    ),
    Case(
        "tabs_absent_missing_file",
        (GRADED, 0, 0),
        pred=None,
        evaluation=duck(condition_tabs=DROP, condition_cols=DROP, ignore_orders=DROP),
    ),
    Case("orders_absent_means_ordered", (GRADED, 0, 0), pred="reversed", evaluation=duck(ignore_orders=DROP)),
    Case("orders_true_reordered", (GRADED, 1, 1), pred="reversed"),
    Case("cols_absent_means_all", (GRADED, 0, 0), pred="wrong", evaluation=duck(condition_cols=DROP)),
    Case("cols_subset_ignores_the_rest", (GRADED, 1, 1), pred="wrong", evaluation=duck(condition_cols=[[0]])),
    Case("cols_entry_empty_means_all", (GRADED, 1, 1), evaluation=duck(condition_cols=[[]])),
    Case(
        "tabs_empty_passes_anything",
        (FIXED, 1, 0),
        pred=None,
        evaluation=duck(condition_tabs=[], condition_cols=[], ignore_orders=[]),
    ),
    Case("orders_length_mismatch", (FIXED, 0, 0), evaluation=duck(ignore_orders=[True, True])),
    Case("cols_length_mismatch", (FIXED, 0, 0), evaluation=duck(condition_cols=[])),
    Case("unknown_parameter", (FIXED, 0, 0), evaluation=duck(extra=1)),
    Case("gold_file_missing", (FIXED, 0, 0), gold_file=False),
    Case("gold_position_out_of_range", (FIXED, 0, 0), evaluation=duck(condition_cols=[[0, 7]])),
    Case(
        "results_line_replaces_evaluation",
        (GRADED, 1, 0),
        pred="wrong",
        result={**FILE, "evaluation": duck(condition_cols=[[0]])},
    ),
    Case("negative_position", (NOT_MIRRORED, None, 0), evaluation=duck(condition_cols=[[-1]])),
    Case(
        "string_match_answer",
        (NOT_MIRRORED, None, 0),
        evaluation={"func": "string_match", "parameters": {"gold": ["shop"]}},
        result={"answer_type": "answer", "answer_or_path": "the shop"},
    ),
    Case(
        "table_match_file",
        (NOT_MIRRORED, None, 0),
        evaluation={"func": "table_match", "parameters": {"gold": "g.csv"}},
        result={"answer_type": "file", "answer_or_path": "r.csv"},
    ),
)


def make_db(path: Path, sql: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


def write_jsonl(path: Path, lines: list[Any], raw: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(raw if raw is not None else "".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def build(
    root: Path,
    cases: tuple[Case, ...],
    results_raw: Callable[[list[dict[str, Any]]], str] | None = None,
    extra_results: tuple[dict[str, Any], ...] = (),
) -> tuple[Path, Path]:
    """Write the gold folder and the results folder of ``cases``; return (results, gold)."""
    gold, results = root / "gold", root / "results"
    gold_lines, result_lines = [], []
    for case in cases:
        gold_lines.append(
            {"instance_id": case.iid} | ({} if case.evaluation is DROP else {"evaluation": case.evaluation})
        )
        if case.gold_file:
            make_db(gold / case.iid / "shop.duckdb", GOLD_SQL)
        if case.result is not None:
            result_lines.append({"instance_id": case.iid, **case.result})
        if case.pred is not None:
            make_db(results / case.iid / case.pred_at, PRED[case.pred])
    result_lines.extend(extra_results)
    write_jsonl(gold / "spider2_eval.jsonl", gold_lines)
    write_jsonl(results / "results_metadata.jsonl", result_lines, results_raw(result_lines) if results_raw else None)
    return results, gold


def verdicts(report: Spider2Report) -> dict[str, tuple[str, int | None, int]]:
    return {r.instance_id: (r.status, r.official, r.score) for r in report.instances}


def agreement(report: Spider2Report, results: Path, gold: Path) -> tuple[int, list[str]]:
    """Run the official evaluate.py on the folder; every verdict the report states must be what it prints.
    Returns (instances compared, instances the report left unstated)."""
    run = official_code.run_official(results, gold)
    assert run.crashed == bool(report.official_crash), (run, report.official_crash)
    if run.crashed:
        return 0, []
    if report.official_line:
        assert run.last_line == report.official_line
    assert run.submitted == report.submitted
    stated = [r for r in report.instances if r.official is not None and r.submitted]
    for r in stated:
        assert (r.instance_id in run.passed) == (r.official == 1), (r, run.passed)
    return len(stated), [r.instance_id for r in report.instances if r.status == NOT_MIRRORED]


needs_official = pytest.mark.skipif(official_code.locate()[0] is None, reason=official_code.locate()[1] or "x")


# --------------------------------------------------------------------------------------- our own verdicts


def test_every_layout_case_gets_the_official_verdict(tmp_path: Path) -> None:
    results, gold = build(tmp_path, CASES)
    report = score_folder(results, gold)
    assert verdicts(report) == {c.iid: c.expect for c in CASES}
    by_id = {r.instance_id: r for r in report.instances}
    assert by_id["missing_file"].reason == "missing file"
    assert by_id["path_relative_to_results"].reason == "missing file"
    assert "last" not in by_id["pass"].reason and by_id["pass"].strict == 1
    assert by_id["results_line_replaces_evaluation"].task_problem.endswith("evaluation")
    assert by_id["tabs_empty_passes_anything"].task_problem.startswith("no table to grade")
    assert "table_match" in by_id["table_match_file"].reason
    assert report.total == len(CASES) and report.submitted == len(CASES) - 1
    assert report.official_unknown == 3 and report.official_line == ""  # three verdicts are not mirrored
    honest = sum(c.expect[2] for c in CASES)
    assert report.score == honest and report.official_score == sum(1 for c in CASES if c.expect[1] == 1)


def absolute_and_duplicate(root: Path) -> tuple[tuple[Case, ...], Path, Path]:
    make_db(root / "elsewhere" / "shop.duckdb", GOLD_SQL)
    cases = (
        Case(
            "absolute",
            (GRADED, 1, 1),
            pred=None,
            result={"answer_type": "file", "answer_or_path": str(root / "elsewhere" / "shop.duckdb")},
        ),
        Case("duplicate", (GRADED, 0, 0)),
    )
    results, gold = build(
        root,
        cases,
        extra_results=(
            {"instance_id": "duplicate", **FILE, "answer_or_path": "no.duckdb"},
            {"instance_id": "stranger", **FILE},
        ),
    )
    return cases, results, gold


def test_absolute_paths_and_duplicate_lines_follow_os_path_join_and_the_last_line(tmp_path: Path) -> None:
    cases, results, gold = absolute_and_duplicate(tmp_path)
    report = score_folder(results, gold)
    assert verdicts(report) == {c.iid: c.expect for c in cases}
    assert report.extra_results == ("stranger",)
    assert report.official_line == "0.5 1 2"


def test_reading_stops_at_the_first_line_that_is_not_json(tmp_path: Path) -> None:
    cases = (Case("first", (GRADED, 1, 1)), Case("after_blank", (NOT_SUBMITTED, None, 0)))
    results, gold = build(
        tmp_path, cases, results_raw=lambda lines: json.dumps(lines[0]) + "\n\n" + json.dumps(lines[1]) + "\n"
    )
    report = score_folder(results, gold)
    assert verdicts(report) == {c.iid: c.expect for c in cases}
    assert report.results_stopped.startswith("results_metadata.jsonl line 2")
    assert report.official_line == "1.0 1 1"
    read = read_jsonl_text('{"a": 1}\r\n{"b": 2}\r\n')
    assert read.records == ({"a": 1}, {"b": 2}) and read.stopped == ""
    assert read_jsonl_text('\ufeff{"a": 1}\n').stopped.startswith("line 1")


CRASH_CASES: dict[str, tuple[tuple[Case, ...], str]] = {
    "files_with_duckdb_parameters": (
        (Case("a", (CRASHES, None, 0), result={"answer_type": "files", "answer_or_path": ["shop.duckdb"]}),),
        "tables_match",
    ),
    "no_answer_type": ((Case("a", (CRASHES, None, 0), result={"answer_or_path": "shop.duckdb"}),), "answer_type"),
    "sql_answer": (
        (Case("a", (NOT_MIRRORED, None, 0), result={"answer_type": "file", "answer_or_path": "q.sql"}),),
        "",
    ),
    "answer_with_empty_evaluation": (
        (Case("a", (CRASHES, None, 0), evaluation=[], result={"answer_type": "answer", "answer_or_path": "x"}),),
        "max()",
    ),
    "path_not_a_string": (
        (Case("a", (CRASHES, None, 0), result={"answer_type": "file", "answer_or_path": 3}),),
        "not a string",
    ),
    "entry_without_func": ((Case("a", (CRASHES, None, 0), evaluation=[{"parameters": {}}]),), "func"),
    "parameters_without_gold": ((Case("a", (CRASHES, None, 0), evaluation=duck(gold=DROP)),), "gold"),
    "gold_line_without_evaluation": ((Case("a", (CRASHES, None, 0), evaluation=DROP),), "evaluation"),
    "nothing_submitted": ((Case("a", (NOT_SUBMITTED, None, 0), result=None),), ""),
}


@pytest.mark.parametrize("name", sorted(CRASH_CASES))
def test_lines_that_stop_the_official_run_are_reported(name: str, tmp_path: Path) -> None:
    cases, word = CRASH_CASES[name]
    results, gold = build(tmp_path, cases)
    report = score_folder(results, gold)
    assert verdicts(report) == {c.iid: c.expect for c in cases}
    if name == "sql_answer":  # with no BigQuery credentials it stops too; with them it queries BigQuery
        assert "BigQuery" in report.instances[0].reason
        return
    assert report.official_crash and word in report.official_crash and report.official_line == ""


LAYOUT_ERRORS: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "no_results_metadata": (lambda r, g: (r / "results_metadata.jsonl").unlink(), "has no results_metadata.jsonl"),
    "second_jsonl_in_results": (lambda r, g: (r / "notes.jsonl").write_text(""), "other .jsonl files (notes.jsonl)"),
    "second_jsonl_in_gold": (lambda r, g: (g / "old.jsonl").write_text(""), "other .jsonl files (old.jsonl)"),
    "results_line_without_id": (
        lambda r, g: write_jsonl(r / "results_metadata.jsonl", [FILE]),
        "without an instance_id",
    ),
    "results_line_not_an_object": (
        lambda r, g: write_jsonl(r / "results_metadata.jsonl", [[1]]),
        "without an instance_id",
    ),
    "gold_line_not_json": (lambda r, g: (g / "spider2_eval.jsonl").write_text("{\n"), "stops reading the gold"),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_ERRORS))
def test_folders_the_official_driver_refuses_are_refused_with_a_fix(name: str, tmp_path: Path) -> None:
    results, gold = build(tmp_path, (Case("a", (GRADED, 1, 1)),))
    spoil, message = LAYOUT_ERRORS[name]
    spoil(results, gold)
    with pytest.raises(Spider2LayoutError, match=message.replace("(", r"\(").replace(")", r"\)")):
        score_folder(results, gold)


def test_gold_alias_is_recorded_and_never_renames(tmp_path: Path) -> None:
    results, gold = build(tmp_path, (Case("renamed", (FIXED, 0, 0), gold_file=False),))
    make_db(gold / "renamed" / "shipped.duckdb", GOLD_SQL)
    plain = score_folder(results, gold).instances[0]
    assert "shipped.duckdb" in plain.reason and plain.task_problem
    aliased = score_folder(results, gold, {"renamed": "shipped.duckdb"}).instances[0]
    assert (aliased.status, aliased.official, aliased.score) == (GRADED, 1, 1)
    assert aliased.gold_alias is not None and aliased.gold_alias.expected_name == "shop.duckdb"
    assert not (gold / "renamed" / "shop.duckdb").exists()
    with pytest.raises(Spider2LayoutError, match="unknown instance"):
        score_folder(results, gold, {"nope": "x.duckdb"})


def test_cli_prints_the_honest_and_the_official_figures(tmp_path: Path) -> None:
    cases = (
        Case("pass", (GRADED, 1, 1)),
        Case("wrong", (GRADED, 0, 0), pred="wrong"),
        Case("not_submitted", (NOT_SUBMITTED, None, 0), result=None),
    )
    results, gold = build(tmp_path, cases)
    runner = CliRunner(env={"HARVEST_PROGRESS_INTERVAL": "0"})
    text = runner.invoke(main, ["score", "--spider2", "--results", str(results), "--gold", str(gold)])
    assert text.exit_code == 0, text.output
    # progress goes to stderr, counted; stdout holds the report alone
    assert "score: 3/3 instances" in text.stderr and "score:" not in text.stdout
    assert "1/3 over all instances" in text.output
    assert "evaluate.py prints: 0.5 1 2 (1/2 over the submitted instances only)" in text.output
    data = json.loads(
        runner.invoke(main, ["score", "--spider2", "--results", str(results), "--gold", str(gold), "--json"]).stdout
    )
    assert (data["score"], data["total"], data["official_score"], data["submitted"]) == (1, 3, 1, 2)
    assert data["official_line"] == "0.5 1 2"
    (results / "results_metadata.jsonl").unlink()
    bad = runner.invoke(main, ["score", "--spider2", "--results", str(results), "--gold", str(gold)])
    assert bad.exit_code == 1 and bad.output.startswith("error: results folder") and bad.output.count("\n") == 1


# --------------------------------------------------------------------------------- against the official code


@needs_official
def test_differential_against_the_official_evaluate_py(tmp_path: Path) -> None:
    compared, abstained = 0, []
    folders = [("cases", CASES, None)]
    folders += [
        (f"crash-{name}", cases, None) for name, (cases, _) in sorted(CRASH_CASES.items()) if name != "sql_answer"
    ]
    folders.append(
        (
            "stop",
            (Case("first", (GRADED, 1, 1)), Case("after_blank", (NOT_SUBMITTED, None, 0))),
            lambda lines: json.dumps(lines[0]) + "\n\n" + json.dumps(lines[1]) + "\n",
        )
    )
    for name, cases, raw in folders:
        results, gold = build(tmp_path / name, cases, raw)
        n, left = agreement(score_folder(results, gold), results, gold)
        compared += n
        abstained += left
    _, results, gold = absolute_and_duplicate(tmp_path / "absolute")
    n, _ = agreement(score_folder(results, gold), results, gold)
    compared += n
    for name, (spoil, _) in sorted(LAYOUT_ERRORS.items()):
        results, gold = build(tmp_path / f"layout-{name}", (Case("a", (GRADED, 1, 1)),))
        spoil(results, gold)
        with pytest.raises(Spider2LayoutError):
            score_folder(results, gold)
        assert official_code.run_official(results, gold).crashed, name
    # a .sql answer: evaluate.py reads it and runs it on BigQuery; without credentials (CI) it stops
    results, gold = build(tmp_path / "sql", CRASH_CASES["sql_answer"][0])
    assert score_folder(results, gold).instances[0].status == NOT_MIRRORED
    assert official_code.run_official(results, gold).crashed
    print(
        f"\nofficial evaluate.py agrees on {compared} stated verdicts, {len(LAYOUT_ERRORS)} refused folders and "
        f"{len(CRASH_CASES) - 1} stopped runs; not mirrored: {', '.join(abstained)}"
    )
    assert compared >= len(CASES) - 4

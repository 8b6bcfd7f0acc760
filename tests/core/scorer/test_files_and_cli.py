"""File handling, safety, gold-side errors, explain, and the `harvest score` command end to end."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.scorer import GoldTableError, GradingSpec, explain, official, score, strict

GOLD_SQL = "CREATE TABLE orders AS SELECT range AS id, range * 1.5 AS amount, 'c' || range AS customer FROM range(12)"
SPEC = GradingSpec("shop.duckdb", ("orders",), ((0, 1, 2),), (True,))


def make_db(path: Path, *sql: str) -> Path:
    con = duckdb.connect(str(path))
    for stmt in sql:
        con.execute(stmt)
    con.close()
    return path


@pytest.fixture()
def gold(tmp_path: Path) -> Path:
    return make_db(tmp_path / "gold.duckdb", GOLD_SQL)


def test_identical_file_passes_both(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", GOLD_SQL)
    result = score(gold, pred, SPEC)
    assert (result.official.score, result.strict.score) == (1, 1)
    assert result.official.reason == ""


def test_missing_file_scores_zero_with_reason(gold: Path, tmp_path: Path) -> None:
    verdict = official(gold, tmp_path / "absent.duckdb", SPEC)
    assert (verdict.score, verdict.reason) == (0, "missing file")
    assert not (tmp_path / "absent.duckdb").exists()  # never created, unlike duckdb.connect


def test_unreadable_file_scores_zero(gold: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database" * 100)
    verdict = official(gold, junk, SPEC)
    assert verdict.score == 0 and verdict.reason.startswith("unreadable file")


def test_missing_table_reason(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", "CREATE TABLE other AS SELECT 1 AS x")
    assert official(gold, pred, SPEC).reason == "missing table orders"


def test_row_count_reason(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", GOLD_SQL.replace("range(12)", "range(10)"))
    assert official(gold, pred, SPEC).reason == "row count 10 != 12 in table orders"


def test_unmatched_column_reason_and_explanation(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", GOLD_SQL.replace("range * 1.5", "range * 1.5 + 1"))
    assert official(gold, pred, SPEC).reason == "unmatched column 1 of table orders"
    text = explain(gold, pred, SPEC).to_text()
    assert "gold column 1 (amount): UNMATCHED; closest" in text and "differing values" in text
    assert "gold column 0 (id) <- id" in text


def test_strict_catches_rows_scrambled_across_columns(gold: Path, tmp_path: Path) -> None:
    pred = make_db(
        tmp_path / "pred.duckdb",
        "CREATE TABLE orders AS SELECT range AS id, (11 - range) * 1.5 AS amount, 'c' || range AS customer FROM range(12)",
    )
    assert official(gold, pred, SPEC).score == 1
    verdict = strict(gold, pred, SPEC)
    assert verdict.score == 0 and "rows differ" in verdict.reason


def test_view_reading_a_file_fails_closed(gold: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("id,amount,customer\n" + "".join(f"{i},{i * 1.5},c{i}\n" for i in range(12)))
    pred = make_db(tmp_path / "pred.duckdb", f"CREATE VIEW orders AS SELECT * FROM read_csv('{secret}')")
    verdict = official(gold, pred, SPEC)
    assert verdict.score == 0 and verdict.reason.startswith("unreadable table orders")


def test_gold_side_failures_raise(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", GOLD_SQL)
    with pytest.raises(GoldTableError, match="does not exist"):
        official(tmp_path / "nope.duckdb", pred, SPEC)
    with pytest.raises(GoldTableError, match="gold table customers"):
        official(gold, pred, GradingSpec("g", ("customers",), ((),), (True,)))
    with pytest.raises(GoldTableError, match="out of range"):
        official(gold, pred, GradingSpec("g", ("orders",), ((7,),), (True,)))


def test_cli_single_instance(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", GOLD_SQL.replace("range(12)", "range(11)"))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC.to_dict()))
    runner = CliRunner()
    out = runner.invoke(main, ["score", "--gold", str(gold), "--pred", str(pred), "--spec", str(spec)])
    assert out.exit_code == 0 and "official 0  (row count 11 != 12 in table orders)" in out.output
    js = runner.invoke(main, ["score", "--gold", str(gold), "--pred", str(pred), "--spec", str(spec), "--json"])
    assert json.loads(js.output)["official"]["score"] == 0
    usage = runner.invoke(main, ["score", "--gold", str(gold)])
    assert usage.exit_code == 2
    # CI: --fail-under makes a score below it exit 1, after the report; at or above it exit 0
    args = ["score", "--gold", str(gold), "--pred", str(pred), "--spec", str(spec)]
    failing = runner.invoke(main, [*args, "--fail-under", "1"])
    assert failing.exit_code == 1 and "official 0" in failing.stdout
    assert failing.stderr.strip() == "error: official score 0 is below --fail-under 1", failing.stderr
    assert runner.invoke(main, [*args, "--fail-under", "0"]).exit_code == 0
    passing = runner.invoke(
        main, ["score", "--gold", str(gold), "--pred", str(gold), "--spec", str(spec), "--json", "--fail-under", "1"]
    )
    assert passing.exit_code == 0 and json.loads(passing.stdout)["official"]["score"] == 1


@pytest.mark.parametrize("text", ["{not json", '{"gold": "g.duckdb"}', "[1, 2]", '{"condition_tabs": 3}'])
def test_cli_malformed_spec_is_a_usage_error(gold: Path, tmp_path: Path, text: str) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(text)
    result = CliRunner().invoke(main, ["score", "--gold", str(gold), "--pred", str(gold), "--spec", str(spec)])
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("Usage: ") and lines[-1].startswith("Error: Invalid value for --spec: "), lines


def test_installed_versions_are_the_verified_ones() -> None:
    from dbt_harvest.core.scorer import VERIFIED_DUCKDB, VERIFIED_PANDAS, versions_verified

    assert versions_verified(), f"scorer verified under pandas {VERIFIED_PANDAS} + duckdb {VERIFIED_DUCKDB}"


def test_explanation_serialises(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", "CREATE TABLE other AS SELECT 1 AS x")
    data = explain(gold, pred, SPEC).to_dict()
    assert data["official"]["reason"] == "missing table orders"
    assert data["tables"][0]["found"] is False and "schema main" in data["tables"][0]["looked_in"]

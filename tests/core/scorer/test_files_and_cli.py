"""File handling, safety, gold-side errors, explain, and the `harvest score` command end to end."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from core.scorer import GoldTableError, GradingSpec, explain, official, score, strict
from core.scorer.spider2 import score_folder
from cli import main

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


def _spider2_layout(tmp_path: Path) -> tuple[Path, Path]:
    gold_dir, results = tmp_path / "gold", tmp_path / "results"
    lines = []
    for iid, name in [("shop001", "shop.duckdb"), ("shop002", "shop.duckdb"), ("renamed001", "wanted.duckdb"),
                      ("nogold001", "x.duckdb")]:
        params = {"gold": name, "condition_tabs": ["orders"], "condition_cols": [[0, 1]], "ignore_orders": [True]}
        lines.append(json.dumps({"instance_id": iid, "evaluation": {"func": "duckdb_match", "parameters": params}}))
    gold_dir.mkdir()
    (gold_dir / "spider2_eval.jsonl").write_text("\n".join(lines) + "\n")
    for iid in ("shop001", "shop002"):
        (gold_dir / iid).mkdir()
        make_db(gold_dir / iid / "shop.duckdb", GOLD_SQL)
    (gold_dir / "renamed001").mkdir()
    make_db(gold_dir / "renamed001" / "shipped.duckdb", GOLD_SQL)
    for iid, name in [("shop001", "shop.duckdb"), ("renamed001", "wanted.duckdb"), ("nogold001", "x.duckdb")]:
        (results / iid).mkdir(parents=True)
        make_db(results / iid / name, GOLD_SQL)
    return gold_dir, results


def test_spider2_folder_counts_all_instances_and_fails_closed(tmp_path: Path) -> None:
    gold_dir, results = _spider2_layout(tmp_path)
    report = score_folder(results, gold_dir).to_dict()
    by_id = {r["instance_id"]: r for r in report["instances"]}
    assert (report["score"], report["total"], report["scoreable"]) == (1, 4, 2)
    assert by_id["shop002"]["reason"] == "missing file"
    assert "shipped.duckdb" in by_id["renamed001"]["reason"] and not by_id["renamed001"]["scoreable"]
    aliased = score_folder(results, gold_dir, {"renamed001": "shipped.duckdb"}).to_dict()
    entry = {r["instance_id"]: r for r in aliased["instances"]}["renamed001"]
    assert entry["official"] == 1 and entry["gold_alias"]["expected_name"] == "wanted.duckdb"
    assert len(entry["gold_alias"]["sha256"]) == 64
    assert not (gold_dir / "renamed001" / "wanted.duckdb").exists()


def test_cli_spider2_json_and_text(tmp_path: Path) -> None:
    gold_dir, results = _spider2_layout(tmp_path)
    runner = CliRunner()
    out = runner.invoke(main, ["score", "--spider2", "--results", str(results), "--gold", str(gold_dir), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert {k: data[k] for k in ("score", "total", "scoreable")} == {"score": 1, "total": 4, "scoreable": 2}
    assert {"instance_id", "official", "strict", "reason"} <= set(data["instances"][0])
    text = runner.invoke(main, ["score", "--spider2", "--results", str(results), "--gold", str(gold_dir),
                                "--gold-alias", "renamed001=shipped.duckdb"])
    assert text.exit_code == 0 and "official 2/4 over all instances" in text.output
    bad = runner.invoke(main, ["score", "--spider2", "--results", str(results), "--gold", str(gold_dir),
                               "--gold-alias", "unknown=x.duckdb"])
    assert bad.exit_code == 1 and bad.output.startswith("error: gold alias names unknown instance")


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


def test_installed_versions_are_the_verified_ones() -> None:
    from core.scorer import VERIFIED_DUCKDB, VERIFIED_PANDAS, versions_verified

    assert versions_verified(), f"scorer verified under pandas {VERIFIED_PANDAS} + duckdb {VERIFIED_DUCKDB}"


def test_explanation_serialises(gold: Path, tmp_path: Path) -> None:
    pred = make_db(tmp_path / "pred.duckdb", "CREATE TABLE other AS SELECT 1 AS x")
    data = explain(gold, pred, SPEC).to_dict()
    assert data["official"]["reason"] == "missing table orders"
    assert data["tables"][0]["found"] is False and "schema main" in data["tables"][0]["looked_in"]

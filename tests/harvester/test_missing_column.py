"""A column the broken build lacks altogether is stated as missing, and that claim is checked on the tables.

A fix mined from history may add columns to a report (its undoing drops them): the broken table then has
no such column, and "holds wrong values for some rows" would send an agent after values that do not exist.
Real DuckDB captures, the official check and the statement template; no dbt build is needed to decide it.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import duckdb

from dbt_harvest.core.pin import Column, TableRecord
from dbt_harvest.core.task_record import Claim
from dbt_harvest.harvester.mint.claims import check_claims
from dbt_harvest.harvester.mint.observe import captures, directions
from dbt_harvest.harvester.mint.statement import Symptom, template_statement

GOLD_ROWS = "(1, 10.0, 'web', 'spring'), (2, 20.0, 'store', 'spring'), (3, 5.0, 'web', 'autumn')"


def _capture(path: Path, select: str) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA IF NOT EXISTS main")
    con.execute(f"CREATE TABLE main.url_report AS {select}")
    con.close()
    return path


def _world(tmp_path: Path) -> tuple[SimpleNamespace, Path, Path]:
    gold = _capture(
        tmp_path / "gold.duckdb", f"SELECT * FROM (VALUES {GOLD_ROWS}) t(ad_id, spend, channel, campaign_name)"
    )
    # the parent commit's report: the same rows, without the campaign column the fix added
    broken = _capture(
        tmp_path / "broken.duckdb",
        "SELECT * FROM (VALUES (1, 10.0, 'web'), (2, 20.0, 'web'), (3, 5.0, 'web')) t(ad_id, spend, channel)",
    )
    record = TableRecord(
        name="main.url_report",
        rows=3,
        fingerprint="f",
        deterministic=True,
        empty=False,
        columns=(
            Column("ad_id", "INTEGER"),
            Column("spend", "DECIMAL(3,1)"),
            Column("channel", "VARCHAR"),
            Column("campaign_name", "VARCHAR"),
        ),
    )
    pin = SimpleNamespace(tables=(record,), gold_sha256="0" * 64)  # what the claim check reads of a pin
    return pin, gold, broken


def test_a_column_the_broken_table_lacks_is_missing_not_wrong(tmp_path: Path) -> None:
    pin, gold, broken = _world(tmp_path)
    with captures(gold=gold, variant=broken) as con:
        moved = directions(con, pin.tables[0], (2, 3))
    assert moved == {2: "different", 3: "missing"}
    text = template_statement(
        [Symptom("url_report", "", 3, 3, (("channel", "", "different"), ("campaign_name", "", "missing")))]
    )
    assert "`campaign_name` is missing: the table has no such column" in text
    assert "`channel` holds wrong values for some rows" in text


def test_the_missing_claim_holds_only_where_the_column_is_gone(tmp_path: Path) -> None:
    pin, gold, broken = _world(tmp_path)
    checks = check_claims(
        pin, (Claim("url_report", "missing", "campaign_name"), Claim("url_report", "missing", "channel")), gold, broken
    )
    assert [c.holds for c in checks] == [True, False], checks
    # the other way round (gold lacks nothing the broken build has) a missing claim is false too
    swapped = check_claims(pin, (Claim("url_report", "missing", "campaign_name"),), gold, gold)
    assert not swapped[0].holds

"""The gold's content digest: one name for files that hold the same tables, another for any change."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

from dbt_harvest.harvester.gold_digest import content_digest

ROWS = "SELECT range AS i, repeat(chr(97 + (range % 26)::INT), 10 + range % 40) AS note FROM range(60000)"


def _write(path: Path, threads: int, select: str = ROWS, extra: str = "") -> Path:
    """A gold-like file written the way the capture writes one (ATTACH, CREATE TABLE AS, CHECKPOINT)."""
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET force_compression = 'uncompressed'")
    con.execute(f"ATTACH '{path}' AS g")
    con.execute(f"CREATE TABLE g.main.t AS {select}")
    if extra:
        con.execute(extra)
    con.execute("CHECKPOINT g")
    con.execute("DETACH g")
    con.close()
    return path


def _bytes(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_files_with_the_same_tables_and_other_bytes_share_one_digest(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.duckdb", 1)
    # rows added and deleted again: the same table, other bytes on disk
    b = _write(
        tmp_path / "b.duckdb",
        1,
        extra="INSERT INTO g.main.t SELECT range + 60000, 'x' FROM range(5000); DELETE FROM g.main.t WHERE i >= 60000",
    )
    assert _bytes(a) != _bytes(b)
    assert content_digest(a) == content_digest(b)


def test_any_change_to_a_table_changes_the_digest(tmp_path: Path) -> None:
    base = content_digest(_write(tmp_path / "base.duckdb", 1, "SELECT 1 AS i, 'a,b' AS s"))
    variants = {
        "value": "SELECT 2 AS i, 'a,b' AS s",
        "type": "SELECT 1.0 AS i, 'a,b' AS s",
        "text for number": "SELECT '1' AS i, 'a,b' AS s",
        "null": "SELECT NULL::INT AS i, 'a,b' AS s",
        "column name": "SELECT 1 AS j, 'a,b' AS s",
        "separator inside text": "SELECT 1 AS i, 'a' AS s, 'b' AS t",
        "row order": "SELECT * FROM (VALUES (1, 'a,b'), (2, 'c')) v(i, s)",
    }
    seen = {base}
    for label, select in variants.items():
        digest = content_digest(_write(tmp_path / f"{len(seen)}.duckdb", 1, select))
        assert digest not in seen, label
        seen.add(digest)
    ordered = content_digest(_write(tmp_path / "o1.duckdb", 1, "SELECT * FROM (VALUES (1), (2)) v(i) ORDER BY i"))
    reversed_ = content_digest(
        _write(tmp_path / "o2.duckdb", 1, "SELECT * FROM (VALUES (1), (2)) v(i) ORDER BY i DESC")
    )
    assert ordered != reversed_  # rows in stored order: the name is strict


def test_a_timestamptz_is_its_instant_whatever_the_session_zone(tmp_path: Path) -> None:
    path = _write(tmp_path / "tz.duckdb", 1, "SELECT TIMESTAMPTZ '2024-03-01 12:00:00+00' AS at")
    first = content_digest(path)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'Asia/Tokyo'")
    con.close()
    assert content_digest(path) == first

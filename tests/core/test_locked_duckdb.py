"""core.locked_duckdb: a file opened twice in one process (DuckDB shares one instance per file).

The scorer opens gold and submission through a locked connection; when both are the same file (a gold
scored against itself) or one file is open twice, DuckDB returns the instance already locked, on which
no SET can run. That instance is accepted when it is locked at least as tightly as asked, and refused
when it was opened without the lock.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from core.locked_duckdb import Lock, LockedDuckDBError, connect_locked


def _database(tmp_path: Path) -> Path:
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    con.close()
    return path


def test_a_file_opened_twice_under_the_lock_gives_two_working_connections(tmp_path: Path) -> None:
    path = _database(tmp_path)
    first = connect_locked(str(path), Lock(), read_only=True)
    second = connect_locked(str(path), Lock(), read_only=True)
    assert second.execute("SELECT x FROM t").fetchone() == (1,)
    with pytest.raises(duckdb.Error):
        second.execute(f"SELECT * FROM read_csv('{tmp_path / 'other.csv'}')")
    first.close()
    second.close()


def test_an_unlocked_instance_of_the_same_file_is_refused(tmp_path: Path) -> None:
    path = _database(tmp_path)
    plain = duckdb.connect(str(path), read_only=True)
    plain.execute("SET lock_configuration = true")  # locked, but with external access still on
    with pytest.raises((duckdb.Error, LockedDuckDBError)):
        connect_locked(str(path), Lock(), read_only=True)
    plain.close()


def test_an_instance_locked_with_wider_file_access_is_refused(tmp_path: Path) -> None:
    path = _database(tmp_path)
    wide = connect_locked(str(path), Lock(allowed_directories=(str(tmp_path),)), read_only=True)
    with pytest.raises(duckdb.Error):
        connect_locked(str(path), Lock(), read_only=True)
    wide.close()


def test_gold_scored_against_itself_passes(tmp_path: Path) -> None:
    from core.scorer import official
    from core.scorer.spec import GradingSpec

    path = _database(tmp_path)
    spec = GradingSpec(gold=path.name, condition_tabs=("t",), condition_cols=((0,),), ignore_orders=(True,))
    assert official(path, path, spec).passed

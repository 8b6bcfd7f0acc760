"""core.locked_duckdb when two connections of one process open the same file (issue 14 follow-up).

DuckDB keeps one database instance per file per process, so a second connection to a gold file that an
audit worker already holds open joins an instance whose configuration is locked: its own SETs failed
("Cannot change configuration option ... the configuration has been locked") and the oracle's episode
graded 0 ("gold file ... is not a readable DuckDB database") whenever two episodes of one pin were graded
at once. A joined connection is accepted when the lock it joins grants no more than it asked for, and
it is still locked: it reads no other file and cannot unlock.
"""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

from dbt_harvest.core.locked_duckdb import Lock, LockedDuckDBError, connect_locked

SECRET = "TOPSECRET-shared-41e0"


@pytest.fixture()
def gold(tmp_path: Path) -> Path:
    path = tmp_path / "gold.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table orders as select range as id from range(5)")
    con.close()
    (tmp_path / "secret.csv").write_text(f"value\n{SECRET}\n")
    return path


def test_two_scorer_readers_of_one_gold_file_both_read_it(gold: Path) -> None:
    from dbt_harvest.core.scorer.source import open_source

    with open_source(gold, gold=True) as first:
        with open_source(gold, gold=True) as second:
            assert second.execute("select count(*) from orders").fetchone() == (5,)
        assert first.execute("select count(*) from orders").fetchone() == (5,)


def test_two_readers_of_a_gold_file_reached_through_a_symlinked_folder(gold: Path, tmp_path: Path) -> None:
    """A home whose gold folder is a symlink (the mint holds gold open for a shard while the scorer and the
    gold-values reader open it again): DuckDB lists the file's own entries under its real path."""
    from dbt_harvest.core.scorer.source import SCORER_LOCK, open_source

    linked = tmp_path / "home-gold"
    linked.symlink_to(gold.parent, target_is_directory=True)
    held = connect_locked(str(linked / gold.name), SCORER_LOCK, read_only=True)
    try:
        with open_source(linked / gold.name, gold=True) as second:
            assert second.execute("select count(*) from orders").fetchone() == (5,)
        other = connect_locked(str(linked / gold.name), read_only=True)
        assert other.execute("select count(*) from orders").fetchone() == (5,)
        other.close()
    finally:
        held.close()


def test_concurrent_readers_in_threads(gold: Path) -> None:
    from dbt_harvest.core.scorer.source import open_source

    errors: list[str] = []
    barrier = threading.Barrier(4)

    def read() -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(20):
                with open_source(gold, gold=True) as con:
                    assert con.execute("select sum(id) from orders").fetchone() == (10,)
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []


def test_a_joined_connection_is_still_locked(gold: Path) -> None:
    secret = gold.parent / "secret.csv"
    first = connect_locked(str(gold), read_only=True)
    try:
        second = connect_locked(str(gold), read_only=True)
        for sql in (
            f"select * from read_csv('{secret}')",
            "set enable_external_access = true",
            "set lock_configuration = false",
            f"attach '{gold.parent / 'x.duckdb'}' as x",
        ):
            with pytest.raises(duckdb.Error) as caught:
                second.execute(sql)
            assert SECRET not in str(caught.value)
        assert not (gold.parent / "x.duckdb").exists()
        second.close()
    finally:
        first.close()


def test_a_connection_that_would_join_a_wider_lock_is_refused(gold: Path) -> None:
    wide = connect_locked(str(gold), Lock(allowed_directories=(str(gold.parent),)), read_only=True)
    try:
        with pytest.raises(LockedDuckDBError, match="already open in this process under another lock"):
            connect_locked(str(gold), Lock(), read_only=True)
    finally:
        wide.close()
    narrow = connect_locked(str(gold), Lock(), read_only=True)  # the wide instance is gone with its last connection
    narrow.close()

"""The screening engine: a locked-down in-process DuckDB over a copy of a pin's built database.

Stage 1 re-runs the compiled SQL of a mutated model and of its descendants here, in milliseconds,
instead of a dbt build. The SQL comes from an untrusted project, so the connection is the project's
one locked-down DuckDB (``core.locked_duckdb``) before any of it runs: external access off, only a
private scratch folder allowed, extension auto-loading off, memory and thread bounds, configuration
locked; every statement has a wall-time bound enforced with ``interrupt()``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.locked_duckdb import Lock, bounded, connect_locked, is_interrupt, sql_string
from dbt_harvest.harvester.sandbox import fingerprint_sql, safe_fs

MUT = "mut"


class ScreenSQLError(HarvestError):
    """A mutated statement failed (or ran past its time bound) in the screening engine."""


class Engine:
    """One connection per shard: the base database attached read-only under dbt's catalog name."""

    def __init__(
        self,
        database: Path,
        catalog: str,
        scratch: Path,
        *,
        memory_limit: str = "2GB",
        statement_seconds: float = 30.0,
        threads: int = 1,
    ) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        local = scratch / "base.duckdb"
        shutil.copyfile(database, local)
        self.scratch = scratch
        self.catalog = catalog
        self.statement_seconds = statement_seconds
        lock = Lock(allowed_directories=(str(scratch.resolve()),), memory_limit=memory_limit, threads=threads)
        self.con = connect_locked(
            ":memory:",
            lock,
            setup=(
                "SET enable_progress_bar = false",  # a long statement would print a bar over `--json` output
                f'ATTACH {sql_string(str(local.resolve()))} AS "{catalog}" (READ_ONLY)',
                f'USE "{catalog}"',
            ),
        )
        self._fresh_mut()
        self._gold: tuple[Path, duckdb.DuckDBPyConnection] | None = None

    def gold_reader(self, gold: Path) -> duckdb.DuckDBPyConnection:
        """The pin's gold database opened once for the shard, read-only and locked as the scorer opens it.

        Screening grades every candidate and wrong repair against gold; opening a DuckDB file costs ~10 ms,
        about a tenth of a shard's screening when each grade opened it again. Gold is the harvest's own
        build (trusted), and the scorer only reads a connection it is given."""
        if self._gold is None or self._gold[0] != gold:
            from dbt_harvest.core.scorer.source import SCORER_LOCK

            self._close_gold()
            self._gold = (gold, connect_locked(str(gold), SCORER_LOCK, read_only=True))
        return self._gold[1]

    def _close_gold(self) -> None:
        if self._gold is not None:
            self._gold[1].close()
            self._gold = None

    def _fresh_mut(self) -> None:
        self.con.execute(f"ATTACH ':memory:' AS {MUT}")

    def reset(self) -> None:
        """Forget every relation made for the previous candidate."""
        self.con.execute(f'USE "{self.catalog}"')
        self.con.execute(f"DETACH {MUT}")
        self._fresh_mut()

    def run(self, sql: str) -> None:
        self.query_one(sql, fetch=False)

    def query_one(self, sql: str, *, fetch: bool = True) -> tuple[object, ...] | None:
        """Run one statement under the time bound; its first row when ``fetch``."""
        try:
            with bounded(self.con, self.statement_seconds):
                cursor = self.con.execute(sql)
                return cursor.fetchone() if fetch else None
        except duckdb.Error as exc:
            message = " ".join(str(exc).split())[:300]
            if is_interrupt(exc):
                message = f"statement ran past {self.statement_seconds:.0f} s"
            raise ScreenSQLError(message) from None

    def materialize(self, schema: str, alias: str, sql: str) -> None:
        """Create ``mut.<schema>.<alias>`` as a table from ``sql``."""
        self.run(f'CREATE SCHEMA IF NOT EXISTS {MUT}."{schema}"')
        self.run(f'CREATE OR REPLACE TABLE {MUT}."{schema}"."{alias}" AS {sql}')

    def fingerprint(self, relation: str) -> tuple[int, str]:
        """(rows, fingerprint) of a relation, computed with the sandbox's own fingerprint SQL."""
        rows = self.con.execute(f"SELECT count(*) FROM {relation}").fetchone()
        fp = self.con.execute(fingerprint_sql(relation)).fetchone()
        return int(rows[0]), str(fp[0])

    def export(self, tables: dict[str, str], dest: Path) -> Path:
        """Write ``{name_in_main: source relation}`` as base tables of a new DuckDB file in scratch."""
        dest.unlink(missing_ok=True)
        self.run(f"ATTACH '{dest.resolve()}' AS pred")
        try:
            for name, source in tables.items():
                self.run(f'CREATE TABLE pred.main."{name}" AS SELECT * FROM {source}')
        finally:
            self.con.execute("DETACH pred")
        return dest

    def close(self) -> None:
        self._close_gold()
        self.con.close()
        safe_fs.rmtree(self.scratch)

"""One locked-down DuckDB for every place that runs SQL someone else wrote.

SQL from a harvested project, from an agent's edit or from a model's completion can read and write any
file DuckDB can name (``read_csv('/etc/…')``, ``COPY … TO``, ``ATTACH``), load extensions from the
network, and run for ever. Every connection that executes such SQL, inside the sandbox (the dbt-duckdb
plugin ``harvest_lockdown``, the capture and query steps) and outside it (the mint's screening engine,
the reward fast paths, the GRPO ``duckdb_sql`` backend, the scorer opening a submission), is opened
here and locked the same way before any of that SQL runs:

- file access limited to ``allowed_directories`` / ``allowed_paths`` (often nothing but the database
  and a private spill folder), ``enable_external_access = false``;
- no extension auto-install or auto-load;
- ``memory_limit``, ``threads`` and, when given, the spill folder and its size bound;
- ``lock_configuration = true`` last, so the SQL cannot undo any of it;
- in-process callers bound every statement's wall time with ``interrupt()`` (``bounded``,
  ``LockedDuckDB.execute``); inside the sandbox the child's own wall bound does that job.

Stdlib and duckdb only, no other project import: this file is also bound into the sandbox on its own
(``/opt/harvest-lib/locked_duckdb.py``) and loaded there by file path.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: Wall-time bound of one statement run in-process, seconds (callers may pass their own).
STATEMENT_SECONDS = 30.0


class LockedDuckDBError(Exception):
    """A locked connection could not be opened or configured, or a statement ran past its time bound."""


@dataclass(frozen=True)
class Lock:
    """What one connection may touch and use. Paths are absolute; directories may end with '/'."""

    allowed_directories: tuple[str, ...] = ()
    allowed_paths: tuple[str, ...] = ()
    temp_directory: str = ""
    max_temp_directory_size: str = ""
    memory_limit: str = "2GB"  # "" keeps DuckDB's default (80% of RAM)
    threads: int = 1  # 0 keeps DuckDB's default (every core)

    def __post_init__(self) -> None:
        for name in ("memory_limit", "max_temp_directory_size"):
            value = getattr(self, name)
            if "'" in value or "\n" in value:
                raise LockedDuckDBError(f"invalid {name} {value!r}; use e.g. '2GB'")
        if self.threads < 0:
            raise LockedDuckDBError(f"threads must be 0 (DuckDB's default) or more, got {self.threads}")
        for path in (
            *self.allowed_directories,
            *self.allowed_paths,
            *([self.temp_directory] if self.temp_directory else []),
        ):
            if not path.startswith("/") or "\x00" in path:
                raise LockedDuckDBError(f"locked DuckDB paths must be absolute, got {path!r}")


def sql_string(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(sql_string(value) for value in values) + "]"


def setup_statements(lock: Lock) -> list[str]:
    """Every SET but the final lock, in an order DuckDB accepts (paths before external access goes off)."""
    statements: list[str] = []
    if lock.temp_directory:
        statements.append(f"SET temp_directory = {sql_string(lock.temp_directory)}")
    if lock.max_temp_directory_size:
        statements.append(f"SET max_temp_directory_size = {sql_string(lock.max_temp_directory_size)}")
    directories = [d.rstrip("/") + "/" for d in lock.allowed_directories]
    if lock.memory_limit:
        statements.append(f"SET memory_limit = {sql_string(lock.memory_limit)}")
    if lock.threads:
        statements.append(f"SET threads = {int(lock.threads)}")
    statements += [
        f"SET allowed_directories = {_list(directories)}",
        f"SET allowed_paths = {_list(list(lock.allowed_paths))}",
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        "SET enable_external_access = false",
    ]
    return statements


LOCK_STATEMENT = "SET lock_configuration = true"


def lock_statements(lock: Lock) -> list[str]:
    """The whole lockdown, lock last."""
    return [*setup_statements(lock), LOCK_STATEMENT]


def apply_lock(conn: Any, lock: Lock, setup: Sequence[str] = ()) -> None:
    """Lock ``conn``: the settings, then ``setup`` (our own ATTACH/USE statements, run under the file
    restrictions already), then ``lock_configuration``."""
    for statement in setup_statements(lock):
        conn.execute(statement)
    for statement in setup:
        conn.execute(statement)
    conn.execute(LOCK_STATEMENT)


#: Held while a connection is opened and locked: DuckDB shares one database instance (and so one
#: configuration) between every connection of this process to the same file.
_OPEN = threading.Lock()


def _joined_lock(conn: Any, database: str, lock: Lock, setup: Sequence[str]) -> None:
    """``conn`` joined an instance another connection of this process already locked (a second
    concurrent reader of the same gold file): accept it only when that lock grants no more than
    ``lock`` does (DuckDB's own entries for the database file aside) and nothing is left to set up."""
    external, autoinstall, autoload, directories, paths = conn.execute(
        "SELECT current_setting('enable_external_access'), current_setting('autoinstall_known_extensions'), "
        "current_setting('autoload_known_extensions'), current_setting('allowed_directories'), "
        "current_setting('allowed_paths')"
    ).fetchone()
    # DuckDB names the file's own entries (the file, its .wal, its .tmp/) by the path it resolved: a
    # database reached through a symlinked folder is listed under its real path
    own = tuple({database, os.path.abspath(database), os.path.realpath(database)})
    granted_dirs = {d.rstrip("/") for d in (*lock.allowed_directories, lock.temp_directory) if d}
    extra = [d for d in directories or () if not d.startswith(own) and d.rstrip("/") not in granted_dirs]
    extra += [p for p in paths or () if not p.startswith(own) and p not in lock.allowed_paths]
    problems = [
        name
        for name, on in (
            ("external access", external),
            ("extension install", autoinstall),
            ("extension load", autoload),
        )
        if on
    ]
    if extra:
        problems.append(f"access to {', '.join(sorted(extra)[:3])}")
    if setup:
        problems.append("setup statements that cannot run on a locked instance")
    if problems:
        raise LockedDuckDBError(
            f"{database} is already open in this process under another lock ({'; '.join(problems)}); "
            "close that connection first"
        )


def connect_locked(
    database: str = ":memory:", lock: Lock = Lock(), *, read_only: bool = False, setup: Sequence[str] = ()
) -> Any:
    """A DuckDB connection to ``database``, locked by ``lock`` before anything else runs on it.

    A second connection to a file this process already holds open joins DuckDB's one instance for that
    file, whose configuration is locked already: it is accepted when that lock is no wider than
    ``lock`` (``_joined_lock``), so concurrent readers of one gold file work."""
    import duckdb

    # the first three settings hold from the very start, before our own SETs run
    config: dict[str, str | bool | int | float | list[str]] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    with _OPEN:
        try:
            conn = duckdb.connect(database, read_only=read_only, config=config)
        except duckdb.Error as exc:
            raise LockedDuckDBError(f"cannot open {database}: {' '.join(str(exc).split())[:300]}") from None
        try:
            row = conn.execute("SELECT current_setting('lock_configuration')").fetchone()
            assert row is not None  # a SELECT without FROM returns exactly one row
            if row[0]:
                _joined_lock(conn, database, lock, setup)
            else:
                apply_lock(conn, lock, setup)
        except BaseException:
            conn.close()
            raise
    return conn


@contextlib.contextmanager
def bounded(conn: Any, seconds: float) -> Iterator[None]:
    """Interrupt whatever ``conn`` runs once ``seconds`` have passed inside the block."""
    timer = threading.Timer(seconds, conn.interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def is_interrupt(exc: BaseException) -> bool:
    """Whether a DuckDB error is the interrupt a time bound sent."""
    return "INTERRUPT" in str(exc).upper()


class LockedDuckDB:
    """A locked connection whose ``execute`` bounds every statement's wall time."""

    def __init__(
        self,
        database: str = ":memory:",
        lock: Lock = Lock(),
        *,
        read_only: bool = False,
        setup: Sequence[str] = (),
        statement_seconds: float = STATEMENT_SECONDS,
    ) -> None:
        self.con = connect_locked(database, lock, read_only=read_only, setup=setup)
        self.statement_seconds = statement_seconds

    def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> Any:
        """Run one statement under the time bound; a statement past it raises duckdb's interrupt error."""
        with bounded(self.con, self.statement_seconds):
            return self.con.execute(sql, parameters) if parameters is not None else self.con.execute(sql)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> LockedDuckDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "LOCK_STATEMENT",
    "Lock",
    "LockedDuckDB",
    "LockedDuckDBError",
    "STATEMENT_SECONDS",
    "apply_lock",
    "bounded",
    "connect_locked",
    "is_interrupt",
    "lock_statements",
    "setup_statements",
    "sql_string",
]

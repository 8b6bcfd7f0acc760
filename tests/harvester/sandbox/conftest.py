"""Fixtures for the sandbox tests: skip without bubblewrap, a canary folder outside every workspace."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from sandbox_support import SECRET

from dbt_harvest.harvester.sandbox import sandbox_available


@pytest.fixture(scope="session")
def bwrap() -> None:
    """Skip (with the reason and the install command) where bubblewrap cannot run."""
    ok, why = sandbox_available()
    if not ok:
        pytest.skip(why)


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside every workspace holding secrets in the formats DuckDB can read."""
    folder = tmp_path_factory.mktemp("outside")
    (folder / "secret.csv").write_text(f"name,value\n{SECRET},1\n")
    (folder / "secret.txt").write_text(SECRET + "\n")
    conn = duckdb.connect(str(folder / "secret.duckdb"))
    conn.execute(f"create table secrets as select '{SECRET}' as value")
    conn.close()
    return folder

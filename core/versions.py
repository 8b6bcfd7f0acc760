"""The versions a pin or manifest records: everything that can change a build or a verdict."""

from __future__ import annotations

import platform
from importlib import metadata

_DISTRIBUTIONS = ("dbt-core", "dbt-duckdb", "duckdb", "sqlglot", "pandas", "pygit2", "dbt-harvest")


def versions() -> dict[str, str]:
    """Installed versions of python and the distributions that matter (``harvester`` = dbt-harvest)."""
    found = {"python": platform.python_version()}
    for dist in _DISTRIBUTIONS:
        try:
            found["harvester" if dist == "dbt-harvest" else dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found["harvester" if dist == "dbt-harvest" else dist] = "not installed"
    return found

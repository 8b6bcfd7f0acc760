"""The scorer's exceptions: only gold-side problems raise; submission-side problems are a 0 with a reason.

A gold file or gold table that cannot be read means the task itself is broken, so it must never turn
into a silent 0 (the official driver's behaviour); these derive from HarvestError so the CLI prints
one line and exits 1.
"""

from __future__ import annotations

from dbt_harvest.core.errors import HarvestError


class GoldTableError(HarvestError):
    """The gold file, a gold table, or a graded gold column position cannot be read: fix the task or its spec."""


class GoldFileError(GoldTableError):
    """The gold file is missing or is not a readable DuckDB database."""

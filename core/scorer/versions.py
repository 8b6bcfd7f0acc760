"""The library versions the official mirror was verified against.

The official check's verdicts depend on how pandas turns DuckDB results into Python values (dtype of
an int column with NULLs, NaN vs None vs pd.NA, upcasts in an all-numeric frame). The mirror was
checked, case by case and by property tests against a literal pandas reference, under exactly these
versions; a different pandas or duckdb may change verdicts, so callers can refuse to run elsewhere.
"""

from __future__ import annotations

#: pandas version the mirror is verified against (the pyproject pin is >=3.1,<3.2)
VERIFIED_PANDAS = "3.1.1"
#: duckdb version the mirror is verified against (the pyproject pin is >=1.5,<1.6)
VERIFIED_DUCKDB = "1.5.6"


def installed_versions() -> tuple[str, str]:
    """(pandas, duckdb) versions installed in this interpreter."""
    import duckdb
    import pandas

    return pandas.__version__, duckdb.__version__


def versions_verified() -> bool:
    """True when the installed pandas and duckdb are exactly the verified ones."""
    return installed_versions() == (VERIFIED_PANDAS, VERIFIED_DUCKDB)

"""Where the running dbt-harvest code comes from: a source checkout, or an installed package.

Two decisions depend on it: the sandbox never binds a checkout (it holds pins, test fixtures and often a
home with gold), while a wheel's ``site-packages/dbt_harvest`` is public code inside the very folder the
sandbox binds for dbt; and a training manifest records a git commit only for code run from a checkout.
"""

from __future__ import annotations

from pathlib import Path


def source_checkout() -> Path | None:
    """The checkout root (``pyproject.toml`` and ``src/dbt_harvest/`` beside the layer folders), or None
    when this code is an installed package."""
    root = Path(__file__).resolve().parents[1]  # <checkout>/core/source.py
    return (
        root
        if (root / "pyproject.toml").is_file() and (root / "src" / "dbt_harvest" / "__init__.py").is_file()
        else None
    )

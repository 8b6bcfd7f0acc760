"""dbt-harvest's one import root: real dbt repositories in, verified repair tasks out.

The distribution installs a single top-level package, ``dbt_harvest``. Its layers keep their folders at
the top of the repository (``core/``, ``mutators/``, ``harvester/``, ``corpora/``, ``eval/``, ``train/``,
``cli/``: the project's layout) and are mapped beneath this package at build time (``setup.py``), so
``core/clock.py`` is imported as ``dbt_harvest.core.clock`` from an editable install and a wheel alike.
This file lives in ``src/dbt_harvest/`` so that no folder named ``dbt_harvest`` at the top of the checkout
shadows the mapped package. No generic name (``core``, ``cli``, ``eval``, ``train``) is put on ``sys.path``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

#: The layers, bottom to top (docs/DESIGN.md, "Layers"); each is a subpackage of ``dbt_harvest``.
LAYERS: tuple[str, ...] = ("core", "mutators", "harvester", "corpora", "eval", "train", "cli")

try:
    __version__ = version("dbt-harvest")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

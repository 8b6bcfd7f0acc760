"""dbt-harvest's one import root: real dbt repositories in, verified repair tasks out.

The distribution installs a single top-level package, ``dbt_harvest``. Its layers keep their folders at
the top of the repository (``core/``, ``mutators/``, ``harvester/``, ``corpora/``, ``eval/``, ``train/``,
``cli/``: the project's layout); ``src/dbt_harvest/<layer>`` is a committed symbolic link to each, so
``core/clock.py`` is ``dbt_harvest.core.clock`` to Python, mypy, pyright and an editor alike, from a plain
checkout (``src`` on the path), an editable install (a static ``.pth`` naming ``src``) and a wheel (the
files copied through the links). No generic name (``core``, ``cli``, ``eval``, ``train``) is put on
``sys.path``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

#: The layers, bottom to top (docs/DESIGN.md, "Layers"); each is a subpackage of ``dbt_harvest``.
LAYERS: tuple[str, ...] = ("core", "mutators", "harvester", "corpora", "eval", "train", "cli")

try:
    __version__ = version("dbt-harvest")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

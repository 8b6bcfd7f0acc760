"""Maps the repository's layer folders beneath the one import root, ``dbt_harvest``.

The metadata lives in pyproject.toml. The project's layout keeps each layer in its own top-level folder
(``core/``, ``mutators/``, ``harvester/``, ``corpora/``, ``eval/``, ``train/``, ``cli/``); the root
package itself (its ``__init__`` and ``__main__``) lives in ``src/dbt_harvest/``, so no folder named
``dbt_harvest`` at the top of the checkout can shadow the mapped package when the checkout is on
``sys.path`` (pytest and ``python -m`` put it there). This file computes what a static table cannot:
every subpackage of every layer folder (``harvester/sandbox/inside`` ->
``dbt_harvest.harvester.sandbox.inside``, data-only namespace folders included), so a new subpackage
ships without editing a list. The layer names are read from ``src/dbt_harvest/__init__.py`` as text.
"""

from __future__ import annotations

import ast
from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).resolve().parent
ROOT_PACKAGE = "dbt_harvest"
ROOT_DIR = f"src/{ROOT_PACKAGE}"


def layers() -> tuple[str, ...]:
    tree = ast.parse((HERE / ROOT_DIR / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "LAYERS":
            return tuple(ast.literal_eval(node.value))
    raise SystemExit(f"{ROOT_DIR}/__init__.py defines no LAYERS tuple")


def mapped_packages() -> tuple[list[str], dict[str, str]]:
    packages = [ROOT_PACKAGE]
    package_dir = {ROOT_PACKAGE: ROOT_DIR}
    for layer in layers():
        package_dir[f"{ROOT_PACKAGE}.{layer}"] = layer
        found = find_namespace_packages(where=str(HERE), include=[layer, f"{layer}.*"], exclude=["*__pycache__*"])
        packages += [f"{ROOT_PACKAGE}.{name}" for name in found]
    return packages, package_dir


PACKAGES, PACKAGE_DIR = mapped_packages()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR)

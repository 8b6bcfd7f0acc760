"""Drivers by name without an import circle: base.py says what a driver is, registry.py makes one."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from dbt_harvest.core.errors import HarvestError

DRIVERS_DIR = Path(__file__).resolve().parents[2] / "eval" / "drivers"
PACKAGE = "dbt_harvest.eval.drivers"


def _imports(path: Path) -> set[str]:
    """The driver modules ``path`` imports, at any depth of its code (function bodies included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        found |= {n.removeprefix(f"{PACKAGE}.") for n in names if n.startswith(f"{PACKAGE}.")}
    return found


def test_the_driver_modules_import_each_other_without_a_circle() -> None:
    graph = {p.stem: _imports(p) for p in DRIVERS_DIR.glob("*.py") if p.stem != "__init__"}
    assert graph["base"] == set(), f"base.py imports {graph['base']}"
    visiting: list[str] = []

    def walk(node: str) -> None:
        assert node not in visiting, " -> ".join([*visiting, node])
        visiting.append(node)
        for target in graph.get(node, ()):
            walk(target)
        visiting.pop()

    for module in graph:
        walk(module)


def test_every_registered_driver_is_a_driver_class() -> None:
    from dbt_harvest.eval.drivers.registry import DRIVERS, driver_class

    assert DRIVERS == ("oracle", "noop", "wrong", "openai", "hf")
    for name in DRIVERS:
        cls = driver_class(name)
        assert all(callable(getattr(cls, m, None)) for m in ("prepare", "play", "describe")), name


def test_a_driver_is_made_by_name_and_an_unknown_name_lists_the_choices() -> None:
    from dbt_harvest.eval.drivers import make_driver

    assert make_driver("oracle").name == "oracle" and make_driver("noop").name == "noop"
    with pytest.raises(HarvestError, match="unknown driver 'gpt'; one of oracle, noop, wrong, openai, hf"):
        make_driver("gpt")


def test_a_scripted_driver_imports_no_model_library() -> None:
    code = (
        "import sys; from dbt_harvest.eval.drivers import make_driver; make_driver('oracle'); "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"

"""The house rules that no linter checks: short functions, and a docstring that says why each module exists.

ruff (style, imports, likely bugs) and mypy (types) run in CI from pyproject.toml. Two rules of the project's
style are not theirs: a function longer than a screen hides parts that deserve names of their own, and a
module without a docstring leaves its reason to exist to guesswork. Both are read here from the syntax tree
of every module of every layer, so a new long function or an undocumented module fails the suite by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dbt_harvest import LAYERS

ROOT = Path(__file__).resolve().parents[1]
#: The longest a function of the package may be, in lines from its ``def`` to its last line.
MAX_FUNCTION_LINES = 80


def package_modules() -> list[Path]:
    """Every Python module of every layer folder (the package's code, not its tests or fixtures)."""
    return sorted(
        path
        for layer in LAYERS
        for path in (ROOT / layer).rglob("*.py")
        if "__pycache__" not in path.parts and "projects" not in path.relative_to(ROOT).parts
    )


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(qualified name, lines) of each function in ``source`` longer than ``limit`` lines."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                length = child.end_lineno - child.lineno + 1
                if length > limit:
                    found.append((name, length))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return found


def test_the_scan_reads_every_layer() -> None:
    modules = package_modules()
    assert {path.relative_to(ROOT).parts[0] for path in modules} == set(LAYERS)
    assert len(modules) > 150


def test_no_function_of_the_package_is_longer_than_a_screen() -> None:
    too_long = [
        f"{path.relative_to(ROOT)}:{name} ({lines} lines)"
        for path in package_modules()
        for name, lines in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert not too_long, (
        f"functions over {MAX_FUNCTION_LINES} lines; split them where the parts have names of their own:\n"
        + "\n".join(too_long)
    )


def test_every_module_says_why_it_exists() -> None:
    silent = [
        str(path.relative_to(ROOT))
        for path in package_modules()
        if path.stat().st_size and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not silent, "modules without a docstring:\n" + "\n".join(silent)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 80, [("f", 81)]),
        ("def f():\n" + "    x = 1\n" * 79, []),
        ("class C:\n    def m(self):\n" + "        x = 1\n" * 90, [("C.m", 91)]),
        ("def outer():\n    def inner():\n" + "        x = 1\n" * 85, [("outer", 87), ("outer.inner", 86)]),
    ],
)
def test_the_length_check_sees_long_functions(source: str, expected: list[tuple[str, int]]) -> None:
    assert long_functions(source) == expected

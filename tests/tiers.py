"""Two tiers of the suite: the default run, and the deep tier of second paths that CI adds.

The suite is almost all real sandboxed dbt builds, and CPU-bound: on two cores its wall time is its work
divided by two, so the default run stays within its budget only by doing less work. The tests that do the
most of it fall in two kinds. Most check a behaviour through its one path (a stage, a refusal, a guard).
Some check an outcome that a cheaper default test already reaches, along a second path: one mint of both
kinds equals two, a fresh home reproduces the lock, the warm child gives the cold verdicts, Ray gives the
local pool's decisions, docs/CHAIN.md's whole chain end to end. Those are marked ``deep``.

- ``python -m pytest`` (the README's command) runs the default tier: every test not marked ``deep``.
- ``--tier deep`` runs only the deep tier, ``--tier all`` both. CI runs the default tier, then the deep one.
- A test file or test named on the command line runs whatever its tier (``pytest tests/e2e/test_chain.py``).

A deep test must say which default tests reach its outcome the cheap way:
``@pytest.mark.deep(covered_by=("tests/x/test_y.py::test_z", ...))``. Each named test must exist and must
not be deep itself; the run is refused otherwise (:func:`cover_errors`), so the deep tier cannot
grow into a place where behaviours go untested by default. The check reads the test files (the marker must be a
decorator with a literal ``covered_by``; a ``pytestmark`` marking a whole module deep is refused) before
anything is collected, once per run: under xdist in the controller, so a bad cover is one clean usage error.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

TIERS = ("default", "deep", "all")

#: what :func:`deep_markers` gives a test that is not marked deep
_NOT_DEEP = object()


def runs(tier: str, deep: bool, named: bool) -> bool:
    """Whether a test runs under ``tier``: ``deep`` says it is marked deep, ``named`` that its file or itself
    was named on the command line (then it runs under the default tier whatever it is)."""
    if tier == "all":
        return True
    if tier == "deep":
        return deep
    return not deep or named


def defined_tests(source: str) -> dict[str, bool]:
    """Test functions a module defines, by their node id's tail (``test_x``, ``TestGroup::test_x``), each with
    whether a decorator marks it deep (``pytest.mark.deep(...)`` or ``mark.deep``)."""
    return {
        name: covers is not _NOT_DEEP
        for name, covers in deep_markers(source).items()
        if name.rsplit("::", 1)[-1] != "pytestmark"
    }


def deep_markers(source: str) -> dict[str, object]:
    """Every test function of a module by its node id's tail (``test_x`` or ``TestGroup::test_x``): the literal
    ``covered_by`` of its deep marker (None when the marker has none or names it by something else than a
    literal), or ``_NOT_DEEP``. A ``pytestmark`` that marks a whole module or class deep is reported under its
    own name, ``pytestmark``, with None: deep tests are marked one by one, each with its cover."""
    found: dict[str, object] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}::")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                found[prefix + node.name] = next((_covers(d) for d in node.decorator_list if _is_deep(d)), _NOT_DEEP)
            elif (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
                and any(_is_deep(n) for n in ast.walk(node.value) if isinstance(n, ast.expr))
            ):
                found[prefix + "pytestmark"] = None

    visit(ast.parse(source).body, "")
    return found


def _is_deep(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr == "deep"


def _covers(decorator: ast.expr) -> object:
    if not isinstance(decorator, ast.Call):
        return None
    for keyword in decorator.keywords:
        if keyword.arg == "covered_by":
            try:
                return ast.literal_eval(keyword.value)
            except ValueError:
                return None
    return None


def suite_errors(root: Path, paths: Iterable[Path]) -> list[str]:
    """:func:`cover_errors` over every deep test of the test files under ``paths`` (files or folders)."""
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("test_*.py")) if f.suffix == ".py"})
    marked: dict[str, object] = {}
    sources: dict[str, str | None] = {}
    for file in files:
        if not file.resolve().is_relative_to(root.resolve()):
            continue
        module = file.resolve().relative_to(root.resolve()).as_posix()
        sources[module] = file.read_text()
        marked.update(
            (f"{module}::{name}", covers)
            for name, covers in deep_markers(sources[module]).items()
            if covers is not _NOT_DEEP
        )
    for covers in marked.values():
        for cover in covers if isinstance(covers, tuple) else ():
            module = str(cover).partition("::")[0]
            if module not in sources:
                path = root / module
                sources[module] = path.read_text() if path.is_file() else None
    return cover_errors(marked, sources)


def cover_errors(deep_tests: Mapping[str, object], sources: Mapping[str, str | None]) -> list[str]:
    """What is wrong with each deep test's ``covered_by`` (an empty list when nothing is).

    ``deep_tests`` maps a deep test's node id to the value of its marker's ``covered_by``; ``sources`` maps a
    module path (as node ids spell it) to its text, or None where no such file exists."""
    errors = []
    for nodeid, covered_by in sorted(deep_tests.items()):
        if not isinstance(covered_by, tuple) or not covered_by or not all(isinstance(c, str) for c in covered_by):
            errors.append(
                f"{nodeid}: a deep test names the default tests that cover it: "
                f"@pytest.mark.deep(covered_by=('tests/...py::test_...', ...))"
            )
            continue
        for cover in covered_by:
            module, _, name = cover.partition("::")
            source = sources.get(module)
            tests = defined_tests(source) if source is not None else {}
            base = name.split("[", 1)[0]
            if source is None or base not in tests:
                errors.append(f"{nodeid}: covered_by names {cover}, which does not exist")
            elif tests[base]:
                errors.append(f"{nodeid}: covered_by names {cover}, which is deep itself")
    return errors


def _named_modules(config: pytest.Config) -> set[str]:
    """Test files (and tests) named on the command line, as node id prefixes."""
    root = Path(config.rootpath)
    named = set()
    for arg in config.args:
        path_part, sep, rest = arg.partition("::")
        path = Path(path_part)
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        if path.suffix == ".py" and path.is_file():
            try:
                named.add(path.resolve().relative_to(root.resolve()).as_posix() + (sep + rest if sep else ""))
            except ValueError:
                continue
    return named


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="default",
        help="default: tests not marked deep (the README's run); deep: only the deep tier (second paths "
        "to outcomes a default test checks); all: both. CI runs default, then deep.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "deep(covered_by): a second path to an outcome the named default tests check; runs with --tier deep|all",
    )
    if hasattr(config, "workerinput"):  # an xdist worker: the controller checked
        return
    root = Path(config.rootpath)
    paths = [Path(config.invocation_params.dir) / a.partition("::")[0] for a in config.args]
    errors = suite_errors(root, [p for p in paths if p.exists()])
    if errors:
        raise pytest.UsageError("the deep tier: " + "; ".join(errors))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = config.getoption("--tier")
    named = _named_modules(config)
    keep, drop = [], []
    for item in items:
        is_named = any(
            item.nodeid == n or item.nodeid.startswith(n + "::") or item.nodeid.startswith(n + "[") for n in named
        )
        deep = item.get_closest_marker("deep") is not None
        (keep if runs(tier, deep, is_named) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

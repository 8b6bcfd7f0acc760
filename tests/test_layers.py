"""The layering, enforced: every import of every module points to its own layer or one below.

Layers, bottom to top (docs/DESIGN.md, "Layers"): core < mutators < harvester < corpora < eval < train < cli,
each a subpackage of the one import root ``dbt_harvest`` (its folder ``<layer>/`` at the top of the repository,
mapped at build time; the root package's own files are ``src/dbt_harvest/``). Imports are read from
the syntax tree of every module, so the ones inside functions count, and so do module paths written as strings (``importlib.import_module("dbt_harvest.x.y")``, ``"dbt_harvest.pkg.module:Class"`` settings):
an arrow hidden in a function body or a string is still an arrow. The sandbox child's modules
(``harvester/sandbox/inside``) run inside bubblewrap with the standard library, dbt and duckdb only; they
must import nothing of ours at all.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = "dbt_harvest"
PACKAGE = ROOT  # where the layer folders are: the top of the repository (src/dbt_harvest/<layer> links to them)
SRC = ROOT / "src" / ROOT_PACKAGE  # the root package's own files
LAYERS: tuple[str, ...] = ("core", "mutators", "harvester", "corpora", "eval", "train", "cli")
RANK = {name: rank for rank, name in enumerate(LAYERS)}
INSIDE_SANDBOX = ("harvester", "sandbox", "inside")
# a dotted module path, optionally with ":attribute" (a bare "train" or "eval" is a split name, not a module)
_MODULE_STRING = re.compile(rf"^{ROOT_PACKAGE}\.({'|'.join(LAYERS)})((\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?)$")


def layer_of(module: str) -> str | None:
    """The layer a dotted module path of ours belongs to (``dbt_harvest.core.clock`` -> ``core``), else None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == ROOT_PACKAGE and parts[1] in RANK else None


@dataclass(frozen=True)
class Arrow:
    """One import from ``source`` (a module) to ``target`` (a module path), at ``line``."""

    source: str
    target: str
    line: int

    @property
    def upward(self) -> bool:
        src, dst = layer_of(self.source), layer_of(self.target)
        return src is not None and dst is not None and RANK[dst] > RANK[src]


def module_name(path: Path) -> str:
    """The dotted name a file of the repository is imported by (``core/clock.py`` ->
    ``dbt_harvest.core.clock``, ``src/dbt_harvest/__main__.py`` -> ``dbt_harvest.__main__``,
    ``tests/test_layers.py`` -> ``tests.test_layers``)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "src":
        parts = parts[1:]
    elif parts[0] in RANK:
        parts = [ROOT_PACKAGE, *parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def arrows(source: str, module: str, is_package: bool = False) -> list[Arrow]:
    """Every reference from ``module`` (whose code is ``source``) to a module of ours."""
    found: list[Arrow] = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                targets = [".".join(base + ([node.module] if node.module else []))]
            elif node.module:
                targets = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            targets = [node.value.split(":")[0]]
        for target in targets:
            if layer_of(target) is not None or target.split(".")[0] in RANK:
                found.append(Arrow(module, target, getattr(node, "lineno", 0)))
    return found


def project_modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (PACKAGE / layer).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_layer_folder_exists_and_holds_code() -> None:
    for layer in LAYERS:
        assert (PACKAGE / layer / "__init__.py").is_file(), f"layer {layer!r} has no package"


def test_no_import_points_up_a_layer() -> None:
    upward = []
    for path in project_modules():
        module = module_name(path)
        for arrow in arrows(path.read_text(), module, path.name == "__init__.py"):
            if arrow.upward:
                upward.append(f"{path.relative_to(ROOT)}:{arrow.line}: {module} -> {arrow.target}")
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_the_sandbox_child_imports_nothing_of_ours() -> None:
    inside = ROOT.joinpath(*INSIDE_SANDBOX)
    offending = [
        f"{path.relative_to(ROOT)}:{arrow.line}: -> {arrow.target}"
        for path in sorted(inside.rglob("*.py"))
        for arrow in arrows(path.read_text(), module_name(path))
    ]
    assert not offending, "\n".join(offending)


def test_only_the_cli_imports_train() -> None:
    users = sorted(
        {
            module_name(path)
            for path in project_modules()
            if path.relative_to(PACKAGE).parts[0] not in ("train", "cli")
            for arrow in arrows(path.read_text(), module_name(path))
            if layer_of(arrow.target) == "train"
        }
    )
    assert not users, f"modules outside train/ and cli/ importing train: {users}"


@pytest.mark.parametrize(
    "source",
    [
        "from dbt_harvest.eval.env import RepairEnvironment\n",
        "def f():\n    from dbt_harvest.corpora.store import store_task\n",
        "import importlib\nimportlib.import_module('dbt_harvest.train.grpo')\n",
        "ENV = 'dbt_harvest.eval.env:RepairEnvironment'\n",
    ],
)
def test_the_checker_sees_hidden_arrows(source: str) -> None:
    """The checker itself can fail: each of these, written in the harvester, is an arrow up."""
    found = arrows(source, "dbt_harvest.harvester.mint.pipeline")
    assert found and all(a.upward for a in found), found


def test_the_checker_allows_arrows_down() -> None:
    source = (
        "from dbt_harvest.core.errors import HarvestError\nfrom dbt_harvest.mutators import candidates\n"
        "from . import shard\n"
    )
    found = arrows(source, "dbt_harvest.harvester.mint.pipeline")
    assert [a.target for a in found] == [
        "dbt_harvest.core.errors",
        "dbt_harvest.mutators",
        "dbt_harvest.harvester.mint",
    ]
    assert not any(a.upward for a in found)


def test_each_layer_is_imported_from_its_folder() -> None:
    """``dbt_harvest.<layer>`` is the repository's ``<layer>/`` folder (through src/dbt_harvest's link), not a copy: a
    test package named like a layer, or a stale install, would otherwise be what the suite exercises."""
    import importlib

    for layer in LAYERS:
        module = importlib.import_module(f"{ROOT_PACKAGE}.{layer}")
        assert Path(module.__file__).resolve() == PACKAGE / layer / "__init__.py", f"{layer} is {module.__file__}"


def _checked_files() -> list[Path]:
    """The Python files of the layers, the tests and src/, walked from those folders only: a checkout may
    hold a live HARVEST_HOME (git-ignored) whose build folders come and go while a test walks."""
    tops = [ROOT / top for top in (*LAYERS, "tests", "src") if (ROOT / top).is_dir()]
    return sorted(p for top in tops for p in top.rglob("*.py") if "__pycache__" not in p.parts)


def test_nothing_imports_a_layer_by_a_bare_name() -> None:
    """``import core`` or ``from train.x import y`` anywhere (code or tests) would only work from a checkout
    with its root on sys.path; an installed dbt-harvest has one import root."""
    bare = []
    for path in _checked_files():
        for arrow in arrows(path.read_text(), module_name(path), path.name == "__init__.py"):
            if arrow.target.split(".")[0] in RANK:
                bare.append(f"{path.relative_to(ROOT)}:{arrow.line}: {arrow.target}")
    assert not bare, "imports of a layer outside dbt_harvest:\n" + "\n".join(bare)


_CODE_IN_A_STRING = re.compile(rf"(?:^|[;\n])\s*(?:from|import)\s+({'|'.join(LAYERS)})(?:[.\s]|$)")


def test_no_code_in_a_string_imports_a_layer_by_a_bare_name() -> None:
    """Python run from a string (``python -c "from cli import main"``, a subprocess's probe) is invisible to
    the import graph; a bare layer name there worked only while the checkout's root was on sys.path."""
    found = []
    for path in _checked_files():
        if path == Path(__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CODE_IN_A_STRING.search(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:80]!r}")
    assert not found, "code in a string imports a layer by a bare name:\n" + "\n".join(found)


def test_the_string_check_sees_a_bare_import_in_a_command() -> None:
    assert _CODE_IN_A_STRING.search("import sys; from cli import main; main()")
    assert _CODE_IN_A_STRING.search("import core.pin\n")
    assert not _CODE_IN_A_STRING.search("import sys; from dbt_harvest.cli import main")
    assert not _CODE_IN_A_STRING.search("the core of it: import tasks from the corpus")


def test_the_checker_sees_a_bare_layer_import() -> None:
    found = arrows("from core.errors import HarvestError\n", "dbt_harvest.harvester.x")
    assert [a.target for a in found] == ["core.errors"]


def test_only_one_name_is_importable_at_the_top_level(tmp_path: Path) -> None:
    """From a folder outside the checkout, with no PYTHONPATH, the install exposes ``dbt_harvest`` and none
    of the generic layer names (``core``, ``cli``, ``eval``, ``train``, ...)."""
    import os
    import subprocess
    import sys

    probe = (
        "import importlib.util as u, json; "
        f"print(json.dumps({{n: u.find_spec(n) is not None for n in {[ROOT_PACKAGE, *LAYERS]!r}}}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    ).stdout
    import json

    found = json.loads(out)
    assert found.pop(ROOT_PACKAGE) is True
    assert not any(found.values()), f"importable at the top level: {[n for n, ok in found.items() if ok]}"

"""The layering, enforced: every import of every module points to its own layer or one below.

Layers, bottom to top (docs/DESIGN.md, "Layers"): core < mutators < harvester < corpora < eval < train < cli.
Imports are read from the syntax tree of every module, so the ones inside functions count, and so do
module paths written as strings (``importlib.import_module("x.y")``, ``"pkg.module:Class"`` settings):
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
LAYERS: tuple[str, ...] = ("core", "mutators", "harvester", "corpora", "eval", "train", "cli")
RANK = {name: rank for rank, name in enumerate(LAYERS)}
INSIDE_SANDBOX = ("harvester", "sandbox", "inside")
# a dotted module path, optionally with ":attribute" (a bare "train" or "eval" is a split name, not a module)
_MODULE_STRING = re.compile(rf"^({'|'.join(LAYERS)})((\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?|:[A-Za-z_]\w*)$")


@dataclass(frozen=True)
class Arrow:
    """One import from ``source`` (a module) to ``target`` (a module path), at ``line``."""

    source: str
    target: str
    line: int

    @property
    def upward(self) -> bool:
        src, dst = self.source.split(".")[0], self.target.split(".")[0]
        return dst in RANK and RANK[dst] > RANK[src]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
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
            if target.split(".")[0] in RANK:
                found.append(Arrow(module, target, getattr(node, "lineno", 0)))
    return found


def project_modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_layer_folder_exists_and_holds_code() -> None:
    for layer in LAYERS:
        assert (ROOT / layer / "__init__.py").is_file(), f"layer {layer!r} has no package"


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
    users = sorted({
        module_name(path)
        for path in project_modules()
        if path.relative_to(ROOT).parts[0] not in ("train", "cli")
        for arrow in arrows(path.read_text(), module_name(path))
        if arrow.target.split(".")[0] == "train"
    })
    assert not users, f"modules outside train/ and cli/ importing train: {users}"


@pytest.mark.parametrize("source", [
    "from eval.env import RepairEnvironment\n",
    "def f():\n    from corpora.store import store_task\n",
    "import importlib\nimportlib.import_module('train.grpo')\n",
    "ENV = 'eval.env:RepairEnvironment'\n",
])
def test_the_checker_sees_hidden_arrows(source: str) -> None:
    """The checker itself can fail: each of these, written in the harvester, is an arrow up."""
    found = arrows(source, "harvester.mint.pipeline")
    assert found and all(a.upward for a in found), found


def test_the_checker_allows_arrows_down() -> None:
    source = "from core.errors import HarvestError\nfrom mutators import candidates\nfrom . import shard\n"
    found = arrows(source, "harvester.mint.pipeline")
    assert [a.target for a in found] == ["core.errors", "mutators", "harvester.mint"]
    assert not any(a.upward for a in found)


def test_no_test_folder_shadows_a_layer_package() -> None:
    """A test folder that is a package named like a layer (tests/eval/__init__.py imported as ``eval``) would
    hide the real package for the whole session, and the tests would exercise whatever the editable install
    points at. Collection has imported every test module by now: each layer must still be the real one."""
    import importlib
    import sys

    for layer in LAYERS:
        module = sys.modules.get(layer) or importlib.import_module(layer)
        assert Path(module.__file__).resolve() == ROOT / layer / "__init__.py", f"{layer} is {module.__file__}"

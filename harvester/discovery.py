"""Project discovery: which folder of an exported repository is the dbt project to build.

The root ``dbt_project.yml`` by default; for package repositories (Fivetran style) whose buildable
data lives in ``integration_tests/`` with the package itself as ``local: ../``, that folder. A user's
``--project-dir`` always wins. The decision and the facts it rests on are returned as data.

The folders ``dbt_project.yml`` names (``model-paths``, ``seed-paths``, ``macro-paths``, ``test-paths``)
are read on the host (hashed into the pin, scanned for the clock, offered to an agent), so each is
resolved with its symlinks and ``..`` against the exported tree and refused, in one line, when it
lands outside it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dbt_harvest.core.errors import ProjectError


@dataclass(frozen=True)
class Project:
    """A discovered dbt project inside an exported tree."""

    rel_dir: str  # relative to the tree root, "." for the root
    name: str
    profile: str
    schema: str  # the profile schema the build needs
    seed_paths: tuple[str, ...]
    model_paths: tuple[str, ...]
    macro_paths: tuple[str, ...]
    test_paths: tuple[str, ...]
    reason: str
    snapshot_paths: tuple[str, ...] = ("snapshots",)


def load_yaml(path: Path) -> Any:
    """Parse a YAML file of the project; a parse error is a ProjectError naming the file."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path.name}: not valid YAML ({str(exc).splitlines()[0]})") from None


def _paths(config: dict[str, Any], key: str, legacy: str | None, default: str) -> tuple[str, ...]:
    value = config.get(key) or (config.get(legacy) if legacy else None) or [default]
    if isinstance(value, str):
        value = [value]
    return tuple(str(v) for v in value)


def inside_tree(tree: Path, base: Path, value: str, what: str) -> Path:
    """``base / value`` resolved (symlinks and '..' followed) when it stays inside ``tree``; otherwise a
    ProjectError naming ``what`` (e.g. "dbt_project.yml model-paths") and the entry."""
    shown = " ".join(repr(value).split())
    if not value or "\x00" in value or os.path.isabs(value):
        raise ProjectError(f"{what} entry {shown} is not a relative folder of the repository; refusing it")
    real_tree = Path(os.path.realpath(tree))
    resolved = Path(os.path.realpath(base / value))
    if resolved != real_tree and real_tree not in resolved.parents:
        raise ProjectError(f"{what} entry {shown} resolves outside the repository; refusing to read it")
    return resolved


def _depends_on_parent(project: Path) -> bool:
    for name in ("packages.yml", "dependencies.yml"):
        path = project / name
        if path.is_file():
            data = load_yaml(path)
            for entry in (data.get("packages") or []) if isinstance(data, dict) else []:
                if isinstance(entry, dict) and str(entry.get("local", "")).rstrip("/") in ("..", "../"):
                    return True
    return False


def _schema_for(config: dict[str, Any]) -> str:
    """Fivetran-style integration tests only build when the profile schema equals `<pkg>_schema`."""
    variables = config.get("vars") or {}
    if isinstance(variables, dict):
        flat: dict[str, Any] = {}
        for key, value in variables.items():
            if isinstance(value, dict):  # vars scoped to a package
                flat.update(value)
            else:
                flat[key] = value
        schema_vars = sorted((k, v) for k, v in flat.items() if str(k).endswith("_schema") and isinstance(v, str))
        if schema_vars and "{{" not in schema_vars[0][1]:
            return schema_vars[0][1]
    return "main"


def discover(tree: Path, project_dir: str | None = None) -> Project:
    """Find the dbt project to build in ``tree``; raise ProjectError when there is none."""
    if project_dir is not None:
        candidate = (tree / project_dir).resolve()
        if not candidate.is_relative_to(tree.resolve()):
            raise ProjectError(f"--project-dir {project_dir!r} leaves the repository")
        if not (candidate / "dbt_project.yml").is_file():
            raise ProjectError(f"no dbt project: {project_dir}/dbt_project.yml does not exist at this commit")
        return _describe(tree, candidate, "given with --project-dir")
    root = tree / "dbt_project.yml"
    integ = tree / "integration_tests" / "dbt_project.yml"
    if integ.is_file() and (not root.is_file() or _depends_on_parent(integ.parent)):
        return _describe(tree, integ.parent, "package repository: integration_tests/ builds the package as local: ../")
    if root.is_file():
        return _describe(tree, tree, "dbt_project.yml at the repository root")
    found = sorted(p.parent.relative_to(tree) for p in tree.glob("*/dbt_project.yml"))
    hint = f" (found one in {', '.join(map(str, found))}: pass --project-dir)" if found else ""
    raise ProjectError(f"no dbt project: no dbt_project.yml at the repository root{hint}")


def _describe(tree: Path, project: Path, reason: str) -> Project:
    config = load_yaml(project / "dbt_project.yml")
    if not isinstance(config, dict) or not config.get("name"):
        raise ProjectError(f"{project.relative_to(tree) / 'dbt_project.yml'}: has no project name")
    name = str(config["name"])
    rel_dir = str(project.relative_to(tree)) if project != tree else "."
    folders = {
        key: _paths(config, key, legacy, default)
        for key, legacy, default in (
            ("seed-paths", "data-paths", "seeds"),
            ("model-paths", "source-paths", "models"),
            ("macro-paths", None, "macros"),
            ("test-paths", None, "tests"),
            ("snapshot-paths", None, "snapshots"),
        )
    }
    where = "dbt_project.yml" if rel_dir == "." else f"{rel_dir}/dbt_project.yml"
    for key, values in folders.items():
        for value in values:
            inside_tree(tree, project, value, f"{where} {key}")
    return Project(
        rel_dir=rel_dir,
        name=name,
        profile=str(config.get("profile") or name),
        schema=_schema_for(config),
        seed_paths=folders["seed-paths"],
        model_paths=folders["model-paths"],
        macro_paths=folders["macro-paths"],
        test_paths=folders["test-paths"],
        reason=reason,
        snapshot_paths=folders["snapshot-paths"],
    )


def project_files(root: Path, project: Project, folders: tuple[str, ...], suffixes: tuple[str, ...]) -> list[str]:
    """Repository-relative paths of the regular files with one of ``suffixes`` under the project's
    ``folders`` (its model or macro paths), vendored packages left out, sorted. The tree is a repository's,
    so it is walked by fd and a link is never followed (``safe_fs.walk``)."""
    from dbt_harvest.harvester.sandbox import safe_fs

    base = "" if project.rel_dir in ("", ".") else project.rel_dir.rstrip("/") + "/"
    found: set[str] = set()
    for folder in folders:
        top = (base + folder.strip("/")).rstrip("/")
        entry = safe_fs.lstat(root, top) if top else None
        if top and (entry is None or entry.kind != "dir"):
            continue
        for rel, st in safe_fs.walk(root, top, descend=lambda path, _st: os.path.basename(path) != "dbt_packages"):
            if stat.S_ISREG(st.st_mode) and rel.endswith(suffixes):
                found.add(rel)
    return sorted(found)

"""What an interpreter is made of, as the sandbox needs to bind it: run inside that interpreter.

Why it exists: the sandbox binds only the parts of a Python install a dbt build needs (``command.python_binds``).
For this process they are read in-process; for a pin's toolchain (issue 61: another virtualenv with another
dbt) they must be read by that interpreter itself, so this module is also run as a script there
(``python interpreter_probe.py NAME...`` prints the facts as JSON). It imports only the standard library
(and ``packaging`` where the interpreter has it: every dbt-core brings it), never anything of ours.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
import sysconfig
from typing import Any


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(dist: importlib.metadata.Distribution) -> list[str]:
    """The distributions ``dist`` needs (markers evaluated with no extra), by name."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # an interpreter without packaging: take every requirement's name, markers unread
        return [re.split(r"[\s;<>=!~\[(]", text, maxsplit=1)[0] for text in dist.requires or []]
    names = []
    for text in dist.requires or []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return names


def _closure(names: list[str]) -> tuple[list[importlib.metadata.Distribution], list[str]]:
    """The installed distributions ``names`` need, transitively, and the names not installed."""
    found: dict[str, importlib.metadata.Distribution] = {}
    missing: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        key = _key(name)
        if key in found or key in missing:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.add(key)
            continue
        found[key] = dist
        todo += _requirement_names(dist)
    return list(found.values()), sorted(missing)


def _native(dist: importlib.metadata.Distribution) -> list[str]:
    """Extension modules of a distribution not installed from a manylinux wheel (a manylinux wheel bundles
    every library it needs besides the system's)."""
    wheel = dist.read_text("WHEEL") or ""
    if "manylinux" in wheel or "musllinux" in wheel:
        return []
    return [
        str(dist.locate_file(file)) for file in dist.files or [] if str(file).endswith(".so") or ".so." in str(file)
    ]


def facts(names: list[str]) -> dict[str, Any]:
    """This interpreter: its executable, standard library, prefixes, zipped library, ``pyvenv.cfg``, and for
    each distribution ``names`` need (transitively) its version, site folder and unbundled native files."""
    paths = sysconfig.get_paths()
    dists, missing = _closure(names)
    config = os.path.join(sys.prefix, "pyvenv.cfg") if sys.prefix != sys.base_prefix else ""
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    return {
        "executable": sys.executable,
        "version": ".".join(str(part) for part in sys.version_info[:3]),
        "stdlib": paths["stdlib"],
        "platstdlib": paths["platstdlib"],
        "prefixes": [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],
        "zips": [entry for entry in sys.path if entry.endswith(".zip") and os.path.isfile(entry)],
        "pyvenv_cfg": config if config and os.path.isfile(config) else "",
        "base_site": [base["purelib"], base["platlib"]],
        "distributions": [
            {
                "name": _key(dist.metadata["Name"]),
                "version": dist.version,
                "site": str(dist.locate_file("")),
                "native": _native(dist),
            }
            for dist in dists
        ],
        "missing": missing,
    }


if __name__ == "__main__":
    json.dump(facts(sys.argv[1:]), sys.stdout)

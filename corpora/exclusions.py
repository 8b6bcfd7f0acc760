"""The Spider 2.0-DBT exclusion list, shipped as package data, loaded and hash-checked.

The benchmark's own projects and domain packages must never enter our corpus; its generic utility
packages (dbt_utils and friends) may be depended on, only the utility repositories themselves are
excluded. The facts live in ``corpora/data/spider2_dbt_exclusions.json`` (see ``data/SOURCE.md``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from dbt_harvest.corpora.errors import ExclusionsError
from dbt_harvest.corpora.repos import identity

#: sha256 of the shipped file; a change to the facts must update this on purpose.
SHIPPED_SHA256 = "ac0b4b3b3937adcda0a1ed38363798c1f7cc80b5e0025da5313eefab97afdfef"
_FILE = "spider2_dbt_exclusions.json"


@dataclass(frozen=True)
class Exclusions:
    """What the benchmark owns, normalised for matching (lower-case identities)."""

    source: dict[str, Any]
    project_names: frozenset[str]
    domain_packages: frozenset[str]
    utility_packages: frozenset[str]
    instance_ids: frozenset[str] = frozenset()
    database_files: frozenset[str] = frozenset()

    @property
    def benchmark_repos(self) -> frozenset[str]:
        """Package identities that ARE the benchmark's (domain and utility alike)."""
        return self.domain_packages | self.utility_packages

    def describe(self) -> str:
        src = self.source
        return f"Spider 2.0-DBT ({src.get('repo', '?')}@{str(src.get('commit', '?'))[:12]})"


def exclusions_from_dict(data: dict[str, Any]) -> Exclusions:
    """Validate the JSON shape; normalise package entries (hub ids and git URLs) to identities."""
    try:
        return Exclusions(
            source=dict(data["source"]),
            project_names=frozenset(str(n).lower() for n in data["project_names"]),
            domain_packages=frozenset(identity(str(p)) for p in data["domain_packages"]),
            utility_packages=frozenset(identity(str(p)) for p in data["utility_packages"]),
            instance_ids=frozenset(str(i) for i in data.get("instance_ids", [])),
            database_files=frozenset(str(f) for f in data.get("database_files", [])),
        )
    except (KeyError, TypeError) as exc:
        raise ExclusionsError(f"exclusion list is malformed (missing or bad field {exc})") from None


def load_exclusions(path: Path | None = None) -> Exclusions:
    """The shipped list (hash-checked) or, for tests and experiments, another file of the same shape."""
    if path is None:
        raw = resources.files("dbt_harvest.corpora").joinpath("data", _FILE).read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if digest != SHIPPED_SHA256:
            raise ExclusionsError(
                f"shipped {_FILE} hashes to {digest[:12]}, expected {SHIPPED_SHA256[:12]}; reinstall dbt-harvest"
            )
        where = f"corpora/data/{_FILE}"
    else:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise ExclusionsError(f"no exclusion list at {path}") from None
        where = str(path)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ExclusionsError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ExclusionsError(f"{where}: not a JSON object")
    return exclusions_from_dict(data)

"""Which dbt release a new pin builds under: what its project and its vendored packages require.

Why it exists: ``harvest add`` picks a pin's toolchain (issue 61) from the project's ``require-dbt-version``
and those of the package versions it resolved (an older commit's package lock pins releases that refuse
today's dbt), otherwise the newest supported release that builds it. This module reads the requirements
and orders the releases to try; ``harvest add`` builds on them in that order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dbt_harvest.core.errors import PackageError
from dbt_harvest.harvester.packages.specs import parse_yaml
from dbt_harvest.harvester.packages.vendor import install_path
from dbt_harvest.harvester.toolchain.releases import Release, satisfies, supported


def _required(project_file: Path) -> Any:
    try:
        return parse_yaml(project_file.read_bytes(), str(project_file)).get("require-dbt-version")
    except (OSError, PackageError):
        return None  # dbt says what is wrong with the file when it builds


def own_requirement(project_path: Path) -> list[tuple[str, Any]]:
    """The project's own ``require-dbt-version`` as ``[(where, value)]`` ([] when it states none)."""
    required = _required(project_path / "dbt_project.yml")
    return [("the project", required)] if required else []


def requirements(project_path: Path) -> list[tuple[str, Any]]:
    """``require-dbt-version`` of the project and of every package vendored into it, each with whose it is."""
    found = own_requirement(project_path)
    try:
        packages = install_path(project_path)
    except PackageError:
        return found
    for project_file in sorted(packages.glob("*/dbt_project.yml")) if packages.is_dir() else ():
        required = _required(project_file)
        if required:
            found.append((f"package {project_file.parent.name}", required))
    return found


def releases_meeting(required: list[tuple[str, Any]], pool: tuple[Release, ...] | None = None) -> tuple[Release, ...]:
    """The supported releases (newest first) that meet every requirement."""
    return tuple(
        release
        for release in (pool if pool is not None else supported())
        if all(satisfies(release, value, where) for where, value in required)
    )

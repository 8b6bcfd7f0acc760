"""The embedded example: an original dbt project and its packages, shipped as package data.

Why it exists: `harvest demo` and the end-to-end tests need a real dbt repository with real business
rules and real hub-style package dependencies, offline. The files live under ``projects/``:

- ``projects/shop_analytics/``: the project (seeds, staging and mart models, a macro, schema YAML with
  descriptions and dbt tests). Its packages.yml asks for ``harvestlabs/shop_utils`` in the range
  ``>=0.2.0, <1.0.0``.
- ``projects/packages/shop_utils/<tag>/``: every released version of that package (tags 0.1.0, 0.2.0,
  0.3.0, 0.3.1, 1.0.0); from 0.2.0 on it depends on ``harvestlabs/shop_calendar`` ``>=0.2.0, <0.3.0``.
- ``projects/packages/shop_calendar/<tag>/``: that package's versions (tags v0.1.0, v0.2.0, v0.2.1,
  v1.0.0: note the ``v`` prefix, as many real packages tag).

The right resolution is shop_utils 0.3.1 and shop_calendar 0.2.1; any other pick either fails to compile
(0.2.0 lacks ``margin_pct``; 1.0.0 renamed ``safe_ratio`` and ``month_start``) or changes the gold (0.3.0
returns margins as fractions; shop_calendar 0.2.0 negates ``days_between``).

:func:`materialize_example` writes the project as a git repository and the packages as a package mirror
(``<mirror>/harvestlabs/<package>``), ready for ``harvest add <repo>@<commit> --package-mirror <mirror>``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.harvester.gitrepos import GitRepoError, make_git_repo, make_package_mirror

PROJECTS_DIR = Path(__file__).resolve().parent / "projects"
PROJECT_DIR = PROJECTS_DIR / "shop_analytics"
PACKAGES_DIR = PROJECTS_DIR / "packages"
PROJECT_NAME = "shop_analytics"
HUB_ORG = "harvestlabs"

#: Package name -> the version folder (= git tag) the example's version ranges resolve to.
EXAMPLE_PACKAGE_VERSIONS: dict[str, str] = {"shop_utils": "0.3.1", "shop_calendar": "v0.2.1"}


@dataclass(frozen=True)
class Example:
    """A materialized example: the project repository, its commit, the package mirror, the add spec."""

    project_repo: Path
    commit: str
    mirror: Path
    spec: str  # "<project_repo>@<commit>", what `harvest add` takes


def example_packages() -> dict[str, Path]:
    """Hub id -> folder of version folders, for :func:`harvester.gitrepos.make_package_mirror`."""
    return {f"{HUB_ORG}/{folder.name}": folder for folder in sorted(PACKAGES_DIR.iterdir()) if folder.is_dir()}


def materialize_example(dest: Path, *, reuse: bool = False) -> Example:
    """Write ``dest/shop_analytics`` (a git repository, one commit) and ``dest/mirror`` (the packages).

    ``dest`` must not exist or be an empty folder, unless ``reuse``: then an example already at ``dest``
    is kept when it is identical (same commit ids and tags) to what the shipped files give, and replaced
    otherwise. Everything is written in a temporary sibling folder and renamed into place, so an
    interrupted call leaves no half-written example. The commit ids are the same on every machine.
    """
    dest = Path(dest).absolute()
    in_use = dest.exists() and (not dest.is_dir() or any(dest.iterdir()))
    if in_use and not reuse:
        raise GitRepoError(f"{dest} already exists and is not empty; pick a fresh folder for the example")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        make_git_repo(PROJECT_DIR, staging / PROJECT_NAME)
        make_package_mirror(staging / "mirror", example_packages())
        if in_use and _refs(dest) == _refs(staging):
            shutil.rmtree(staging)
        else:
            _swap_into_place(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    repo_path = dest / PROJECT_NAME
    commit = _refs(dest)[PROJECT_NAME]["HEAD"]
    return Example(
        project_repo=repo_path,
        commit=commit,
        mirror=dest / "mirror",
        spec=f"{repo_path}@{commit}",
    )


def _refs(root: Path) -> dict[str, dict[str, str]]:
    """Repository (relative path) -> {ref name: commit id} for the example and every mirror repository;
    empty where ``root`` does not hold a readable example."""
    import pygit2

    found: dict[str, dict[str, str]] = {}
    candidates = [root / PROJECT_NAME, *sorted((root / "mirror").glob("*/*"))]
    for path in candidates:
        try:
            repo = pygit2.Repository(str(path))
            refs = {name: str(repo.references[name].target) for name in repo.references}
            refs["HEAD"] = str(repo.head.target)
        except (pygit2.GitError, KeyError, ValueError):
            return {}
        found[path.relative_to(root).as_posix()] = refs
    return found


def _swap_into_place(staging: Path, dest: Path) -> None:
    """Rename ``staging`` to ``dest``; an existing ``dest`` is moved aside first and then deleted."""
    if dest.exists() and dest.is_dir() and not any(dest.iterdir()):
        dest.rmdir()
    if not dest.exists():
        os.replace(staging, dest)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
    old.rmdir()
    os.replace(dest, old)
    os.replace(staging, dest)
    if old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink()

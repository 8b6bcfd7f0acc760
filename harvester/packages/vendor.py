"""Install resolved packages where dbt looks for them, without `dbt deps`.

Why it exists: dbt loads every package from the project's ``packages-install-path`` (default
``dbt_packages``) and needs nothing else: no lock file, no network (measured with dbt-core 1.11: a
`dbt build` with ``dbt_packages/<name>`` in place and no ``package-lock.yml`` finds every macro and
model). Git and hub packages are exported from their exact commit without ``.git``; a ``local:``
package becomes a relative symlink, as `dbt deps` itself installs it, so that a Fivetran-style
``integration_tests`` project can point at the package around it (``local: ../``) without copying a
folder into itself, and the link survives copying the workspace with ``symlinks=True``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from dbt_harvest.core.errors import FetchError, PackageError
from dbt_harvest.core.pin import PackageRecord
from dbt_harvest.harvester.gitstore import GitStore
from dbt_harvest.harvester.packages.resolver import split_git_source
from dbt_harvest.harvester.packages.sources import MIRROR_ENV, load_mirror, mirror_name
from dbt_harvest.harvester.packages.specs import parse_yaml

DEFAULT_INSTALL_PATH = "dbt_packages"


def install_path(project_dir: Path) -> Path:
    """The folder dbt loads packages from: ``packages-install-path`` of dbt_project.yml, inside the project."""
    project_file = project_dir / "dbt_project.yml"
    configured = DEFAULT_INSTALL_PATH
    if project_file.is_file():
        data = parse_yaml(project_file.read_bytes(), str(project_file))
        value = data.get("packages-install-path") or data.get("modules-path")
        if value is not None:
            configured = str(value)
    relative = Path(configured)
    target = (project_dir / relative).resolve()
    if relative.is_absolute() or not target.is_relative_to(project_dir.resolve()):
        raise PackageError(
            f"{project_file}: packages-install-path {configured!r} leaves the project; it must be a folder inside it"
        )
    return project_dir / relative


def vendor_packages(
    project_dir: Path,
    packages: Sequence[PackageRecord],
    store: GitStore,
    *,
    workspace: Path | None = None,
) -> None:
    """Write ``<install path>/<name>`` for every package, replacing whatever the folder held.

    The install folder is emptied first, as `dbt deps` does (a committed ``dbt_packages`` may hold stale
    versions). ``workspace`` (default: the project folder) is the folder a ``local:`` package must stay
    inside; it is checked before the package is read.
    """
    if not packages:
        return
    from dbt_harvest.harvester.sandbox import safe_fs

    project_dir = Path(project_dir)
    inside = Path(workspace if workspace is not None else project_dir)
    if not project_dir.resolve().is_relative_to(inside.resolve()):  # a project folder a row named out of the tree
        raise PackageError(f"the project folder {project_dir} is not inside the workspace {inside}; refusing to vendor")
    target = install_path(project_dir)
    rel = os.path.relpath(target, inside)
    entry = safe_fs.lstat(inside, rel)  # beneath the workspace, no link followed: never empties a host folder
    if entry is not None and entry.kind == "dir":
        safe_fs.rmtree(inside / rel)
    elif entry is not None:
        safe_fs.remove(inside, rel)
    safe_fs.make_dirs(inside, rel)
    for record in sorted(packages, key=lambda r: r.name):
        dest = target / record.name
        if record.name in ("", ".", "..") or "/" in record.name or os.sep in record.name:
            raise PackageError(f"package {record.source} has an unusable name {record.name!r}")
        if record.source.startswith("local:"):
            _link_local(project_dir, record, dest, workspace)
        else:
            _export(record, dest, store)


def _export(record: PackageRecord, dest: Path, store: GitStore) -> None:
    subdir = split_git_source(record.source)[1] if record.source.startswith("git:") else ""
    if not record.commit:
        raise PackageError(f"package {record.name} ({record.source}) has no commit to vendor from")
    try:
        name, fetch_from = _mirror_of(record, store)
        repo = store.mirror(name, fetch_from=fetch_from)
        store.export(repo, record.commit, dest, subdir=subdir)
    except FetchError as exc:
        raise PackageError(f"cannot vendor package {record.name} ({record.source}): {exc}") from None


def _mirror_of(record: PackageRecord, store: GitStore) -> tuple[str, str | None]:
    """(name of the package's mirror, where to fetch it from when that is not the name itself): a package
    recorded without a public URL is found in this HARVEST_HOME, else in ``$HARVEST_PACKAGE_MIRROR``."""
    name = record.url or mirror_name(record.source)
    if record.url or store.has_mirror(name):
        return name, None
    mirror = load_mirror(None)
    kind, _, rest = record.source.partition(":")
    location = None
    if mirror is not None:
        location = (
            mirror.hub_location(rest) if kind == "hub" else mirror.git_location(split_git_source(record.source)[0])
        )
    if location is None:
        raise PackageError(
            f"package {record.name} ({record.source}) was resolved from a local package mirror that this "
            f"HARVEST_HOME has not seen; set ${MIRROR_ENV} to that mirror (or re-run `harvest add` with --package-mirror)"
        )
    return name, location


def _link_local(project_dir: Path, record: PackageRecord, dest: Path, workspace: Path | None) -> None:
    source = (project_dir / record.source[len("local:") :]).resolve()
    inside = Path(workspace if workspace is not None else project_dir).resolve()
    if source != inside and inside not in source.parents:
        raise PackageError(f"local package {record.name} points outside the workspace; refusing to vendor it")
    if not (source / "dbt_project.yml").is_file():
        raise PackageError(f"local package {record.name} ({source}) has no dbt_project.yml")
    os.symlink(os.path.relpath(source, dest.parent.resolve()), dest, target_is_directory=True)

"""Resolve a project's dbt packages, transitively, to exact commits (what `dbt deps` would install).

Why it exists: `dbt deps` needs the network, also for the packages that packages depend on. This
resolver walks the same way dbt does (breadth first; every request for a package is merged into one
combined range; each resolved package's own packages.yml, read at its commit, adds the next round of
requests) but reads repositories through GitStore and the package mirror. A shipped
``package-lock.yml`` whose ``sha1_hash`` matches the declared packages wins, exactly as in dbt: its
exact versions and revisions are installed and nothing is re-resolved. A rebuild passes the records its
pin holds (``pinned``): each package is found again at its recorded version and commit, and nothing is
resolved from the ranges. The result is deterministic: the same inputs give the same records, sorted by
package name.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from dbt_harvest.core.errors import FetchError, PackageError, ToolchainError
from dbt_harvest.core.pin import PackageRecord
from dbt_harvest.harvester.gitstore import GitStore, normalize_url
from dbt_harvest.harvester.packages.sources import Locator, PackageMirror, is_local_location, mirror_name
from dbt_harvest.harvester.packages.specs import (
    DEPENDENCIES_FILE,
    PACKAGES_FILE,
    Declared,
    GitSpec,
    HubSpec,
    PackageSpec,
    declared_from_texts,
    parse_yaml,
    read_declared,
    read_lock,
)
from dbt_harvest.harvester.packages.versions import VersionRequest, choose_version, tag_versions

ROOT_REQUESTER = "the root project"
LOCK_REQUESTER = "package-lock.yml"
PIN_REQUESTER = "the pin"
SUBDIR_MARK = "#subdirectory="


@dataclass(frozen=True)
class _Request:
    requester: str
    spec: PackageSpec
    base: Path | None  # the folder a local path is relative to (None inside a git package)


@dataclass(frozen=True)
class _Resolution:
    record: PackageRecord
    repo_location: str = ""
    subdir: str = ""
    local_path: Path | None = None


def resolve_packages(
    project_dir: Path,
    store: GitStore,
    mirror: PackageMirror | None,
    *,
    network: bool | None = None,
    tree: Path | None = None,
    pinned: Sequence[PackageRecord] | None = None,
    dbt_version: str | None = None,
    as_of: int | None = None,
    substitutes: Mapping[str, str] | None = None,
) -> tuple[PackageRecord, ...]:
    """Every package the project needs (declared and transitive) at an exact commit, sorted by name.

    ``network``: None probes the hub/git host once (fails fast offline), False never uses it.
    ``tree``: the exported repository (default: the project folder); a ``local:`` package must resolve,
    symlinks and '..' followed, inside it, or it is refused before anything of it is read.
    ``pinned``: the packages a pin records (a rebuild): each is found again at its own version and commit,
    never resolved anew from the ranges (a mirror that gained a newer release inside a range would otherwise
    change what the pin builds with), and a package the sources cannot give at that commit is a PackageError.
    ``dbt_version``: the dbt-core the packages must support (a pin's toolchain, ``harvester.toolchain``);
    None: the installed one. ``as_of`` (seconds since the epoch): a version range resolves among the releases
    tagged on commits made by then, as ``dbt deps`` did on that day (a history fix's parent: the packages its
    authors built with, not releases that dropped the macros it dispatches to); None: every release.
    ``substitutes``: hub id -> a release that stands in where no release satisfies what the project asks
    (a tag its source lacks); the record says ``substituted``. A substitute for a package that resolves as
    asked is refused, so that one is never taken silently.
    """
    project_dir = Path(project_dir).resolve()
    resolver = _Resolver(
        project_dir,
        store,
        Locator(mirror, network),
        Path(tree).resolve() if tree else project_dir,
        dbt_version,
        as_of,
        {k.lower(): v for k, v in (substitutes or {}).items()},
    )
    if pinned is not None:
        return resolver.found_again(pinned)
    declared = read_declared(project_dir)
    if not declared.specs:
        if resolver.substitutes:
            raise PackageError(
                f"--package-version names {_names(resolver.substitutes)}, but the project declares no packages"
            )
        return ()
    lock = read_lock(project_dir)
    if lock is not None and lock[0] and lock[1] == declared.sha1_hash:
        resolutions = resolver.from_lock(lock[0], declared)
    else:
        resolutions = resolver.transitive(declared)
    unused = {k: v for k, v in resolver.substitutes.items() if k not in resolver.used}
    if unused:
        raise PackageError(f"--package-version names {_names(unused)}, which no package of the project is")
    return _checked(project_dir, resolutions)


def _names(substitutes: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(substitutes.items()))


def git_source(url: str, subdir: str) -> str:
    """The record's source of a git package (subdirectory appended after ``#subdirectory=``)."""
    return f"git:{url}{SUBDIR_MARK}{subdir}" if subdir else f"git:{url}"


def split_git_source(source: str) -> tuple[str, str]:
    """(url, subdirectory) of a ``git:`` source."""
    body = source[len("git:") :]
    url, _, subdir = body.partition(SUBDIR_MARK)
    return url, subdir


class _Resolver:
    def __init__(
        self,
        project_dir: Path,
        store: GitStore,
        locator: Locator,
        tree: Path,
        dbt_version: str | None = None,
        as_of: int | None = None,
        substitutes: Mapping[str, str] | None = None,
    ) -> None:
        self.substitutes = dict(substitutes or {})
        self.used: set[str] = set()
        self.project_dir = project_dir
        self.dbt_version = dbt_version
        self.as_of = as_of
        self.tree = tree
        self.store = store
        self.locator = locator
        self._repos: dict[str, pygit2.Repository] = {}
        self._tags: dict[str, dict[str, tuple[str, str]]] = {}
        self._names: dict[tuple[str, str, str], str] = {}

    # -- the two walks -------------------------------------------------------------------------

    def transitive(self, declared: Declared) -> list[_Resolution]:
        groups: dict[str, list[_Request]] = {}
        expanded: set[tuple[str, str]] = set()
        pending = [_Request(ROOT_REQUESTER, spec, self.project_dir) for spec in declared.specs]
        rounds = 0
        while pending:
            rounds += 1
            if rounds > 100:
                raise PackageError("package resolution did not settle after 100 rounds (a dependency cycle?)")
            following: list[_Request] = []
            for request in pending:
                key = self._key(request)
                groups.setdefault(key, []).append(request)
                resolution = self._resolve_group(key, groups[key])
                marker = (key, resolution.record.commit or str(resolution.local_path))
                if marker in expanded:
                    continue
                expanded.add(marker)
                following.extend(self._dependencies(resolution))
            pending = following
        return [self._resolve_group(key, requests) for key, requests in groups.items()]

    def found_again(self, pinned: Sequence[PackageRecord]) -> tuple[PackageRecord, ...]:
        """The pinned records, each checked against what its source gives at the recorded version or commit (and
        fetched into this home's mirrors on the way, so that vendoring finds it)."""
        for record in pinned:
            kind = record.source.partition(":")[0]
            if kind == "local":
                continue  # a path inside the repository's own tree: the commit pins it
            spec: PackageSpec
            if kind == "hub":
                spec = HubSpec(record.source[len("hub:") :], (record.version,))
            elif kind == "git":
                url, subdir = split_git_source(record.source)
                spec = GitSpec(url, record.commit, subdir)
            else:
                raise PackageError(f"package {record.name} has a source this harvester cannot read: {record.source!r}")
            request = _Request(PIN_REQUESTER, spec, self.project_dir)
            got = self._resolve_group(self._key(request), [request]).record
            if (got.version, got.commit) != (record.version, record.commit):
                raise PackageError(
                    f"package {record.name} ({record.source}): the pin records {record.version or 'revision'} at "
                    f"{record.commit[:12]}, but its source gives {got.version or 'revision'} at {got.commit[:12]}; "
                    "a rebuild must build with the pinned packages (restore that commit in the package mirror)"
                )
        return tuple(sorted(pinned, key=lambda r: r.name))

    def from_lock(self, specs: tuple[PackageSpec, ...], declared: Declared) -> list[_Resolution]:
        written = {self._key(_Request(ROOT_REQUESTER, s, self.project_dir)): s for s in declared.specs}
        resolutions = []
        for spec in specs:
            request = _Request(LOCK_REQUESTER, spec, self.project_dir)
            key = self._key(request)
            resolution = self._resolve_group(key, [request])
            original = written.get(key)
            if original is not None:
                record = resolution.record
                resolution = _Resolution(
                    record=PackageRecord(
                        name=record.name,
                        source=record.source,
                        requested=_requested([original]),
                        version=record.version,
                        commit=record.commit,
                        url=record.url,
                        substituted=record.substituted,
                    ),
                    repo_location=resolution.repo_location,
                    subdir=resolution.subdir,
                    local_path=resolution.local_path,
                )
            resolutions.append(resolution)
        return resolutions

    # -- one package ---------------------------------------------------------------------------

    def _key(self, request: _Request) -> str:
        spec = request.spec
        if isinstance(spec, HubSpec):
            return f"hub:{spec.package.lower()}"
        if isinstance(spec, GitSpec):
            url = spec.git[:-4] if spec.git.endswith(".git") else spec.git
            return f"git:{normalize_url(url)}#{spec.subdirectory}"
        if request.base is None:
            raise PackageError(
                f"{request.requester} declares local package {spec.local!r}, which only works inside "
                "the project being harvested"
            )
        local = (request.base / spec.local).resolve()
        if os.path.isabs(spec.local) or (local != self.tree and self.tree not in local.parents):
            shown = " ".join(repr(spec.local).split())
            raise PackageError(
                f"{request.requester} declares local package {shown}, which resolves outside the repository; "
                "only a folder inside the harvested repository can be a local package"
            )
        return f"local:{local}"

    def _resolve_group(self, key: str, requests: list[_Request]) -> _Resolution:
        spec = requests[0].spec
        if isinstance(spec, HubSpec):
            return self._resolve_hub(spec.package, requests)
        if isinstance(spec, GitSpec):
            return self._resolve_git(spec, requests)
        return self._resolve_local(Path(key[len("local:") :]), requests)

    def _resolve_hub(self, hub_id: str, requests: list[_Request]) -> _Resolution:
        location = self.locator.hub(hub_id)
        public = "" if is_local_location(location) else location
        repo = self._repo(location, hub_id, public or mirror_name(f"hub:{hub_id}"))
        versions = self._tag_versions(location, repo)
        asks = [
            VersionRequest(r.requester, r.spec.versions, r.spec.install_prerelease)  # type: ignore[union-attr]
            for r in requests
        ]

        def usable(v: str) -> bool:
            return self._released(repo, versions[v][1]) and self._dbt_compatible(repo, versions[v][1])

        substitute = self.substitutes.get(hub_id.lower())
        substituted = False
        try:
            version = choose_version(hub_id, asks, sorted(versions), compatible=usable)
        except PackageError as exc:
            if substitute is None:
                raise
            if substitute not in versions or not usable(substitute):
                raise PackageError(
                    f"{hub_id}: --package-version {substitute} is not a usable release of its source "
                    f"(releases: {', '.join(sorted(versions)[-6:]) or 'none'}); {exc}"
                ) from None
            version, substituted = substitute, True
        else:
            if substitute is not None:
                raise PackageError(
                    f"{hub_id} resolves as the project asks (to {version}): --package-version stands in only for a "
                    "release its source lacks; drop it"
                )
        if substitute is not None:
            self.used.add(hub_id.lower())
        commit = versions[version][1]
        name = self._project_name(repo, location, commit, "", hub_id)
        record = PackageRecord(
            name=name,
            source=f"hub:{hub_id}",
            requested=_requested([r.spec for r in requests]),
            version=version,
            commit=commit,
            url=public,
            substituted=substituted,
        )
        return _Resolution(record=record, repo_location=location)

    def _resolve_git(self, spec: GitSpec, requests: list[_Request]) -> _Resolution:
        revisions = sorted({r.spec.revision for r in requests if r.spec.revision})  # type: ignore[union-attr]
        if len(revisions) > 1:
            by = "; ".join(f"{r.requester} asks for {r.spec.revision or 'HEAD'!r}" for r in requests)  # type: ignore[union-attr]
            raise PackageError(f"conflicting revisions of git package {spec.git}: {by}")
        revision = revisions[0] if revisions else "HEAD"
        location = self.locator.git(spec.git)
        public = "" if is_local_location(spec.git) else spec.git
        source = git_source(spec.git, spec.subdirectory)
        repo = self._repo(location, spec.git, public or mirror_name(source))
        try:
            commit = self.store.resolve(repo, revision, allow_ref=True).commit
        except FetchError as exc:
            raise PackageError(f"cannot resolve git package {spec.git} at {revision!r}: {exc}") from None
        name = self._project_name(repo, location, commit, spec.subdirectory, spec.git)
        record = PackageRecord(
            name=name,
            source=source,
            requested=revision,
            version="",
            commit=commit,
            url=public,
        )
        return _Resolution(record=record, repo_location=location, subdir=spec.subdirectory)

    def _resolve_local(self, path: Path, requests: list[_Request]) -> _Resolution:
        project_file = path / "dbt_project.yml"
        if not project_file.is_file():
            raise PackageError(
                f"local package {requests[0].spec.local!r} ({path}) has no dbt_project.yml"  # type: ignore[union-attr]
            )
        name = _name_of(project_file.read_bytes(), str(project_file))
        rel = Path(os.path.relpath(path, self.project_dir)).as_posix()
        record = PackageRecord(name=name, source=f"local:{rel}", requested=rel, version="", commit="", url="")
        return _Resolution(record=record, local_path=path)

    def _dependencies(self, resolution: _Resolution) -> list[_Request]:
        record = resolution.record
        requester = f"package {record.name} {record.version or record.commit[:12] or record.requested}"
        if resolution.local_path is not None:
            declared = read_declared(resolution.local_path)
            return [_Request(requester, spec, resolution.local_path) for spec in declared.specs]
        repo = self._repos[resolution.repo_location]
        read = lambda file: self.store.read_file(repo, record.commit, posixpath.join(resolution.subdir, file))  # noqa: E731
        declared = declared_from_texts(read(PACKAGES_FILE), read(DEPENDENCIES_FILE), requester)
        return [_Request(requester, spec, None) for spec in declared.specs]

    # -- repository helpers --------------------------------------------------------------------

    def _repo(self, location: str, what: str, name: str) -> pygit2.Repository:
        """The mirror of a package: kept under ``name`` (its public URL, else a mirror name), fetched
        from ``location`` (the package mirror or the network)."""
        if location not in self._repos:
            try:
                fetch_from = None if location == name else location
                self._repos[location] = self.store.mirror(name, fetch_from=fetch_from)
            except FetchError as exc:
                raise PackageError(f"cannot fetch package {what}: {exc}") from None
        return self._repos[location]

    def _tag_versions(self, location: str, repo: pygit2.Repository) -> dict[str, tuple[str, str]]:
        if location not in self._tags:
            self._tags[location] = tag_versions(self.store.tags(repo))
        return self._tags[location]

    def _project_name(self, repo: pygit2.Repository, location: str, commit: str, subdir: str, what: str) -> str:
        cache_key = (location, commit, subdir)
        if cache_key not in self._names:
            where = posixpath.join(subdir, "dbt_project.yml")
            data = self.store.read_file(repo, commit, where)
            if data is None:
                raise PackageError(f"package {what} has no {where} at commit {commit[:12]}")
            self._names[cache_key] = _name_of(data, f"{what}@{commit[:12]}:{where}")
        return self._names[cache_key]

    def _released(self, repo: pygit2.Repository, commit: str) -> bool:
        """Whether a release's commit was made by ``as_of`` (always, without one)."""
        if self.as_of is None:
            return True
        try:
            found = repo[commit]
        except (KeyError, ValueError):
            return True
        return not isinstance(found, pygit2.Commit) or int(found.commit_time) <= self.as_of

    def _dbt_compatible(self, repo: pygit2.Repository, commit: str) -> bool:
        data = self.store.read_file(repo, commit, "dbt_project.yml")
        if data is None:
            return True
        try:
            required = parse_yaml(data, "dbt_project.yml").get("require-dbt-version")
        except PackageError:
            return True
        return _satisfies_dbt(required, self.dbt_version)


def _satisfies_dbt(required: Any, dbt_version: str | None = None) -> bool:
    """Whether dbt-core ``dbt_version`` (None: the installed one) meets a ``require-dbt-version`` value."""
    from importlib import metadata

    from dbt_harvest.harvester.toolchain.releases import version_meets

    try:
        return version_meets(dbt_version or metadata.version("dbt-core"), required)
    except ToolchainError:
        return True  # dbt would refuse to parse it later; not a reason to skip a version here


def _name_of(data: bytes, where: str) -> str:
    name = parse_yaml(data, where).get("name")
    if not isinstance(name, str) or not name.strip():
        raise PackageError(f"{where}: no project name")
    return name.strip()


def _requested(specs: list[PackageSpec]) -> str:
    texts: list[str] = []
    for spec in specs:
        values = (
            spec.versions
            if isinstance(spec, HubSpec)
            else ((spec.revision or "HEAD",) if isinstance(spec, GitSpec) else (spec.local,))
        )
        for value in values:
            if value not in texts:
                texts.append(value)
    return ",".join(texts)


def _checked(project_dir: Path, resolutions: list[_Resolution]) -> tuple[PackageRecord, ...]:
    """Refuse two packages with one dbt name (or the root's name); sort by name."""
    root_name = ""
    root_file = project_dir / "dbt_project.yml"
    if root_file.is_file():
        try:
            root_name = _name_of(root_file.read_bytes(), str(root_file))
        except PackageError:
            root_name = ""
    by_name: dict[str, PackageRecord] = {}
    for resolution in resolutions:
        record = resolution.record
        if record.name == root_name:
            raise PackageError(f"package {record.source} has the same name as the root project ({record.name})")
        other = by_name.get(record.name)
        if other is not None and other != record:
            raise PackageError(f"two packages are both named {record.name}: {other.source} and {record.source}")
        by_name[record.name] = record
    return tuple(by_name[name] for name in sorted(by_name))

"""`harvest add`: fetch a repository at an exact commit, vendor its packages, build it twice
sandboxed (the second time in another workspace under another database file name, and a third time
when the two disagree, to tell a value that depends on the database's name from one that changes on
every build), keep the outputs that every build agreed on as gold, and write the pin.

The first two builds share one sandboxed child (``harvester.sandbox.parallel``), started as soon as the
commit is exported: it imports dbt while the packages are vendored, the patch applied and the tree
copied into its two workspaces, then builds both at once, a fork each.

Order matters for crash safety: everything lands in a fresh run folder under HARVEST_HOME first; the
gold file is installed content-addressed (atomic, verified by hash on read); the pin is written last,
atomically. A killed run therefore leaves no pin and no gold that looks whole, and re-running completes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from dbt_harvest.core import atomic
from dbt_harvest.core.clock import default_clock, normalise_clock
from dbt_harvest.core.errors import (
    BuildError,
    FetchError,
    GoldError,
    HarvestError,
    PackageError,
    PinError,
    SandboxError,
    SpecError,
)
from dbt_harvest.core.home import builds_dir, mirrors_dir, pins_dir
from dbt_harvest.core.licenses import detect_license
from dbt_harvest.core.patching import apply_patch
from dbt_harvest.core.pin import (
    DEFAULT_DATABASE,
    BaselineTest,
    Column,
    PackageRecord,
    Pin,
    TableRecord,
    excluded_selectors,
    pin_path,
    read_pin,
    write_pin,
)
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.core.versions import versions
from dbt_harvest.harvester.baseline import baseline_tests, ungated_build
from dbt_harvest.harvester.build import BuildResult, build_in_parallel, build_workspace, require_ok
from dbt_harvest.harvester.compat_edits import review
from dbt_harvest.harvester.discovery import Project, discover
from dbt_harvest.harvester.gitstore import GitStore
from dbt_harvest.harvester.gold import differing_columns, install_gold
from dbt_harvest.harvester.history.fix import Fix, apply_fix, read_fix
from dbt_harvest.harvester.packages import load_mirror, resolve_packages, vendor_packages
from dbt_harvest.harvester.port.project import Port, port_tree
from dbt_harvest.harvester.sandbox import Limits, safe_fs, sandbox_available
from dbt_harvest.harvester.sandbox.command import python_binds
from dbt_harvest.harvester.sandbox.parallel import ParallelChild
from dbt_harvest.harvester.sandbox.profile import PROFILE_DIR
from dbt_harvest.harvester.sandbox.runner import SCRATCH_DIR
from dbt_harvest.harvester.specs import (
    Identity,
    RepoSpec,
    local_identity,
    named_identity,
    origin_identity,
    parse_spec,
    spec_identity,
)
from dbt_harvest.harvester.state import install_state
from dbt_harvest.harvester.synth.run import synthesize
from dbt_harvest.harvester.toolchain import (
    Release,
    choose,
    ensure_toolchain,
    installed_release,
    make_release,
    release_named,
)
from dbt_harvest.harvester.toolchain.choice import own_requirement, releases_meeting, requirements
from dbt_harvest.harvester.toolchain.releases import satisfies, walk_releases
from dbt_harvest.harvester.workspace import port_path, synthesis_path


@dataclass(frozen=True)
class AddOptions:
    project_dir: str | None = None
    origin: str | None = None  # public URL the repository is recorded under (--origin)
    name: str | None = None  # owner/name to record a repository without a public URL under (--name)
    package_mirror: Path | None = None
    repo_mirror: Path | None = None  # offline copies of repositories: DIR/<owner>/<name>[.git] (--repo-mirror)
    resolve_ref: bool = False
    clock: str | None = None
    sandboxed: bool = True
    rebuild: bool = False
    rename_gold: bool = False  # a rebuild names its gold by content even where a byte-sha name reproduces
    compat_patch: Path | None = None
    # the compat patch may edit files the repository has (declared: harvester.compat_edits), not only add new ones
    allow_edits: bool = False
    limits: Limits = Limits()
    # a history pin (harvester/history): the fix commit whose model files are applied over the pinned
    # commit (its parent) before every build, the files, the fix's author date and the pin it was mined from
    fix: HistoryFix | None = None
    # synthesize the project's source data (harvester/synth) with this seed: None = the repository's own data
    synthesize: int | None = None
    # port the models' SQL from this warehouse dialect to DuckDB (harvester/port): None = written for DuckDB
    port_from: str | None = None
    # a rebuild's packages: the ones its pin records, found again at their versions and commits (None: resolve
    # packages.yml's ranges, as a first add does)
    pinned_packages: tuple[PackageRecord, ...] | None = None
    # the dbt release to build under (--dbt-version: ``1.7`` or an exact ``1.7.20``; harvester.toolchain): None
    # picks it (a rebuild: the pin's own; else from require-dbt-version, then the newest release that builds it)
    dbt_version: str | None = None
    # resolve package version ranges among releases made by this time (seconds since the epoch): what `dbt
    # deps` gave on that day (a history fix's parent); None: every release
    packages_as_of: int | None = None
    # (hub id, release): a release standing in for one the project asks for that no source holds
    # (--package-version; the pin's record says ``substituted``)
    package_versions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class HistoryFix:
    commit: str
    files: tuple[str, ...]
    date: str
    mined_from: str


@dataclass(frozen=True)
class AddResult:
    pin: Pin
    path: Path
    status: str  # "added" | "exists" | "rebuilt"
    drift: tuple[str, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True)
class Source:
    """A repository exported at its commit with packages vendored: the template of every workspace."""

    spec: RepoSpec
    commit: str
    ref: str
    tree: str
    root_commits: tuple[str, ...]
    root: Path  # the exported tree (no .git)
    project: Project
    packages: tuple[PackageRecord, ...]
    skipped: tuple
    compat_patch: str
    fix: Fix | None = None  # a history pin's fix, applied after the compat patch
    compat_edits: tuple[str, ...] = ()  # the repository files the compat patch edits (declared, never model SQL)
    synthesis: str = ""  # the synthesized data patch applied after the compat patch ("" for the repository's data)
    synthesis_seed: int = 0
    port: Port | None = None  # the dialect port applied after the compat patch, before the synthesized data
    toolchain: Toolchain | None = None  # the dbt every build runs under (harvester.toolchain; None: the installed)

    @property
    def compat_patch_sha256(self) -> str:
        return hashlib.sha256(self.compat_patch.encode()).hexdigest() if self.compat_patch else ""

    @property
    def synthesis_sha256(self) -> str:
        return hashlib.sha256(self.synthesis.encode()).hexdigest() if self.synthesis else ""


def _now() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Resolved:
    spec: RepoSpec
    commit: str
    ref: str
    repo: Any  # the pygit2 repository of the bare mirror
    identity: Identity | None = None  # what the pin is recorded under


def identify(spec: RepoSpec, options: AddOptions, store: GitStore) -> Identity:
    """What the repository is called in committed artefacts (see harvester.specs): --origin, --name,
    the spec itself when it is public, else the local copy's origin remote or dbt project name."""
    if options.origin and options.name:
        raise SpecError("give --origin or --name, not both")
    if options.origin:
        return origin_identity(options.origin)
    if options.name:
        return named_identity(options.name)
    if spec.kind != "local":
        return spec_identity(spec)
    import pygit2

    try:
        local = pygit2.Repository(spec.url)
    except (pygit2.GitError, KeyError, ValueError) as exc:
        raise FetchError(f"cannot read the local repository {spec.url}: {' '.join(str(exc).split())}") from None
    remote = local.remotes["origin"].url if "origin" in [r.name for r in local.remotes] else None
    project_name = None
    found = store.resolve(local, spec.rev, allow_ref=options.resolve_ref)
    where = f"{options.project_dir.strip('/')}/dbt_project.yml" if options.project_dir else "dbt_project.yml"
    data = store.read_file(local, found.commit, where)
    if data is not None:
        try:
            parsed = yaml.safe_load(data)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("name"), str):
            project_name = parsed["name"]
    return local_identity(remote, project_name, Path(spec.url).name)


def repo_mirror_copy(spec: RepoSpec, repo_mirror: Path | None) -> Path | None:
    """The local copy ``DIR/<owner>/<name>`` (or ``<name>.git``) of a GitHub spec under --repo-mirror.

    None without a mirror or for a spec that is not ``owner/name@sha`` (a URL or a local path already
    says where its bytes are). A mirror that lacks the repository is an error, never a silent network
    fetch: the point of the option is an offline build with the same pin as from the network.
    """
    if repo_mirror is None or spec.kind != "github":
        return None
    for candidate in (repo_mirror / spec.owner / spec.repo, repo_mirror / spec.owner / f"{spec.repo}.git"):
        if candidate.is_dir():
            return candidate.resolve()
    raise FetchError(
        f"--repo-mirror {repo_mirror} has no copy of {spec.owner}/{spec.repo}; "
        f"put a git clone at {repo_mirror / spec.owner / spec.repo} (bare or not)"
    )


def resolve(spec: RepoSpec, options: AddOptions) -> tuple[GitStore, Resolved]:
    """Name the repository, mirror it under that name (fetching from wherever the spec says), and
    verify the commit (a short sha is expanded, a ref needs --resolve-ref)."""
    store = GitStore(mirrors_dir())
    identity = identify(spec, options, store)
    local_copy = repo_mirror_copy(spec, options.repo_mirror)
    if local_copy is not None:  # the same identity as from the network, the bytes from the local copy
        repo = store.mirror(identity.url, fetch_from=str(local_copy))
    elif identity.url == spec.url:
        repo = store.mirror(spec.url)
    else:
        repo = store.mirror(identity.url, fetch_from=spec.url)
    found = store.resolve(repo, spec.rev, allow_ref=options.resolve_ref)
    return store, Resolved(spec, found.commit, found.ref, repo, identity)


@dataclass(frozen=True)
class Exported:
    """The commit exported (no .git) and its project discovered; packages not vendored yet."""

    resolved: Resolved
    root: Path
    project: Project
    tree: str
    skipped: tuple


def _seed_dirs(root: Path, project: Project) -> list[Path]:
    """The project's seed folders under the tree at ``root`` (what ``default_clock`` reads)."""
    return [root / project.rel_dir / p for p in project.seed_paths]


def export_source(store: GitStore, resolved: Resolved, options: AddOptions, run_dir: Path) -> Exported:
    """Export the commit (no .git) into ``run_dir/source`` and discover the project."""
    root = run_dir / "source"
    report = store.export(resolved.repo, resolved.commit, root)
    return Exported(resolved, root, discover(root, options.project_dir), report.tree, tuple(report.skipped))


def finish_source(store: GitStore, exported: Exported, options: AddOptions, release: Release | None = None) -> Source:
    """Vendor the exported project's packages and apply a compat patch: the template of every workspace.
    ``release``: the dbt the pin builds under (None: the installed one); the packages must support it, and
    a package vendored at a version whose ``require-dbt-version`` excludes it is a PackageError."""
    root, project = exported.root, exported.project
    mirror = load_mirror(options.package_mirror)
    project_path = root / project.rel_dir
    dbt_version = None if release is None or release.installed else release.dbt_core
    packages = resolve_packages(
        project_path,
        store,
        mirror,
        tree=root,
        pinned=options.pinned_packages,
        dbt_version=dbt_version,
        as_of=options.packages_as_of,
        substitutes=dict(options.package_versions),
    )
    vendor_packages(project_path, packages, store, workspace=root)
    if release is not None:
        refused = [
            (where, value) for where, value in requirements(project_path) if not satisfies(release, value, where)
        ]
        if refused:
            stated = "; ".join(f"{where} requires {value!r}" for where, value in refused)
            raise PackageError(f"{release.label} is refused by what the project vendors: {stated}")
    patch_text = ""
    edits: tuple[str, ...] = ()
    if options.compat_patch is not None:
        try:
            patch_text = options.compat_patch.read_text(encoding="utf-8")
        except OSError as exc:
            raise HarvestError(f"cannot read compat patch {options.compat_patch}: {exc.strerror}") from None
        model_paths = [str(PurePosixPath(project.rel_dir) / folder) for folder in project.model_paths]
        edits = review(patch_text, model_paths, allow_edits=options.allow_edits)
        apply_patch(root, patch_text)
    resolved = exported.resolved
    fix = None
    if options.fix is not None:
        fix = read_fix(resolved.repo, resolved.commit, options.fix.commit, options.fix.files)
        apply_fix(root, fix)
    return Source(
        spec=resolved.spec,
        commit=resolved.commit,
        ref=resolved.ref,
        tree=exported.tree,
        root_commits=store.root_commits(resolved.repo, resolved.commit),
        root=root,
        project=project,
        packages=packages,
        skipped=exported.skipped,
        compat_patch=patch_text,
        fix=fix,
        compat_edits=edits,
    )


def prepare_source(store: GitStore, resolved: Resolved, options: AddOptions, run_dir: Path) -> Source:
    """Export the commit (no .git), discover the project, vendor packages, apply a compat patch."""
    return finish_source(store, export_source(store, resolved, options, run_dir), options)


def _model_files(source: Source) -> dict[str, str]:
    files: dict[str, str] = {}
    base = source.root / source.project.rel_dir
    for folder in source.project.model_paths:
        for path in sorted((base / folder).rglob("*")):
            if path.is_file() and not path.is_symlink() and path.suffix in {".sql", ".py"}:
                rel = str(path.relative_to(source.root))
                if "dbt_packages" not in Path(rel).parts:
                    files[rel] = atomic.sha256_file(path)
    return files


def _fresh_workspace(source: Source, dest: Path) -> Path:
    shutil.copytree(source.root, dest, symlinks=True)
    return dest


def _fill_workspace(source: Source, dest: Path) -> Path:
    """Copy the source tree into ``dest``, a fresh workspace a parallel child already binds (holding
    only the runner's folders: the profile folder and scratch, which the tree's own copies never replace)."""
    top = str(source.root)
    shutil.copytree(
        source.root,
        dest,
        symlinks=True,
        dirs_exist_ok=True,
        ignore=lambda folder, names: {PROFILE_DIR, SCRATCH_DIR} & set(names) if folder == top else set(),
    )
    return dest


#: The database file of the check build: another name than the pin's (``state.DB_FILE``), so values that
#: embed the database's name (``"build"."main"."orders"``) show up as differing columns.
RENAMED_DB_FILE = "harvest_check.duckdb"


@dataclass(frozen=True)
class GoldBuilds:
    """The builds behind a pin's gold: ``first`` (kept: gold and minting state), ``renamed`` (another
    workspace and database file name), and ``repeat`` (the first's database name again, built only when
    the first two disagree, to tell nondeterminism from a dependence on the database's name)."""

    first: BuildResult
    renamed: BuildResult
    repeat: BuildResult | None = None
    # the database (file stem) every build of the pin uses: "build", or the name the project's SQL needs
    database: str = DEFAULT_DATABASE
    # the project's own tests that failed or warned on it (harvester.baseline); the builds above left the
    # failing ones out
    baseline: tuple[BaselineTest, ...] = ()


def _build(
    source: Source,
    clock: str,
    options: AddOptions,
    run_dir: Path,
    index: int,
    db_file: str,
    exclude_tests: tuple[str, ...] = (),
) -> BuildResult:
    workspace = _fresh_workspace(source, run_dir / f"build{index}")
    return build_workspace(
        workspace,
        source.project.rel_dir,
        source.project.profile,
        source.project.schema,
        clock,
        sandboxed=options.sandboxed,
        limits=options.limits,
        log_path=run_dir / f"build{index}.log",
        db_file=db_file,
        exclude_tests=exclude_tests,
        toolchain=source.toolchain,
    )


def _gold_child(
    project: Project,
    clock: str,
    options: AddOptions,
    run_dir: Path,
    names: tuple[str, str] = ("build1", "build2"),
    toolchain: Toolchain | None = None,
) -> ParallelChild:
    """The child of the first two gold builds, over two fresh, empty workspaces (not started yet)."""
    workspaces = [run_dir / name for name in names]
    for workspace in workspaces:
        workspace.mkdir(parents=True)
    return ParallelChild(
        workspaces,
        project.rel_dir,
        clock=clock,
        log_path=run_dir / "builds.log",
        sandboxed=options.sandboxed,
        limits=options.limits,
        toolchain=toolchain,
    )


def _pair(
    source: Source,
    clock: str,
    options: AddOptions,
    run_dir: Path,
    database: str,
    excluded: tuple[str, ...] = (),
    child: ParallelChild | None = None,
    names: tuple[str, str] = ("build1", "build2"),
) -> tuple[BuildResult, BuildResult]:
    """The first two gold builds at once in one child, the second in another workspace (another absolute
    root) and, unless the project needs its database's name, under another database file name."""
    second = RENAMED_DB_FILE if database == DEFAULT_DATABASE else f"{database}.duckdb"
    with child or _gold_child(source.project, clock, options, run_dir, names, source.toolchain) as pair:
        for workspace in pair.workspaces:
            _fill_workspace(source, workspace)
        first, renamed = build_in_parallel(
            pair,
            source.project.profile,
            source.project.schema,
            (f"{database}.duckdb", second),
            exclude_tests=excluded,
            toolchain=source.toolchain,
        )
    return first, renamed


def _gold_builds(
    source: Source,
    clock: str,
    options: AddOptions,
    run_dir: Path,
    child: ParallelChild | None = None,
    database: str = DEFAULT_DATABASE,
    excluded: tuple[str, ...] = (),
    find_baseline: bool = True,
) -> GoldBuilds:
    """The first two builds at once in one child (dbt imported once, a fork per build, each in its own
    fresh workspace and database file: ``harvester.sandbox.parallel``); a third alone when they differ.
    ``child`` is one ``_gold_child`` made (and perhaps started) for this source and clock; ``database`` the
    database (file stem) to build into first (a rebuild starts from the pin's). ``excluded``: known failing
    tests left out from the start; ``find_baseline=False`` keeps them as they are (an augmentation of a pin
    must not fail another test: its caller judges ``first.failed_tests``)."""
    first, renamed = _pair(source, clock, options, run_dir, database, excluded, child=child)
    needed = missing_catalog(first.first_error) if not first.models_ok else None
    if needed is not None and needed != database:
        # the project names its database (a source's `database:`, a hard-coded `raw.main.orders`): on DuckDB
        # the database is the file's stem, so every build of the pin uses that file name
        database = needed
        first, renamed = _pair(source, clock, options, run_dir, database, excluded, names=("build6", "build7"))
    baseline = baseline_tests([first, renamed])
    if find_baseline and (first.tests_failed or renamed.tests_failed):
        # the project's own tests fail on it: find every one with the models built regardless, then build
        # gold again with those left out, as every later build of the pin leaves them out (harvester.baseline)
        ungated = require_ok(
            ungated_build(
                _fresh_workspace(source, run_dir / "ungated"),
                source.project.rel_dir,
                source.project.profile,
                source.project.schema,
                clock,
                sandboxed=options.sandboxed,
                limits=options.limits,
                log_path=run_dir / "ungated.log",
                db_file=f"{database}.duckdb",
                toolchain=source.toolchain,
            ),
            "build with the project's own tests not gating its models",
        )
        baseline = baseline_tests([ungated])
        excluded = excluded_selectors(baseline)
        first, renamed = _pair(source, clock, options, run_dir, database, excluded, names=("build4", "build5"))
    require_ok(first, "build")
    require_ok(
        renamed,
        "second build (in another folder" + (", under another database name)" if database == DEFAULT_DATABASE else ")"),
    )
    other = {t.name: t for t in renamed.tables}
    if all(other.get(t.name) is not None and other[t.name].fingerprint == t.fingerprint for t in first.tables):
        return GoldBuilds(first, renamed, baseline=baseline, database=database)
    repeat = require_ok(_build(source, clock, options, run_dir, 3, f"{database}.duckdb", excluded), "third build")
    return GoldBuilds(first, renamed, repeat, baseline=baseline, database=database)


#: "Catalog "raw" does not exist!" (a binder error) or "Catalog with name raw does not exist!"
_MISSING_CATALOG = re.compile(r'Catalog (?:with name )?"?([A-Za-z_][A-Za-z0-9_]{0,62})"? does not exist')


def missing_catalog(error: str) -> str | None:
    """The database a failed build looked for and DuckDB did not have (None: not that failure)."""
    found = _MISSING_CATALOG.search(error or "")
    if found is None or found.group(1).lower() in {"system", "temp", "memory", "main"}:
        return None
    return found.group(1)


def _unstable(first: BuildResult, other: BuildResult) -> dict[str, tuple[str, ...] | None]:
    """Per table of ``first``: the columns that differ in ``other`` (lower-case), None for the whole table."""
    twins = {t.name: t for t in other.tables}
    same = [t.name for t in first.tables if t.name in twins and twins[t.name].fingerprint == t.fingerprint]
    out: dict[str, tuple[str, ...] | None] = dict.fromkeys(same, ())
    rest = [t.name for t in first.tables if t.name not in out]
    if rest and first.gold_file is not None and other.gold_file is not None:
        out.update(differing_columns(first.gold_file, other.gold_file, rest))
    return out


def _tables(builds: GoldBuilds) -> tuple[TableRecord, ...]:
    first = builds.first
    renamed = _unstable(first, builds.renamed)
    repeat = _unstable(first, builds.repeat) if builds.repeat is not None else {t.name: () for t in first.tables}
    records = []
    for table in sorted(first.tables, key=lambda t: t.name):
        by_name, by_build = renamed.get(table.name), repeat.get(table.name)
        deterministic = by_name is not None and by_build is not None
        names = {c.lower(): c for c, _ in table.columns}
        unstable = set(by_name or ()) | set(by_build or ())
        # columns that moved with the database's name alone (a pin whose SQL names its database never varies it)
        database = set(by_name or ()) - set(by_build or ()) if builds.database == DEFAULT_DATABASE else set()
        records.append(
            TableRecord(
                name=table.name,
                rows=table.rows,
                fingerprint=table.fingerprint,
                deterministic=deterministic,
                empty=table.rows == 0,
                columns=tuple(Column(n, t) for n, t in table.columns),
                model=table.model,
                unstable_columns=tuple(names[c] for c in sorted(unstable) if c in names) if deterministic else (),
                database_columns=tuple(names[c] for c in sorted(database) if c in names) if deterministic else (),
            )
        )
    if not records:
        raise GoldError("the build produced no model tables at all")
    if all(r.empty for r in records):
        hint = " although the seeds hold rows" if first.seed_rows else ""
        raise GoldError(
            f"every model came out empty{hint}: a source not found or a wrong profile schema is the usual cause"
        )
    return tuple(records)


def add(spec_text: str, options: AddOptions = AddOptions()) -> AddResult:
    """Pin ``spec_text``; see the module docstring for the order of writes."""
    started = time.perf_counter()
    spec = parse_spec(spec_text)
    _require_sandbox(options)
    options = _mirrors_from_env(options)
    clock = normalise_clock(options.clock) if options.clock else None

    store, resolved = resolve(spec, options)
    identity = resolved.identity
    assert identity is not None
    pin_id = _pin_id(identity, resolved.commit, options)
    existing_path = pin_path(pin_id, pins_dir())
    previous = _previous_pin(existing_path)
    if previous is not None and not options.rebuild:
        return AddResult(previous, existing_path, "exists", seconds=time.perf_counter() - started)
    options = _with_recorded_patch(options, previous)
    run_dir = builds_dir() / identity.slug / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    run_dir.mkdir(parents=True, exist_ok=True)
    exported = _export_with_binds(store, resolved, options, run_dir)
    gold = _gold_on_a_release(
        store, exported, options, run_dir, clock or (previous.clock if previous else None), previous
    )
    tables, gold_sha = _install_gold(pin_id, gold, options, previous)
    pin = _pin_record(pin_id, identity, spec, gold, options, previous, tables, gold_sha)
    drift = _drift(previous, pin) if previous else ()
    if gold.source.compat_patch:
        atomic.write_text(pins_dir() / "patches" / f"{gold.source.compat_patch_sha256}.diff", gold.source.compat_patch)
    if gold.source.synthesis:
        atomic.write_text(synthesis_path(gold.source.synthesis_sha256), gold.source.synthesis)
    if gold.source.port is not None:
        atomic.write_text(port_path(gold.source.port.sha256), gold.source.port.patch)
    pin, path, drift = _settle_pin(pin, previous, drift, existing_path)
    _drop_bulk(run_dir)
    status = "rebuilt" if previous else "added"
    return AddResult(pin, path, status, drift, time.perf_counter() - started)


def _require_sandbox(options: AddOptions) -> None:
    """Refuse (SandboxError) to build untrusted code sandboxed where no sandbox is available."""
    if options.sandboxed:
        ok, why = sandbox_available()
        if not ok:
            raise SandboxError(f"refusing to build untrusted code without a sandbox: {why} (or pass --no-sandbox)")


def _mirrors_from_env(options: AddOptions) -> AddOptions:
    """``options`` with the package and repository mirrors not given taken from HARVEST_PACKAGE_MIRROR and
    HARVEST_REPO_MIRROR."""
    if options.package_mirror is None and os.environ.get("HARVEST_PACKAGE_MIRROR"):
        options = replace(options, package_mirror=Path(os.environ["HARVEST_PACKAGE_MIRROR"]))
    if options.repo_mirror is None and os.environ.get("HARVEST_REPO_MIRROR"):
        options = replace(options, repo_mirror=Path(os.environ["HARVEST_REPO_MIRROR"]))
    return options


def _pin_id(identity: Identity, commit: str, options: AddOptions) -> str:
    """``<slug>@<commit12>``, and ``+fix-<fix12>`` for a history pin (beside the plain pin of the same
    commit, one per fix of it)."""
    pin_id = f"{identity.slug}@{commit[:12]}"
    if options.fix is not None:
        pin_id += f"+fix-{options.fix.commit[:12]}"
    return pin_id


def _previous_pin(existing_path: Path) -> Pin | None:
    """The pin already written at ``existing_path``; None when there is none or it is malformed (rebuilt)."""
    if not existing_path.exists():
        return None
    try:
        return read_pin(existing_path)
    except PinError:
        return None  # a malformed pin is rebuilt


def _with_recorded_patch(options: AddOptions, previous: Pin | None) -> AddOptions:
    """``options`` for a rebuild of ``previous``: the compat patch the pin records (stored by hash) unless a
    new one is given, with edits allowed when the pin's patch made them; its data synthesized again with the
    seed it records; its packages the ones it records, never resolved anew."""
    if previous is not None:
        options = replace(options, pinned_packages=previous.packages)
    if previous is not None and options.synthesize is None and previous.synthesis_sha256:
        options = replace(options, synthesize=previous.synthesis_seed)
    if previous is not None and options.port_from is None and previous.port_from:
        options = replace(options, port_from=previous.port_from)
    if previous is not None and options.compat_patch is None and previous.compat_patch_sha256:
        return replace(
            options,
            compat_patch=pins_dir() / "patches" / f"{previous.compat_patch_sha256}.diff",
            allow_edits=options.allow_edits or bool(previous.compat_edits),
        )
    return options


def _export_with_binds(store: GitStore, resolved: Resolved, options: AddOptions, run_dir: Path) -> Exported:
    """Export the commit while what every sandboxed child binds of this interpreter is worked out."""
    with ThreadPoolExecutor(max_workers=1) as early:
        # what every sandboxed child binds of this interpreter (a walk of the installed distributions
        # and ldd on their native files, once per process) is worked out while the source is exported
        binds = early.submit(python_binds) if options.sandboxed else None
        exported = export_source(store, resolved, options, run_dir)
        if binds is not None:
            binds.result()
    return exported


@dataclass(frozen=True)
class GoldRun:
    """The gold stage of ``add``: the finished source, the clock it was built at, and its gold builds."""

    source: Source
    clock: str
    builds: GoldBuilds


def _releases(exported: Exported, options: AddOptions, previous: Pin | None) -> tuple[Release, ...]:
    """The dbt releases to build on, in order: the one given (--dbt-version), a rebuild's own, else every
    release the project's ``require-dbt-version`` admits among those ``$HARVEST_DBT_RELEASES`` allows
    (default: every supported one), newest first."""
    if options.dbt_version:
        return (release_named(options.dbt_version),)
    if previous is not None:
        return (release_named(previous.toolchain.dbt_core) if previous.toolchain else installed_release(),)
    own = own_requirement(exported.root / exported.project.rel_dir)
    pool = walk_releases()
    return releases_meeting(own, pool) or (choose(own, pool),)  # choose raises, naming what no release meets


#: a build error's pointer to its logs, said once for every release tried
_LOGS = re.compile(r" \(logs: [^)]*\)")


def _toolchain(release: Release, previous: Pin | None) -> Toolchain | None:
    """The toolchain of ``release`` in this home (a rebuild's: exactly its pin's lock); None for the installed dbt."""
    if release.installed:
        return None
    if previous is not None and previous.toolchain is not None and previous.toolchain.dbt_core == release.dbt_core:
        return ensure_toolchain(previous.toolchain)
    return make_release(release)


def _gold_on_a_release(
    store: GitStore, exported: Exported, options: AddOptions, run_dir: Path, fixed: str | None, previous: Pin | None
) -> GoldRun:
    """Gold built on the first release of ``_releases`` whose packages and builds work: a project that does
    not build on today's dbt is tried on each older release its requirement admits, each from a fresh export;
    when none builds, a BuildError names every release's reason."""
    releases = _releases(exported, options, previous)
    reasons: list[str] = []
    for index, release in enumerate(releases):
        attempt_dir = run_dir if index == 0 else run_dir / f"dbt-{release.minor}"
        attempt = exported if index == 0 else export_source(store, exported.resolved, options, attempt_dir)
        try:
            return _build_gold(store, attempt, options, attempt_dir, fixed, previous, release)
        except (BuildError, PackageError) as exc:
            if len(releases) == 1:
                raise
            reason = _LOGS.sub("", " ".join(str(exc).split()))
            reasons.append(f"dbt {release.minor}: {reason[:240]}")
    raise BuildError(
        f"no supported dbt builds it ({'; '.join(reasons)}) (logs: {run_dir}, dbt-<release>/ for each older one)"
    )


def _build_gold(
    store: GitStore,
    exported: Exported,
    options: AddOptions,
    run_dir: Path,
    fixed: str | None,
    previous: Pin | None,
    release: Release | None = None,
) -> GoldRun:
    """Finish the source while the gold builds' child imports dbt, then build gold at ``fixed`` (the
    clock given or recorded) or else the default clock of the patched seeds, under ``release`` (None: the
    installed dbt)."""
    guess = fixed or default_clock(_seed_dirs(exported.root, exported.project))
    toolchain = _toolchain(release, previous) if release is not None else None
    # the gold builds' child starts now and imports dbt while the packages are vendored, the patch
    # applied and the tree copied into its workspaces
    child = _gold_child(exported.project, guess, options, run_dir, toolchain=toolchain)
    with child:
        child.start()
        source = replace(finish_source(store, exported, options, release), toolchain=toolchain)
        if options.port_from is not None:
            source = _with_port(source, options.port_from)
        if options.synthesize is not None:
            source = _with_synthesized_data(source, options, run_dir)
        # the default clock reads the seeds as patched; a patch that moved it needs a child at that clock
        clock = fixed or default_clock(_seed_dirs(source.root, source.project))
        if clock != guess:
            child.close()
            safe_fs.rmtree(run_dir / "build1")
            safe_fs.rmtree(run_dir / "build2")
            child = _gold_child(source.project, clock, options, run_dir, toolchain=toolchain)
        builds = _gold_builds(
            source, clock, options, run_dir, child, previous.database if previous is not None else DEFAULT_DATABASE
        )
    return GoldRun(source, clock, builds)


def _with_port(source: Source, dialect: str) -> Source:
    """``source`` with its models ported from ``dialect`` (harvester/port) in its tree; unchanged when every
    model already reads the same in DuckDB."""
    port = port_tree(source.root, source.project, dialect)
    if not port.patch:
        return source
    apply_patch(source.root, port.patch)
    return replace(source, port=port)


def _with_synthesized_data(source: Source, options: AddOptions, run_dir: Path) -> Source:
    """``source`` with its source data synthesized (harvester/synth) and applied to its tree."""
    assert options.synthesize is not None
    made = synthesize(
        source.root,
        source.project,
        options.synthesize,
        run_dir / "synth",
        sandboxed=options.sandboxed,
        limits=options.limits,
    )
    apply_patch(source.root, made.patch)
    return replace(source, synthesis=made.patch, synthesis_seed=made.seed)


def _install_gold(
    pin_id: str, gold: GoldRun, options: AddOptions, previous: Pin | None
) -> tuple[tuple[TableRecord, ...], str]:
    """The pin's table records, then the gold file installed (content-addressed) and the first build's
    state kept for minting; returns the records and the gold's sha256."""
    builds = gold.builds
    first = builds.first
    tables = _tables(builds)
    assert first.gold_file is not None
    gold_sha = install_gold(
        first.gold_file, previous=previous.gold_sha256 if previous and not options.rename_gold else ""
    )
    install_state(
        pin_id,
        first.workspace,
        gold.source.project.rel_dir,
        max_bytes=options.limits.workspace_bytes,
        db_file=f"{builds.database}.duckdb",
    )
    return tables, gold_sha


def _pin_record(
    pin_id: str,
    identity: Identity,
    spec: RepoSpec,
    gold: GoldRun,
    options: AddOptions,
    previous: Pin | None,
    tables: tuple[TableRecord, ...],
    gold_sha: str,
) -> Pin:
    """The pin of the source ``gold`` built (not written yet)."""
    source, builds = gold.source, gold.builds
    # a commit given by a prefix is recorded in full: a short sha can become ambiguous as the repository
    # grows, and a rebuild from the full sha must write the same pin
    rev = source.commit if spec.rev_is_sha and source.commit.startswith(spec.rev.lower()) else spec.rev
    return Pin(
        id=pin_id,
        spec=f"{identity.display}@{rev}",
        url=identity.url,
        commit=source.commit,
        tree=source.tree,
        ref=source.ref,
        root_commits=source.root_commits,
        project_dir=source.project.rel_dir,
        project_name=source.project.name,
        profile_schema=source.project.schema,
        clock=gold.clock,
        license=detect_license(source.root),
        created_at=previous.created_at if previous else _now(),
        gold_sha256=gold_sha,
        compat_patch_sha256=source.compat_patch_sha256,
        versions=_versions(source.toolchain),
        packages=source.packages,
        tables=tables,
        skipped=tuple(source.skipped),
        model_files=_model_files(source),
        clock_frozen=True,
        database=builds.database,
        baseline_tests=builds.baseline,
        compat_edits=source.compat_edits,
        synthesis_sha256=source.synthesis_sha256,
        synthesis_seed=source.synthesis_seed,
        port_from=source.port.dialect if source.port else "",
        port_sha256=source.port.sha256 if source.port else "",
        ported_files=source.port.files if source.port else (),
        toolchain=source.toolchain,
        **_history_fields(source, options),
    )


def _versions(toolchain: Toolchain | None) -> dict[str, str]:
    """The tool versions a pin records: this process's, with dbt's and DuckDB's its toolchain's when it has one."""
    found = versions()
    if toolchain is not None:
        found.update({"dbt-core": toolchain.dbt_core, "dbt-duckdb": toolchain.dbt_duckdb, "duckdb": toolchain.duckdb})
    return found


def _settle_pin(
    pin: Pin, previous: Pin | None, drift: tuple[str, ...], existing_path: Path
) -> tuple[Pin, Path, tuple[str, ...]]:
    """Write ``pin``, or keep ``previous`` where the rebuild reproduced it; returns the pin kept, its path
    and the drift notes (saying where the pin keeps the versions it was made with)."""
    if (
        previous is not None
        and pin.gold_sha256 != previous.gold_sha256
        and replace(pin, versions=previous.versions, gold_sha256=previous.gold_sha256) == previous
    ):
        # a rename (--rename-gold, or bytes that did not reproduce): the same tables under the gold's content
        # name, everything else reproduced; the pin keeps the versions it was made with, so its tasks minted
        # again differ from the locked ones only in the gold name (`harvest mint --verify-lock` says so)
        pin = replace(pin, versions=previous.versions)
        drift = _versions_kept(drift, "only the gold's name moved")
    if previous is not None and replace(pin, versions=previous.versions) == previous:
        # the rebuild reproduced the pin in all but the tool versions of this machine: the committed pin (and
        # so every task record, which carries its versions, and the task lock) stays as it is
        return previous, existing_path, _versions_kept(drift, "everything else is reproduced")
    return pin, write_pin(pin, pins_dir()), drift


def _versions_kept(drift: tuple[str, ...], why: str) -> tuple[str, ...]:
    """``drift`` with its note on changed tool versions saying the pin keeps the versions it was made with."""
    return tuple(
        f"{note} (the pin keeps the versions it was made with: {why})" if note.startswith("versions changed") else note
        for note in drift
    )


def _drop_bulk(run_dir: Path) -> None:
    """Keep the run's logs and the first workspace's target/ for inspection; drop the bulk (packages, source)."""
    for index in (1, 2, 3):
        with contextlib.suppress(HarvestError, OSError):
            safe_fs.remove(run_dir / f"build{index}", "dbt_packages")
    safe_fs.rmtree(run_dir / "source")


def _history_fields(source: Source, options: AddOptions) -> dict[str, Any]:
    """The pin fields of a history pin's fix (none for a plain pin)."""
    if source.fix is None or options.fix is None:
        return {}
    return {
        "fix_commit": source.fix.commit,
        "fix_files": source.fix.files,
        "fix_sha256": source.fix.sha256,
        "fix_date": options.fix.date,
        "mined_from": options.fix.mined_from,
    }


def _drift(old: Pin, new: Pin) -> tuple[str, ...]:
    notes: list[str] = []
    if old.gold_sha256 != new.gold_sha256:
        notes.append(f"gold {old.gold_sha256[:12]} -> {new.gold_sha256[:12]}")
    before = {t.name: t for t in old.tables}
    after = {t.name: t for t in new.tables}
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            notes.append(f"{name}: {'added' if a is None else 'removed'}")
        elif (a.rows, a.fingerprint, a.deterministic) != (b.rows, b.fingerprint, b.deterministic):
            notes.append(f"{name}: rows {a.rows} -> {b.rows}, fingerprint {a.fingerprint[:8]} -> {b.fingerprint[:8]}")
    if old.baseline_tests != new.baseline_tests:
        # tests that fail on the original are left out of every build from now on: the pin's tasks change
        notes.append(
            f"baseline tests: {len(old.baseline_tests)} -> {len(new.baseline_tests)} "
            f"({len(new.excluded_tests)} known failures left out of every build; re-mint the pin)"
        )
    if old.database != new.database:
        notes.append(f"database {old.database} -> {new.database}")
    files = sorted(
        f for f in set(old.model_files) | set(new.model_files) if old.model_files.get(f) != new.model_files.get(f)
    )
    if files:  # the model texts tasks are minted over (ported ones included) read otherwise: re-mint the pin
        notes.append(f"model files: {len(files)} read otherwise ({files[0]}{', ...' if len(files) > 1 else ''})")
    if old.versions != new.versions:
        changed = sorted(k for k in set(old.versions) | set(new.versions) if old.versions.get(k) != new.versions.get(k))
        notes.append("versions changed: " + ", ".join(changed))
    return tuple(notes)


__all__ = [
    "AddOptions",
    "AddResult",
    "Exported",
    "add",
    "export_source",
    "finish_source",
    "prepare_source",
    "HarvestError",
    "BuildError",
]

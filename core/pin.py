"""The pin: a repository at an exact commit plus everything needed to rebuild its gold bit for bit.

A pin is a frozen record written as deterministic TOML under ``pins/`` (committed). Reading a pin
validates every field and refuses unknown or missing keys with a PinError naming the field, so a
hand-edited or truncated pin never passes for a whole one.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from dbt_harvest.core import atomic
from dbt_harvest.core.errors import PinError
from dbt_harvest.core.toolchain import Toolchain, toolchain_from_dict

PIN_FORMAT = 1
#: a GitHub repository URL in any of its forms (https, ssh, scp-like), with owner and repo groups
GITHUB_URL = re.compile(
    r"^(?:https?://|ssh://(?:git@)?|git@|git://)?(?:www\.)?github\.com[:/]+(?P<owner>[^/]+)/(?P<repo>[^/]+?)(?:\.git)?/?$",
    re.IGNORECASE,
)
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_DATABASE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
#: the database (DuckDB file stem) of every pin whose SQL names none
DEFAULT_DATABASE = "build"


@dataclass(frozen=True)
class Column:
    name: str
    type: str


#: the statuses of a dbt test that fail it; a test with one of them on the original project is a known failure
FAILING_TEST_STATUSES = ("error", "fail")
_TEST_STATUSES = (*FAILING_TEST_STATUSES, "warn")
_TEST_UID = re.compile(r"^(test|unit_test)\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+(\.[A-Za-z0-9_.]+)?$")


@dataclass(frozen=True)
class BaselineTest:
    """A dbt test that did not pass on the original project (SWE-bench's FAIL_TO_FAIL): ``status`` is dbt's,
    ``fail`` or ``error`` (a known failure: left out of every build of the pin, so it never gates a model and
    never counts as a local check) or ``warn`` (run as usual: a warning gates nothing)."""

    unique_id: str
    status: str

    @property
    def name(self) -> str:
        """The test's node name (the selector dbt knows it by): ``test.<package>.<name>[.<hash>]``."""
        return self.unique_id.split(".")[2]

    @property
    def selector(self) -> str:
        """A dbt selector for exactly this test: its resource type and name, intersected."""
        kind = self.unique_id.split(".")[0]
        return f"resource_type:{kind},{self.name}"

    @property
    def known_failure(self) -> bool:
        return self.status in FAILING_TEST_STATUSES


@dataclass(frozen=True)
class TableRecord:
    """One model relation of gold: ``name`` is ``schema.relation`` as it lives in the gold file.

    ``deterministic``: the builds of ``harvest add`` agreed on its rows and on every column outside
    ``unstable_columns``. ``unstable_columns``: columns whose values differed between those builds (a
    random or time-of-build value, or the database's own name baked into a value); they are never
    graded. ``database_columns``: the subset that changed with the database file's name or the build's
    place alone (the second build runs under another name, in another folder, with another home:
    ``"build"."main"."orders"`` in a ``_dbt_source_relation``, an absolute path): an agent whose profile
    names its database otherwise, or who builds elsewhere, would get them "wrong" with a correct project.
    """

    name: str
    rows: int
    fingerprint: str
    deterministic: bool
    empty: bool
    columns: tuple[Column, ...]
    model: str = ""  # dbt unique_id, e.g. model.shop.fct_orders
    unstable_columns: tuple[str, ...] = ()
    database_columns: tuple[str, ...] = ()

    @property
    def gradable(self) -> bool:
        """A table may be graded only if the builds agreed on it (outside its unstable columns), it is
        not empty, and at least one column is stable."""
        return self.deterministic and not self.empty and bool(self.stable_positions)

    @property
    def stable_positions(self) -> tuple[int, ...]:
        """0-based positions of the columns that may be graded (those not in ``unstable_columns``)."""
        unstable = {c.lower() for c in self.unstable_columns}
        return tuple(i for i, c in enumerate(self.columns) if c.name.lower() not in unstable)


@dataclass(frozen=True)
class PackageRecord:
    """One vendored dbt package, resolved to an exact commit."""

    name: str
    source: str  # "hub:<org>/<name>", "git:<url>" or "local:<path>"
    requested: str  # the version range or revision as written in packages.yml
    version: str  # the tag chosen ("" for git revisions and local packages)
    commit: str  # 40-hex ("" for local packages)
    url: str  # where it was fetched from ("" for local packages)
    # ``version`` stands in for ``requested``, which no release of the package's source satisfies (a tag the
    # mirror or hub lacks), at the user's word (``harvest add --package-version``); written only when set
    substituted: bool = False


@dataclass(frozen=True)
class SkippedPath:
    path: str
    reason: str


@dataclass(frozen=True)
class Pin:
    id: str
    spec: str
    url: str
    commit: str
    tree: str
    ref: str
    root_commits: tuple[str, ...]
    project_dir: str
    project_name: str
    profile_schema: str
    clock: str
    license: str
    created_at: str
    gold_sha256: str  # the gold's name: its content digest (harvester.gold_digest), or for pins before 2026-12-02 its file's sha256
    compat_patch_sha256: str
    versions: dict[str, str]
    packages: tuple[PackageRecord, ...]
    tables: tuple[TableRecord, ...]
    skipped: tuple[SkippedPath, ...] = ()
    model_files: dict[str, str] = field(default_factory=dict)  # repo-relative path -> sha256
    # the wall clock of every build was frozen at ``clock`` (False: a pin captured while builds started a
    # ticking clock there; its time-derived tables differ between builds, `harvest add --rebuild` re-captures)
    clock_frozen: bool = False
    # the DuckDB catalog (database file stem) the pin's profile builds into; gold's values were checked
    # against a rebuild under another name (TableRecord.database_columns)
    database: str = DEFAULT_DATABASE
    # distinguishing data (harvester/augment.py): the sha256 of a patch that adds seed rows, applied after
    # the compat patch before every build of this pin, and the id of the pin it augments ("" for neither)
    augmentation_sha256: str = ""
    augments: str = ""
    # an augmented pin's candidates: (model uid, candidate key) of each base candidate the added rows were
    # derived for; every mint of the pin tries exactly these (`harvest mint --all` as `--augment` does)
    recovers: tuple[tuple[str, str], ...] = ()
    # a history pin (harvester/history): the repository at ``commit`` (the parent of a fix commit) with the
    # model files ``fix_files`` taken from ``fix_commit``, the fix, applied after the compat patch before every
    # build, so gold is the fixed project on the parent's data; ``fix_sha256`` is the sha256 of that change as a
    # unified diff (read again from the repository's history, never stored: it is the repository's code),
    # ``fix_date`` the fix's author date, ``mined_from`` the pin whose history it was found in
    fix_commit: str = ""
    fix_files: tuple[str, ...] = ()
    fix_sha256: str = ""
    fix_date: str = ""
    mined_from: str = ""
    # the project's own dbt tests that failed (or warned) on the original project: known failures are left out
    # of every build of the pin (BaselineTest), so a model downstream of one still builds and local checks are
    # the tests that pass on the original (PASS_TO_PASS)
    baseline_tests: tuple[BaselineTest, ...] = ()
    # repository files the compat patch edits (declared with --allow-edits; never model SQL:
    # harvester.compat_edits); () for a patch that only adds files, or none
    compat_edits: tuple[str, ...] = ()
    # synthesized data (harvester/synth): the sha256 of the patch that adds the project's source data as
    # seeds (derived from the project's own YAML, tests and SQL with ``synthesis_seed``; stored under
    # pins/patches/synthesized/, never committed), applied after the compat patch before every build
    synthesis_sha256: str = ""
    synthesis_seed: int = 0
    # a dialect port (harvester/port): the warehouse dialect the models were written for, the sha256 of the
    # patch that rewrites the model files listed in ``ported_files`` into DuckDB's SQL with sqlglot (derived
    # again on a rebuild, stored under pins/patches/ported/, never committed: it holds the repository's SQL),
    # applied after the compat patch before every build
    port_from: str = ""
    port_sha256: str = ""
    ported_files: tuple[str, ...] = ()
    # the toolchain every build of the pin runs under (issue 61, core.toolchain): None builds under the dbt
    # this process has installed, as every pin before toolchains did
    toolchain: Toolchain | None = None
    format: int = PIN_FORMAT

    @property
    def data_origin(self) -> str:
        """Where the pin's data comes from: ``synthesized`` (from the project's contract), ``augmented``
        (the repository's seeds plus derived rows) or ``repository``."""
        if self.synthesis_sha256:
            return "synthesized"
        return "augmented" if self.augmentation_sha256 else "repository"

    @property
    def dialect(self) -> str:
        """The SQL the models are built from: ``native`` or ``ported:<dialect>``."""
        return f"ported:{self.port_from}" if self.port_sha256 else "native"

    @property
    def is_history(self) -> bool:
        """A pin of a fix mined from the repository's history (its tasks undo that fix)."""
        return bool(self.fix_commit)

    @property
    def db_file(self) -> str:
        """The DuckDB file every build of the pin uses: ``<database>.duckdb`` (dbt-duckdb's database is its stem)."""
        return f"{self.database}.duckdb"

    @property
    def database_named(self) -> bool:
        """The project's SQL names its database (``database`` is not the default ``build``): no build may rename it."""
        return self.database != DEFAULT_DATABASE

    @property
    def known_failing_tests(self) -> frozenset[str]:
        """Unique ids of the tests that fail on the original project (no build of the pin runs them)."""
        return frozenset(t.unique_id for t in self.baseline_tests if t.known_failure)

    @property
    def excluded_tests(self) -> tuple[str, ...]:
        """dbt selectors of the known failing tests, left out of every build of this pin (sorted)."""
        return excluded_selectors(self.baseline_tests)

    @property
    def repo(self) -> str:
        """The repository as task records and cards name it: ``owner/name`` on GitHub, else the URL
        (``local://owner/name`` for a repository pinned from a local copy without a public origin)."""
        return display_name(self.url)

    @property
    def gradable_tables(self) -> tuple[TableRecord, ...]:
        return tuple(t for t in self.tables if t.gradable)

    def to_toml(self) -> str:
        """Deterministic TOML: fixed key order, lists in the order the record holds them, and a
        ``digest`` line first (sha256 of the rest), so a truncated or hand-edited pin is refused."""
        body = self._body()
        digest = hashlib.sha256(body.encode()).hexdigest()
        return f'digest = "{digest}"\n' + body

    def _body(self) -> str:
        data = asdict(self)
        data["versions"] = dict(sorted(self.versions.items()))
        data["model_files"] = dict(sorted(self.model_files.items()))
        for table in data["tables"]:
            table["columns"] = [dict(c) for c in table["columns"]]
            for key in ("unstable_columns", "database_columns"):
                if table[key]:
                    table[key] = list(table[key])
                else:
                    del table[key]  # written only when set: pins from before these fields read back byte for byte
        for package in data["packages"]:
            if not package["substituted"]:
                del package["substituted"]  # written only when set: older pins read back byte for byte
        for key, default in _OPTIONAL_DEFAULTS.items():
            if data[key] == default:
                del data[key]
        if self.toolchain is None:
            del data["toolchain"]
        else:
            data["toolchain"] = self.toolchain.to_dict()
        return tomli_w.dumps(_order(data))


#: Pin fields written only when they differ from these values (so older pins keep their digest).
_OPTIONAL_DEFAULTS: dict[str, Any] = {
    "clock_frozen": False,
    "database": DEFAULT_DATABASE,
    "augmentation_sha256": "",
    "augments": "",
    "recovers": (),
    "fix_commit": "",
    "fix_files": (),
    "fix_sha256": "",
    "fix_date": "",
    "mined_from": "",
    "baseline_tests": (),
    "compat_edits": (),
    "synthesis_sha256": "",
    "synthesis_seed": 0,
    "port_from": "",
    "port_sha256": "",
    "ported_files": (),
}


def display_name(url: str) -> str:
    """How a repository URL is shown in task records and cards: ``owner/repo`` for GitHub, else the URL."""
    match = GITHUB_URL.match(url.strip())
    return f"{match['owner']}/{match['repo'].removesuffix('.git')}" if match else url


def _order(data: dict[str, Any]) -> dict[str, Any]:
    scalars = {k: v for k, v in data.items() if not isinstance(v, (dict, list, tuple))}
    rest = {k: v for k, v in data.items() if k not in scalars}
    return {**scalars, **rest}


_FIELDS = set(Pin.__dataclass_fields__)


def _require(data: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise PinError(f"{where}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PinError(f"{where}: field {key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


#: the Pin fields that are plain strings, every one required
_STRING_FIELDS = (
    "id",
    "spec",
    "url",
    "commit",
    "tree",
    "ref",
    "project_dir",
    "project_name",
    "profile_schema",
    "clock",
    "license",
    "created_at",
    "gold_sha256",
    "compat_patch_sha256",
)


def pin_from_dict(data: dict[str, Any], where: str = "pin") -> Pin:
    """Validate a parsed pin; raise PinError naming the first bad field.

    The checks run in a fixed order (the header, the strings, the repository's history and versions, the
    records, the build settings, an augmentation, a history fix, the baseline tests, the compat edits), so
    of several bad fields the same one is always named."""
    fmt = _checked_format(data, where)
    values = _strings(data, where)
    roots = _root_commits(data, where)
    versions = _versions(data, where)
    model_files = _model_files(data, where)
    packages, skipped, tables = _records(data, where)
    clock_frozen, database = _build_settings(data, where)
    augmentation, augments, recovers = _augmentation_fields(data, where)
    history = _history_fields(data, where)
    baseline = baseline_tests_from(data.get("baseline_tests", []), where)
    edits = _compat_edits(data, values["compat_patch_sha256"], where)
    synthesis, synthesis_seed = _synthesis_fields(data, where)
    port_from, port_sha, ported = _port_fields(data, where)
    toolchain = toolchain_from_dict(data["toolchain"], where) if "toolchain" in data else None
    if history["fix_commit"] and augmentation:
        raise PinError(f"{where}: a pin is a history pin or an augmented pin, not both")
    return Pin(
        **values,
        **history,
        root_commits=roots,
        versions=versions,
        packages=packages,
        tables=tables,
        skipped=skipped,
        model_files=model_files,
        clock_frozen=clock_frozen,
        database=database,
        augmentation_sha256=augmentation,
        augments=augments,
        recovers=recovers,
        baseline_tests=baseline,
        compat_edits=edits,
        synthesis_sha256=synthesis,
        synthesis_seed=synthesis_seed,
        port_from=port_from,
        port_sha256=port_sha,
        ported_files=ported,
        toolchain=toolchain,
        format=fmt,
    )


def _checked_format(data: dict[str, Any], where: str) -> int:
    """The pin's format, once ``data`` is a table of known fields only; refuse a format this code does not read."""
    if not isinstance(data, dict):
        raise PinError(f"{where}: not a table")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise PinError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
    fmt: int = _require(data, "format", int, where)
    if fmt != PIN_FORMAT:
        raise PinError(f"{where}: pin format {fmt} is not supported (this harvester reads {PIN_FORMAT})")
    return fmt


def _strings(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The required string fields (Pin's keyword arguments, each a str), with the commit a 40-hex sha and the
    gold's name a sha256."""
    values: dict[str, Any] = {k: _require(data, k, str, where) for k in _STRING_FIELDS}
    if not _HEX40.match(values["commit"]):
        raise PinError(f"{where}: commit {values['commit']!r} is not a 40-hex sha")
    if not _HEX64.match(values["gold_sha256"]):
        raise PinError(f"{where}: gold_sha256 {values['gold_sha256']!r} is not a sha256")
    return values


def _root_commits(data: dict[str, Any], where: str) -> tuple[str, ...]:
    """The repository's root commits: 40-hex shas."""
    roots = _require(data, "root_commits", list, where)
    if not all(isinstance(r, str) and _HEX40.match(r) for r in roots):
        raise PinError(f"{where}: root_commits must be 40-hex shas")
    return tuple(roots)


def _versions(data: dict[str, Any], where: str) -> dict[str, str]:
    """The tool versions the gold was built with: names to version strings."""
    versions = _require(data, "versions", dict, where)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in versions.items()):
        raise PinError(f"{where}: versions must map names to strings")
    return dict(versions)


def _model_files(data: dict[str, Any], where: str) -> dict[str, str]:
    """The model files' digests (repository-relative path to sha256), ``{}`` when absent."""
    model_files = data.get("model_files", {})
    if not isinstance(model_files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in model_files.items()
    ):
        raise PinError(f"{where}: model_files must map paths to sha256 strings")
    return dict(model_files)


def _records(
    data: dict[str, Any], where: str
) -> tuple[tuple[PackageRecord, ...], tuple[SkippedPath, ...], tuple[TableRecord, ...]]:
    """The vendored packages, the skipped paths and the gold's tables, built from their tables and checked."""
    try:
        packages = tuple(PackageRecord(**p) for p in _require(data, "packages", list, where))
        skipped = tuple(SkippedPath(**s) for s in data.get("skipped", []))
        tables = tuple(_table_record(t) for t in _require(data, "tables", list, where))
    except (TypeError, KeyError) as exc:
        raise PinError(f"{where}: malformed packages/tables/skipped entry ({exc})") from None
    for table in tables:
        if not isinstance(table.rows, int) or not isinstance(table.deterministic, bool):
            raise PinError(f"{where}: table {table.name!r} has a malformed rows/deterministic field")
        if not all(isinstance(c, str) for c in (*table.unstable_columns, *table.database_columns)):
            raise PinError(f"{where}: table {table.name!r} lists a column name that is not a string")
    return packages, skipped, tables


def _table_record(t: Any) -> TableRecord:
    """One gold table from its TOML table (TypeError or KeyError when it is malformed; the caller names the pin)."""
    return TableRecord(
        **{
            **t,
            "columns": tuple(Column(**c) for c in t["columns"]),
            "unstable_columns": tuple(t.get("unstable_columns", ())),
            "database_columns": tuple(t.get("database_columns", ())),
        }
    )


def _build_settings(data: dict[str, Any], where: str) -> tuple[bool, str]:
    """Whether every build froze the clock, and the database (DuckDB file stem) the builds write."""
    clock_frozen = data.get("clock_frozen", False)
    database = data.get("database", DEFAULT_DATABASE)
    if not isinstance(clock_frozen, bool) or not isinstance(database, str) or not _DATABASE.match(database):
        raise PinError(
            f"{where}: clock_frozen must be a boolean and database a plain identifier (a DuckDB file's stem)"
        )
    return clock_frozen, database


def _augmentation_fields(data: dict[str, Any], where: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """An augmented pin's patch digest, base pin and recovered candidates: all of them or none."""
    augmentation = data.get("augmentation_sha256", "")
    augments = data.get("augments", "")
    if not isinstance(augmentation, str) or (augmentation and not _HEX64.match(augmentation)):
        raise PinError(f"{where}: augmentation_sha256 must be a sha256")
    if not isinstance(augments, str) or bool(augments) != bool(augmentation):
        raise PinError(f"{where}: augments (the base pin's id) and augmentation_sha256 go together")
    recovers = data.get("recovers", [])
    if not isinstance(recovers, list) or not all(
        isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) and x for x in r) for r in recovers
    ):
        raise PinError(f"{where}: recovers must list [model, candidate key] pairs")
    if recovers and not augmentation:
        raise PinError(f"{where}: recovers names the candidates of an augmentation; this pin has none")
    return augmentation, augments, tuple((m, k) for m, k in recovers)


def _synthesis_fields(data: dict[str, Any], where: str) -> tuple[str, int]:
    """Synthesized data's patch digest and seed (a seed only with a patch)."""
    sha = data.get("synthesis_sha256", "")
    seed = data.get("synthesis_seed", 0)
    if not isinstance(sha, str) or (sha and not _HEX64.match(sha)):
        raise PinError(f"{where}: synthesis_sha256 must be a sha256")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise PinError(f"{where}: synthesis_seed must be a non-negative integer")
    if seed and not sha:
        raise PinError(f"{where}: synthesis_seed is the seed of synthesized data; this pin has none")
    return sha, seed


def _port_fields(data: dict[str, Any], where: str) -> tuple[str, str, tuple[str, ...]]:
    """A dialect port's dialect, patch digest and files: all of them or none."""
    dialect, sha, files = data.get("port_from", ""), data.get("port_sha256", ""), data.get("ported_files", [])
    if not isinstance(dialect, str) or not isinstance(sha, str) or (sha and not _HEX64.match(sha)):
        raise PinError(f"{where}: port_from must be a dialect name and port_sha256 a sha256")
    if not isinstance(files, list) or not all(
        isinstance(f, str) and f and not f.startswith("/") and ".." not in f.split("/") for f in files
    ):
        raise PinError(f"{where}: ported_files must list repository-relative paths")
    if bool(dialect) != bool(sha) or bool(sha) != bool(files):
        raise PinError(f"{where}: port_from, port_sha256 and ported_files go together")
    return dialect, sha, tuple(files)


def _compat_edits(data: dict[str, Any], compat_patch_sha256: str, where: str) -> tuple[str, ...]:
    """The repository files the compat patch edits: relative paths, listed only when there is a patch."""
    edits = data.get("compat_edits", [])
    if not isinstance(edits, list) or not all(
        isinstance(f, str) and f and not f.startswith("/") and ".." not in f.split("/") for f in edits
    ):
        raise PinError(f"{where}: compat_edits must list repository-relative paths")
    if edits and not compat_patch_sha256:
        raise PinError(f"{where}: compat_edits names the edits of a compat patch; this pin has none")
    return tuple(edits)


def excluded_selectors(tests: Any) -> tuple[str, ...]:
    """The dbt selectors of the known failing ones of ``tests`` (BaselineTest), sorted: what every build leaves out."""
    return tuple(sorted(t.selector for t in tests if t.known_failure))


def is_test_uid(uid: str) -> bool:
    """A dbt test's unique id a pin can record (its name becomes an ``--exclude`` selector)."""
    return bool(_TEST_UID.match(uid)) and len(uid) <= 512


def baseline_tests_from(entries: Any, where: str) -> tuple[BaselineTest, ...]:
    """Validated baseline tests from ``[{unique_id, status}, …]`` (a pin's or a dataset row's), sorted by id."""
    if not isinstance(entries, list):
        raise PinError(f"{where}: baseline_tests must be a list of {{unique_id, status}} tables")
    out: dict[str, BaselineTest] = {}
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != {"unique_id", "status"}:
            raise PinError(f"{where}: each baseline test is a table of exactly unique_id and status")
        uid, status = entry["unique_id"], entry["status"]
        if not isinstance(uid, str) or not is_test_uid(uid):
            raise PinError(f"{where}: baseline test {uid!r} is not a dbt test's unique id")
        if status not in _TEST_STATUSES:
            raise PinError(
                f"{where}: baseline test {uid} has status {status!r}; expected one of {', '.join(_TEST_STATUSES)}"
            )
        out[uid] = BaselineTest(uid, status)
    return tuple(out[k] for k in sorted(out))


def _history_fields(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The history pin's fields, validated: all of them or none."""
    fix_commit, fix_sha, fix_date, mined_from = (
        data.get(k, "") for k in ("fix_commit", "fix_sha256", "fix_date", "mined_from")
    )
    files = data.get("fix_files", [])
    if not all(isinstance(v, str) for v in (fix_commit, fix_sha, fix_date, mined_from)):
        raise PinError(f"{where}: fix_commit, fix_sha256, fix_date and mined_from must be strings")
    if not isinstance(files, list) or not all(
        isinstance(f, str) and f and not f.startswith("/") and ".." not in f.split("/") for f in files
    ):
        raise PinError(f"{where}: fix_files must list repository-relative paths")
    given = [bool(fix_commit), bool(files), bool(fix_sha), bool(fix_date), bool(mined_from)]
    if any(given) and not all(given):
        raise PinError(
            f"{where}: fix_commit, fix_files, fix_sha256, fix_date and mined_from go together (a history pin)"
        )
    if fix_commit and not _HEX40.match(fix_commit):
        raise PinError(f"{where}: fix_commit {fix_commit!r} is not a 40-hex sha")
    if fix_sha and not _HEX64.match(fix_sha):
        raise PinError(f"{where}: fix_sha256 must be a sha256")
    return {
        "fix_commit": fix_commit,
        "fix_files": tuple(files),
        "fix_sha256": fix_sha,
        "fix_date": fix_date,
        "mined_from": mined_from,
    }


def read_pin(path: Path) -> Pin:
    """Read and validate a pin file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PinError(f"no pin at {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PinError(f"{path}: not valid TOML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.pop("digest", None), str):
        raise PinError(f"{path}: no digest line (not a pin written by `harvest add`, or truncated)")
    pin = pin_from_dict(data, where=str(path))
    if pin.to_toml() != path.read_text(encoding="utf-8"):
        raise PinError(
            f"{path}: digest mismatch: the pin was truncated or edited by hand (re-run `harvest add --rebuild`)"
        )
    return pin


def write_pin(pin: Pin, pins: Path) -> Path:
    """Write ``pins/<id>.toml`` atomically; return its path."""
    path = pins / f"{pin.id}.toml"
    atomic.write_text(path, pin.to_toml())
    return path


def pin_path(pin_id: str, pins: Path) -> Path:
    return pins / f"{pin_id}.toml"


def list_pins(pins: Path) -> list[Pin]:
    """Every pin under ``pins/`` (sorted by id); a malformed one raises."""
    if not pins.is_dir():
        return []
    return [read_pin(p) for p in sorted(pins.glob("*.toml")) if not p.name.startswith("_")]

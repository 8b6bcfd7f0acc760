"""A dataset row someone else wrote: checked in one place before anything touches the disk.

``harvest tasks materialize``, ``harvest score --task``, ``RepairEnvironment.from_dataset`` and ``harvest serve
openenv`` rebuild a task from its row, and a user who downloads a dataset runs them on rows a stranger wrote
(the dataset's manifest proves only that the rows are the publisher's, not that the publisher is friendly).
Every row goes through ``check_row`` first (``corpora.materialize.find_row`` calls it; nothing reads a row
field before it):

- ids match their grammar: ``instance_id`` and ``pin`` are one path component each (they name folders
  under HARVEST_HOME), commits and trees are 40 hex digits, digests 64;
- every path field (``project_dir``, ``file``, ``database_file``, ``gold_file``, each path a patch names, a
  ``local:`` package) is relative, has no ``..``, no NUL, no backslash, no drive prefix, and stays inside
  its root (``database_file`` is a bare file name; a ``local:`` package stays inside the repository);
- URLs (``origin_url``, a package's ``url`` and ``git:`` source) are ``https://`` (``ssh://``/``git@`` only
  when the user opts in), or a name-only ``local://``/``package://`` that only the user's own
  ``--repo-mirror``/``$HARVEST_PACKAGE_MIRROR`` can resolve; a local path or ``file://`` is never taken from
  a row;
- bounds (``RowLimits``): the row's size, the statement's, each patch's, the files a patch creates and the
  bytes all patches write. A row over one is refused with one line naming the bound and the environment
  variable that raises it.

What the user must still trust is the dataset's gold (which decides the score), not their machine.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import PurePosixPath
from typing import Any

from dbt_harvest.core.errors import HarvestError, PinError
from dbt_harvest.core.patching import PatchError, parse_patch
from dbt_harvest.core.pin import baseline_tests_from
from dbt_harvest.core.task_record import KINDS, ORIGINS, PORT_DIALECTS, SOURCES

_DATABASE_FILE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}\.duckdb")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+@-]{0,254}")
_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}@[0-9a-f]{7,40}(\+(aug|fix)-[0-9a-f]{12})?")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_PACKAGE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}")
_DRIVE = re.compile(r"^[A-Za-z]:")
_NAME_ONLY = ("local://", "package://")
#: the environment variable that lets a row's repository or package come over ssh
ALLOW_SSH_ENV = "HARVEST_ALLOW_SSH_URLS"
_PATCH_FIELDS = ("broken_patch", "patch", "compat_patch", "augmentation_patch", "synthesis_patch", "port_patch")
_STRING_FIELDS = (
    "kind",
    "instance_id",
    "pin",
    "repo",
    "base_commit",
    "project_dir",
    "file",
    "broken_patch",
    "patch",
    "gold_file",
    "gold_sha256",
    "origin_url",
    "tree",
    "database_file",
    "clock",
    "compat_patch",
    "compat_patch_sha256",
    "problem_statement",
    "documentation_statement",
    "profile_schema",
    "project_name",
    "source",
    "fix_commit",
    "fix_date",
    "fix_subject",
    "fix_url",
    "fix_sha256",
    "data_origin",
    "dialect",
)


class UntrustedRowError(HarvestError):
    """A dataset row is refused before anything is read, written or fetched for it (one line: what and why)."""


@dataclass(frozen=True)
class RowLimits:
    """What one row may make. Each bound is raised by the environment variable ``HARVEST_ROW_<NAME>``."""

    max_row_bytes: int = 16 << 20
    max_statement_chars: int = 64_000
    max_patch_bytes: int = 4 << 20
    max_patch_files: int = 200
    max_created_files: int = 100
    max_written_bytes: int = 8 << 20

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RowLimits:
        environ = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for item in fields(cls):
            raw = environ.get(env_name(item.name), "").strip()
            if raw:
                try:
                    values[item.name] = int(raw)
                except ValueError:
                    raise UntrustedRowError(f"${env_name(item.name)} must be a whole number, got {raw!r}") from None
        return cls(**values)


def env_name(bound: str) -> str:
    return f"HARVEST_ROW_{bound.upper()}"


def _over(instance_id: str, what: str, size: int, bound: str, limit: int) -> UntrustedRowError:
    return UntrustedRowError(
        f"{instance_id}: {what} is {size:,}, over the {limit:,} bound; "
        f"if you trust this dataset, raise ${env_name(bound)}"
    )


def check_relpath(value: object, field: str, where: str, *, allow_root: bool = False) -> str:
    """``value`` as a clean relative POSIX path (UntrustedRowError if it could leave its root)."""
    if not isinstance(value, str):
        raise UntrustedRowError(f"{where}: {field} must be a string")
    if "\x00" in value or "\\" in value:
        raise UntrustedRowError(f"{where}: {field} {value!r} holds a NUL byte or a backslash")
    if value.startswith(("/", "~")) or _DRIVE.match(value):
        raise UntrustedRowError(f"{where}: {field} {value!r} is absolute; a row's paths are relative to its tree")
    parts = [p for p in PurePosixPath(value).parts if p != "."]
    if ".." in parts:
        raise UntrustedRowError(f"{where}: {field} {value!r} climbs out with '..'")
    if not parts and not allow_root:
        raise UntrustedRowError(f"{where}: {field} is empty")
    if len(value) > 1000:
        raise UntrustedRowError(f"{where}: {field} is longer than 1,000 characters")
    return value


def check_url(url: object, field: str, where: str, *, allow_ssh: bool, allow_empty: bool = False) -> str:
    """A URL a row may name: https (ssh only when allowed), or a name-only ``local://``/``package://``."""
    if not isinstance(url, str):
        raise UntrustedRowError(f"{where}: {field} must be a string")
    if not url and allow_empty:
        return url
    if "\x00" in url or any(c.isspace() for c in url):
        raise UntrustedRowError(f"{where}: {field} {url!r} holds a NUL byte or white space")
    if url.startswith("https://") and len(url) > len("https://"):
        return url
    if url.startswith(_NAME_ONLY):
        return url  # names a repository; only the user's own mirror can resolve it
    if url.startswith(("ssh://", "git@")):
        if allow_ssh:
            return url
        raise UntrustedRowError(f"{where}: {field} {url!r} is an ssh URL; set ${ALLOW_SSH_ENV}=1 to let rows use ssh")
    raise UntrustedRowError(
        f"{where}: {field} {url!r} is not an https URL; a local path or file:// comes only from your own "
        "--repo-mirror or --package-mirror, never from a row"
    )


def _check_patch(text: str, field: str, where: str, limits: RowLimits) -> tuple[int, int]:
    """(files the patch creates, bytes it adds) after checking its paths and size."""
    size = len(text.encode("utf-8"))
    if size > limits.max_patch_bytes:
        raise _over(where, f"{field} ({size:,} bytes)", size, "max_patch_bytes", limits.max_patch_bytes)
    if not text:
        return 0, 0
    try:
        files = parse_patch(text)
    except PatchError as exc:
        raise UntrustedRowError(f"{where}: {field} is not a usable patch ({exc})") from None
    if len(files) > limits.max_patch_files:
        raise _over(where, f"the number of files {field} edits", len(files), "max_patch_files", limits.max_patch_files)
    created = added = 0
    for file_patch in files:
        check_relpath(file_patch.path, f"a path in {field}", where)
        if any(part in (".git",) for part in PurePosixPath(file_patch.path).parts):
            raise UntrustedRowError(f"{where}: {field} edits {file_patch.path!r}, inside a .git folder")
        new = all(start == 0 and all(line.startswith("+") for line in body) for start, body in file_patch.hunks)
        created += bool(new and file_patch.hunks)
        added += sum(len(line) for _, body in file_patch.hunks for line in body if line.startswith("+"))
    return created, added


def check_row(row: Mapping[str, Any], limits: RowLimits | None = None, *, allow_ssh: bool | None = None) -> None:
    """Refuse ``row`` (UntrustedRowError, one line) unless every id, path, URL and size in it is safe to act on."""
    limits = limits or RowLimits.from_env()
    if allow_ssh is None:
        allow_ssh = os.environ.get(ALLOW_SSH_ENV, "").strip() in ("1", "true", "yes")
    where = _check_shape(row, limits)
    _check_origin(row, where)
    _check_file_lists(row, where)
    _check_ids(row, where)
    _check_paths(row, where, limits)
    check_url(row.get("origin_url", ""), "origin_url", where, allow_ssh=allow_ssh)
    _check_patches(row, where, limits)
    _check_packages(row.get("packages") or [], row.get("project_dir", ""), where, allow_ssh)


def _check_shape(row: Mapping[str, Any], limits: RowLimits) -> str:
    """How errors name the row (its instance_id, once that is a task id): plain data within the row bound,
    string fields that are strings, and an instance_id that is one path component."""
    raw_id = row.get("instance_id")
    where = raw_id if isinstance(raw_id, str) and _ID.fullmatch(raw_id) else "a row"
    try:
        size = len(json.dumps(row, default=str).encode("utf-8"))
    except (TypeError, ValueError):
        raise UntrustedRowError(f"{where}: the row is not plain data") from None
    if size > limits.max_row_bytes:
        raise _over(where, f"the row ({size:,} bytes)", size, "max_row_bytes", limits.max_row_bytes)
    for name in _STRING_FIELDS:
        if name in row and not isinstance(row[name], str):
            raise UntrustedRowError(f"{where}: {name} must be a string")
    if not isinstance(raw_id, str) or not _ID.fullmatch(raw_id) or ".." in raw_id:
        raise UntrustedRowError(
            f"a row's instance_id {str(raw_id)[:80]!r} is not a task id "
            "(letters, digits and _ . + @ -; one path component)"
        )
    return where


def _check_origin(row: Mapping[str, Any], where: str) -> None:
    """A known kind and source; a history row, and only it, names its fix commit, digest and files."""
    kind = row.get("kind", "repair")
    if kind not in KINDS:
        raise UntrustedRowError(f"{where}: kind {str(kind)[:40]!r} is not one of {', '.join(KINDS)}")
    source = row.get("source", "mutation")
    if source not in SOURCES:
        raise UntrustedRowError(f"{where}: source {str(source)[:40]!r} is not one of {', '.join(SOURCES)}")
    fix_commit, fix_sha = row.get("fix_commit", ""), row.get("fix_sha256", "")
    if (source == "history") != bool(fix_commit) or bool(fix_commit) != bool(fix_sha):
        raise UntrustedRowError(f"{where}: a history row names its fix_commit and fix_sha256, any other row neither")
    if fix_commit and (not _HEX40.fullmatch(str(fix_commit)) or not _HEX64.fullmatch(str(fix_sha))):
        raise UntrustedRowError(f"{where}: fix_commit or fix_sha256 is not a hex digest")
    fix_files = row.get("fix_files") or []
    if not isinstance(fix_files, list) or len(fix_files) > 50 or bool(fix_files) != bool(fix_commit):
        raise UntrustedRowError(
            f"{where}: fix_files must list the history fix's files (at most 50), and only for a history row"
        )
    for name in fix_files:
        check_relpath(name, "fix_files", where)


def _check_file_lists(row: Mapping[str, Any], where: str) -> None:
    """``compat_edits`` (clean relative paths, only with a compat patch) and ``baseline_tests`` (the pin's own
    validation: dbt test unique ids and statuses, which become ``--exclude`` selectors)."""
    edits = row.get("compat_edits") or []
    if not isinstance(edits, list) or len(edits) > 200 or (edits and not row.get("compat_patch_sha256")):
        raise UntrustedRowError(f"{where}: compat_edits must list at most 200 files the row's compat patch edits")
    for name in edits:
        check_relpath(name, "compat_edits", where)
    baseline = row.get("baseline_tests") or []
    if not isinstance(baseline, list) or len(baseline) > 1000:
        raise UntrustedRowError(f"{where}: baseline_tests must list at most 1000 {{unique_id, status}} entries")
    try:  # the pin's own validation: test unique ids, statuses dbt gives (they become --exclude selectors)
        baseline_tests_from([dict(t) if isinstance(t, Mapping) else t for t in baseline], where)
    except PinError as exc:
        raise UntrustedRowError(str(exc)) from None


def _check_ids(row: Mapping[str, Any], where: str) -> None:
    """The pin id, the commit and tree ids, and every sha256 match their grammar."""
    pin = row.get("pin", "")
    if not isinstance(pin, str) or not _PIN.fullmatch(pin) or ".." in pin:
        raise UntrustedRowError(
            f"{where}: pin {str(pin)[:80]!r} is not a pin id (owner__name@<sha>[+aug-<sha12> or +fix-<sha12>])"
        )
    for name, pattern in (("base_commit", _HEX40), ("tree", _HEX40), ("gold_sha256", _HEX64)):
        if not pattern.fullmatch(str(row.get(name, ""))):
            raise UntrustedRowError(f"{where}: {name} {str(row.get(name, ''))[:80]!r} is not a hex digest")
    for name in ("compat_patch_sha256", "augmentation_patch_sha256", "synthesis_patch_sha256", "port_patch_sha256"):
        value = row.get(name, "")
        if value and not _HEX64.fullmatch(str(value)):
            raise UntrustedRowError(f"{where}: {name} {str(value)[:80]!r} is not a sha256")
    origin = row.get("data_origin", "")
    if origin and origin not in ORIGINS:
        raise UntrustedRowError(f"{where}: data_origin {str(origin)[:80]!r} is not one of {', '.join(ORIGINS)}")
    dialect = str(row.get("dialect") or "native")
    if dialect != "native" and dialect.removeprefix("ported:") not in PORT_DIALECTS:
        raise UntrustedRowError(f"{where}: dialect {dialect[:80]!r} is not native or ported:<dialect>")


def _check_paths(row: Mapping[str, Any], where: str, limits: RowLimits) -> None:
    """The statement within its bound; the project folder, files and gold inside the tree; the database a
    bare ``<identifier>.duckdb`` file name."""
    for field, words in (
        ("problem_statement", "problem statement"),
        ("documentation_statement", "documentation statement"),
    ):
        statement = row.get(field, "")
        if len(statement) > limits.max_statement_chars:
            raise _over(
                where, f"the {words} (characters)", len(statement), "max_statement_chars", limits.max_statement_chars
            )
    check_relpath(row.get("project_dir", ""), "project_dir", where, allow_root=True)
    check_relpath(row.get("file", ""), "file", where)
    check_relpath(row.get("gold_file", ""), "gold_file", where)
    database = check_relpath(row.get("database_file", ""), "database_file", where)
    if "/" in database or database.startswith(".") or not _DATABASE_FILE.fullmatch(database):
        raise UntrustedRowError(
            f"{where}: database_file {database[:80]!r} must be a plain file name <identifier>.duckdb "
            "(e.g. build.duckdb)"
        )


def _check_patches(row: Mapping[str, Any], where: str, limits: RowLimits) -> None:
    """Every patch field (``_check_patch``), and the files and bytes all of them together create and write."""
    created = added = 0
    for name in _PATCH_FIELDS:
        text = row.get(name) or ""
        if not isinstance(text, str):
            raise UntrustedRowError(f"{where}: {name} must be a string")
        new, more = _check_patch(text, name, where, limits)
        created, added = created + new, added + more
    if created > limits.max_created_files:
        raise _over(
            where, "the number of files its patches create", created, "max_created_files", limits.max_created_files
        )
    if added > limits.max_written_bytes:
        raise _over(where, "the bytes its patches write", added, "max_written_bytes", limits.max_written_bytes)


def _check_packages(packages: object, project_dir: str, where: str, allow_ssh: bool) -> None:
    if not isinstance(packages, list) or len(packages) > 200:
        raise UntrustedRowError(f"{where}: packages must be a list of at most 200 records")
    for package in packages:
        if not isinstance(package, Mapping):
            raise UntrustedRowError(f"{where}: a package record is not a mapping")
        name, source = package.get("name"), package.get("source")
        if not isinstance(name, str) or not _PACKAGE_NAME.fullmatch(name) or name in (".", ".."):
            raise UntrustedRowError(f"{where}: package name {str(name)[:80]!r} is not a folder name")
        if not isinstance(source, str):
            raise UntrustedRowError(f"{where}: package {name}'s source must be a string")
        commit = package.get("commit", "")
        if commit and not _HEX40.fullmatch(str(commit)):
            raise UntrustedRowError(f"{where}: package {name}'s commit {str(commit)[:80]!r} is not a commit id")
        check_url(package.get("url", ""), f"package {name}'s url", where, allow_ssh=allow_ssh, allow_empty=True)
        kind, _, rest = source.partition(":")
        if kind == "local":
            # relative to the project folder, and inside the repository
            joined = PurePosixPath(project_dir or ".") / check_relpath_local(rest, name, where)
            depth = 0
            for part in joined.parts:
                depth += -1 if part == ".." else (0 if part == "." else 1)
                if depth < 0:
                    raise UntrustedRowError(f"{where}: local package {name} ({rest!r}) points outside the repository")
        elif kind == "git":
            check_url(rest.split("#", 1)[0], f"package {name}'s git source", where, allow_ssh=allow_ssh)
        elif kind == "hub":
            if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", rest):
                raise UntrustedRowError(f"{where}: package {name}'s hub id {rest[:80]!r} is not org/name")
        else:
            raise UntrustedRowError(f"{where}: package {name}'s source {source[:80]!r} is not hub:, git: or local:")


def check_relpath_local(value: str, name: str, where: str) -> str:
    """A ``local:`` package path: relative, no NUL or backslash (``..`` allowed; the caller bounds the depth)."""
    if not value or "\x00" in value or "\\" in value or value.startswith("/") or _DRIVE.match(value):
        raise UntrustedRowError(f"{where}: local package {name} has an unusable path {value[:80]!r}")
    return value

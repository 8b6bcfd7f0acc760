"""Git at exact commits: bare mirrors under HARVEST_HOME, commit resolution, and history-free exports.

Why it exists: a pin names a repository at one commit, and an agent working on a task must see that
commit's tree and nothing else (the history holds the answer). This module owns the three steps that
make this safe: keep one bare mirror per repository URL (clone once, fetch later), resolve a revision
to a verified 40-hex commit (branches and tags only on explicit request), and export the tree at that
commit into a folder WITHOUT ``.git``. The export refuses tree entries that could write outside the
destination, skips (and records) symlinks that leave the tree, submodules, oversized files and files
dbt never reads that a partial mirror lacks (a missing file dbt may read still refuses it), and
appears atomically: it is written into a temporary sibling and renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pygit2

from dbt_harvest.core.errors import FetchError
from dbt_harvest.core.pin import SkippedPath

_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_SHORT_HEX = re.compile(r"^[0-9a-fA-F]{7,39}$")
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MIRROR_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
_PINNED_REF_PREFIX = "refs/harvest/pinned/"
#: schemes of names that are never fetched from (a mirror under such a name has its own remote)
NAME_ONLY_SCHEMES = ("local://", "package://")

#: a repository with more files than this is refused (dbt projects hold a few thousand at most)
MAX_FILES = 50_000

_MODE_TREE = 0o040000
_MODE_LINK = 0o120000
_MODE_GITLINK = 0o160000
_MODE_BLOB_KIND = 0o100000


#: the files dbt reads (SQL, Python models, YAML, seeds, docs, the ignore file): a blob a partial mirror
#: lacks refuses the export only when it is one of these; any other (a vendored virtualenv's binaries) is
#: left out and recorded as skipped
_DBT_READ_SUFFIXES = (".sql", ".py", ".yml", ".yaml", ".csv", ".md", ".jinja", ".j2", ".txt", ".json")


def dbt_may_read(path: str) -> bool:
    """Whether dbt (or a package it installs) may read the file at ``path``: its suffix, or ``.dbtignore``."""
    name = posixpath.basename(path).lower()
    return name == ".dbtignore" or name.endswith(_DBT_READ_SUFFIXES)


@dataclass(frozen=True)
class Resolved:
    """A revision resolved to a commit; ``ref`` is the branch/tag it came from ("" for a sha)."""

    commit: str
    ref: str = ""


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote: the tree id, the number of files, and every path it left out."""

    tree: str
    files: int
    skipped: tuple[SkippedPath, ...]


def _one_line(text: object) -> str:
    return " ".join(str(text).split()) or "unknown error"


def normalize_url(url: str) -> str:
    """A canonical form of a repository location: local paths become absolute ``file://`` URLs."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        if url.startswith("file://"):
            return "file://" + str(Path(url[len("file://") :]).resolve())
        return url.rstrip("/")
    if re.match(r"^[^/@]+@[^/:]+:", url):  # scp-like git@host:owner/repo
        return url.rstrip("/")
    return "file://" + str(Path(url).expanduser().resolve())


def _clone_source(url: str) -> str:
    """What libgit2 should clone from: a plain path for local repositories, else the URL."""
    normalized = normalize_url(url)
    if normalized.startswith("file://"):
        return normalized[len("file://") :]
    return normalized


def mirror_key(url: str) -> str:
    """A readable, collision-free folder name: ``<owner>__<repo>-<hash12>``."""
    normalized = normalize_url(url)
    tail = re.sub(r"\.git$", "", normalized.rstrip("/"))
    parts = [p for p in re.split(r"[/:]", tail) if p][-2:]
    slug = _SLUG_UNSAFE.sub("-", "__".join(parts)).strip("-.") or "repo"
    digest = hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:12]
    return f"{slug[:80]}-{digest}"


class GitStore:
    """Bare mirrors of repositories, one per URL, under ``root`` (HARVEST_HOME/mirrors)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._stale: dict[str, str] = {}  # mirror path -> why the last fetch failed
        self._fetched: set[str] = set()

    # -- mirrors -------------------------------------------------------------------------------

    def mirror(self, url: str, *, fetch_from: str | None = None) -> pygit2.Repository:
        """The bare mirror of ``url``: cloned on first use, fetched on later uses (once per store).

        ``fetch_from``, when given, is where the bytes come from (a local copy of the repository that
        ``url`` names publicly): the mirror is still kept under ``url``'s name, and its remote points
        at ``fetch_from``, so later calls with ``url`` alone fetch from there. That location lives only
        in the mirror's git config under HARVEST_HOME, never in a committed artefact.

        A failed fetch of an existing mirror keeps the mirror (offline re-runs still find pinned
        commits) and is reported if a commit then turns out to be missing.
        """
        path = self.root / mirror_key(url)
        source = _clone_source(fetch_from or url)
        if path.is_dir():
            repo = self._open(path, url)
            if fetch_from is not None:
                _point_remote(repo, source)
            if str(path) not in self._fetched:
                self._fetch(repo, fetch_from or url)
                self._fetched.add(str(path))
            return repo
        if fetch_from is None and url.startswith(NAME_ONLY_SCHEMES):
            raise FetchError(
                f"{url} names a repository that was pinned from a local copy, and this HARVEST_HOME has no "
                "mirror of it; run `harvest add <path>@<commit>` (with the same --origin/--name) here first"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=self.root))
        try:
            pygit2.clone_repository(source, str(tmp), bare=True, remote=_mirror_remote)
            try:
                os.rename(tmp, path)
            except OSError:
                if not path.is_dir():  # a concurrent clone won the race otherwise
                    raise
        except (pygit2.GitError, OSError, ValueError, KeyError) as exc:
            raise FetchError(f"cannot reach {url}: {_one_line(exc)}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._fetched.add(str(path))
        return self._open(path, url)

    def has_mirror(self, url: str) -> bool:
        """Whether a mirror under ``url``'s name is already here (nothing is fetched)."""
        return (self.root / mirror_key(url)).is_dir()

    def _open(self, path: Path, url: str) -> pygit2.Repository:
        try:
            return pygit2.Repository(str(path))
        except pygit2.GitError as exc:
            raise FetchError(
                f"the mirror of {url} at {path} is damaged ({_one_line(exc)}); delete it and retry"
            ) from None

    def _fetch(self, repo: pygit2.Repository, url: str) -> None:
        try:
            remote = repo.remotes["origin"]
            remote.fetch(list(_MIRROR_REFSPECS))
            self._stale.pop(repo.path, None)
        except (pygit2.GitError, KeyError, OSError) as exc:
            self._stale[repo.path] = f"cannot reach {url}: {_one_line(exc)}"

    def _fetch_commit(self, repo: pygit2.Repository, sha: str) -> bool:
        """Best effort: fetch one commit by id, for servers that serve unadvertised commits.

        libgit2's local transport does not, so a commit on no branch or tag of a local repository
        stays unknown; the attempt costs one round trip.
        """
        try:
            repo.remotes["origin"].fetch([f"+{sha}:{_PINNED_REF_PREFIX}{sha}"])
        except (pygit2.GitError, KeyError, OSError, ValueError):
            return False
        return _lookup_commit(repo, sha) is not None

    # -- revisions -----------------------------------------------------------------------------

    def resolve(self, repo: pygit2.Repository, rev: str, *, allow_ref: bool = False) -> Resolved:
        """Resolve ``rev`` to a commit that exists in ``repo``.

        A 40-hex sha must name a commit; a short sha (7..39 hex) is expanded among commits and
        refused when ambiguous; a branch or tag name is refused unless ``allow_ref``.
        """
        rev = rev.strip()
        if not rev:
            raise FetchError("empty revision: give a commit sha")
        lowered = rev.lower()
        if _HEX40.match(lowered):
            if _lookup_commit(repo, lowered) is None and not self._fetch_commit(repo, lowered):
                raise FetchError(self._unknown(repo, rev))
            return Resolved(commit=lowered)
        if _SHORT_HEX.match(rev) and _ref_target(repo, rev) is None:
            return Resolved(commit=self._expand(repo, lowered))
        found = _ref_target(repo, rev)
        if found is None:
            raise FetchError(self._unknown(repo, rev, what="revision"))
        ref_name, commit = found
        if not allow_ref:
            kind = "tag" if ref_name.startswith("refs/tags/") else "branch"
            raise FetchError(
                f"{rev!r} is a {kind}, not a commit; pin a commit sha, or pass --resolve-ref to pin "
                f"the commit it points to now ({commit[:12]})"
            )
        return Resolved(commit=commit, ref=ref_name)

    def _expand(self, repo: pygit2.Repository, prefix: str) -> str:
        matches = _commits_with_prefix(repo, prefix)
        if len(matches) > 1:
            listed = ", ".join(m[:12] for m in sorted(matches)[:5])
            raise FetchError(f"short sha {prefix!r} is ambiguous ({listed}); give more hex digits")
        if not matches:
            raise FetchError(self._unknown(repo, prefix))
        return matches[0]

    def _unknown(self, repo: pygit2.Repository, rev: str, what: str = "commit") -> str:
        message = f"unknown {what} {rev!r} in {_describe(repo)}"
        stale = self._stale.get(repo.path)
        if stale:
            message += f" (the mirror could not be refreshed: {stale})"
        return message

    def root_commits(self, repo: pygit2.Repository, commit: str) -> tuple[str, ...]:
        """The parentless ancestors of ``commit`` (sorted): shared roots reveal forks."""
        start = self._commit(repo, commit)
        roots = set()
        walker = repo.walk(start.id, pygit2.enums.SortMode.NONE)
        for item in walker:
            if not item.parent_ids:
                roots.add(str(item.id))
        return tuple(sorted(roots))

    def tags(self, repo: pygit2.Repository) -> dict[str, str]:
        """Tag name -> the commit it points to (annotated tags peeled); non-commit tags left out."""
        result: dict[str, str] = {}
        for name in repo.references:
            if not name.startswith("refs/tags/"):
                continue
            try:
                target = repo.references[name].peel(pygit2.Commit)
            except (pygit2.GitError, ValueError, KeyError, pygit2.InvalidSpecError):
                continue
            result[name[len("refs/tags/") :]] = str(target.id)
        return dict(sorted(result.items()))

    def read_file(self, repo: pygit2.Repository, commit: str, path: str) -> bytes | None:
        """The bytes of one regular file at ``commit`` (None if absent, a folder, a link or a submodule)."""
        tree = self._commit(repo, commit).tree
        clean = posixpath.normpath(path.strip("/"))
        if clean in ("", ".") or clean.startswith("../"):
            return None
        try:
            entry = tree[clean]
        except KeyError:
            return None
        if entry.filemode & 0o170000 != _MODE_BLOB_KIND:
            return None
        return _blob_at(repo, entry.id, clean).data

    def _commit(self, repo: pygit2.Repository, commit: str) -> pygit2.Commit:
        found = _lookup_commit(repo, commit)
        if found is None:
            raise FetchError(self._unknown(repo, commit))
        return found

    # -- export --------------------------------------------------------------------------------

    def export(
        self,
        repo: pygit2.Repository,
        commit: str,
        dest: Path,
        *,
        max_file_bytes: int = 50 << 20,
        max_files: int = MAX_FILES,
        subdir: str = "",
    ) -> ExportReport:
        """Write the tree at ``commit`` (or its ``subdir``) into ``dest``, without ``.git``.

        ``dest`` must not exist (or be an empty folder). Nothing appears at ``dest`` unless the
        whole export succeeded.
        """
        tree = self._commit(repo, commit).tree
        if subdir.strip("/"):
            tree = _subtree(repo, tree, subdir, commit)
        dest = Path(dest)
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise FetchError(f"cannot export into {dest}: it already exists and is not empty")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
        try:
            writer = _TreeWriter(repo, tmp, max_file_bytes, max_files)
            writer.write_tree(tree, "")
            writer.write_links()
            if dest.exists():
                dest.rmdir()
            os.rename(tmp, dest)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise FetchError(f"cannot export {commit[:12]} into {dest}: {_one_line(exc)}") from None
        except (KeyError, pygit2.GitError) as exc:  # NotFoundError: an object the (partial) mirror lacks
            shutil.rmtree(tmp, ignore_errors=True)
            raise FetchError(
                f"commit {commit[:12]} is incomplete in the mirror (missing object {_one_line(exc)}); "
                "re-fetch the repository in full"
            ) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        skipped = tuple(sorted(writer.skipped, key=lambda s: s.path))
        return ExportReport(tree=str(tree.id), files=writer.files, skipped=skipped)


def _mirror_remote(repo: pygit2.Repository, name: str, url: str) -> pygit2.Remote:
    repo.remotes.create(name, url, _MIRROR_REFSPECS[0])
    for spec in _MIRROR_REFSPECS[1:]:
        repo.remotes.add_fetch(name, spec)
    return repo.remotes[name]


def _point_remote(repo: pygit2.Repository, source: str) -> None:
    """Make the mirror's ``origin`` remote fetch from ``source`` (a user moved or replaced the copy)."""
    try:
        if repo.remotes["origin"].url != source:
            repo.remotes.set_url("origin", source)
    except KeyError:
        _mirror_remote(repo, "origin", source)


def _describe(repo: pygit2.Repository) -> str:
    try:
        return repo.remotes["origin"].url or repo.path
    except (KeyError, pygit2.GitError):
        return repo.path


def _lookup_commit(repo: pygit2.Repository, sha: str) -> pygit2.Commit | None:
    try:
        obj = repo.get(sha)
    except (ValueError, pygit2.GitError):
        return None
    return obj if isinstance(obj, pygit2.Commit) else None


def _ref_target(repo: pygit2.Repository, name: str) -> tuple[str, str] | None:
    """A branch or tag called ``name`` (branches first), as (full ref name, peeled commit)."""
    if name == "HEAD":
        candidates = ["HEAD"]
    elif name.startswith("refs/"):
        candidates = [name]
    else:
        candidates = [f"refs/heads/{name}", f"refs/tags/{name}", f"refs/remotes/origin/{name}"]
    for candidate in candidates:
        try:
            ref = repo.references.get(candidate) if candidate != "HEAD" else repo.head
        except (pygit2.GitError, pygit2.InvalidSpecError, ValueError):
            ref = None
        if ref is None:
            continue
        try:
            target = ref.peel(pygit2.Commit)
        except (pygit2.GitError, ValueError, KeyError):
            continue
        full = ref.name if candidate != "HEAD" else repo.head.name
        return full, str(target.id)
    return None


def _commits_with_prefix(repo: pygit2.Repository, prefix: str) -> list[str]:
    """Every commit whose id starts with ``prefix``: libgit2's lookup, then a scan if ambiguous."""
    try:
        oid = repo.expand_id(prefix)
    except ValueError as exc:  # ambiguous among all objects: disambiguate among commits only
        if "ambiguous" not in str(exc).lower():
            return []
        return sorted(
            str(oid) for oid in repo.odb if str(oid).startswith(prefix) and isinstance(repo.get(oid), pygit2.Commit)
        )
    except (KeyError, pygit2.GitError):
        return []
    return [str(oid)] if isinstance(repo.get(oid), pygit2.Commit) else []


def _subtree(repo: pygit2.Repository, tree: pygit2.Tree, subdir: str, commit: str) -> pygit2.Tree:
    clean = posixpath.normpath(subdir.strip("/"))
    if clean.startswith("..") or clean == ".":
        raise FetchError(f"subdirectory {subdir!r} leaves the repository")
    try:
        entry = tree[clean]
    except KeyError:
        raise FetchError(f"no folder {subdir!r} at commit {commit[:12]}") from None
    if entry.filemode != _MODE_TREE:
        raise FetchError(f"{subdir!r} at commit {commit[:12]} is not a folder")
    return _tree_at(repo, entry.id, clean)


def _tree_at(repo: pygit2.Repository, oid: pygit2.Oid, rel: str) -> pygit2.Tree:
    """The tree object ``oid`` (a folder entry at ``rel``); FetchError when the object is something else."""
    found = repo[oid]
    if not isinstance(found, pygit2.Tree):
        raise FetchError(f"tree entry {rel!r} is a folder whose object {oid} is a {found.type_str}, not a tree")
    return found


def _blob_at(repo: pygit2.Repository, oid: pygit2.Oid, rel: str) -> pygit2.Blob:
    """The blob object ``oid`` (a file or link entry at ``rel``); FetchError when the object is something else."""
    found = repo[oid]
    if not isinstance(found, pygit2.Blob):
        raise FetchError(f"tree entry {rel!r} is a file whose object {oid} is a {found.type_str}, not a blob")
    return found


def _check_name(name: str | None, parent: str) -> str:
    """The tree entry's name, refused (FetchError) when missing or when it could write outside the
    export or into a ``.git`` folder."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name or name.lower() == ".git":
        shown = posixpath.join(parent, name or "") if parent else name
        raise FetchError(
            f"refusing to export: tree entry {shown!r} is not a safe path (path traversal, "
            "absolute path or .git); this commit cannot be pinned"
        )
    return name


class _TreeWriter:
    """Writes blobs and folders of one tree; symlinks are created last, after a containment check."""

    def __init__(self, repo: pygit2.Repository, root: Path, max_file_bytes: int, max_files: int) -> None:
        self.repo = repo
        self.root = root
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files
        self.files = 0
        self.skipped: list[SkippedPath] = []
        self._links: list[tuple[str, str]] = []  # (relative path, target)

    def write_tree(self, tree: pygit2.Tree, prefix: str) -> None:
        for index in range(len(tree)):
            entry = tree[index]
            name = _check_name(entry.name, prefix)
            rel = f"{prefix}/{name}" if prefix else name
            mode = entry.filemode
            if mode == _MODE_TREE:
                (self.root / rel).mkdir()
                self.write_tree(_tree_at(self.repo, entry.id, rel), rel)
            elif mode == _MODE_GITLINK:
                self.skipped.append(SkippedPath(rel, f"submodule (commit {entry.id})"))
            elif mode == _MODE_LINK:
                target = _blob_at(self.repo, entry.id, rel).data.decode("utf-8", "surrogateescape")
                if _link_stays_inside(rel, target):
                    self._links.append((rel, target))
                else:
                    self.skipped.append(SkippedPath(rel, _leaves_tree(target)))
            elif mode & 0o170000 == _MODE_BLOB_KIND:
                self._write_blob(entry, rel, mode)
            else:
                self.skipped.append(SkippedPath(rel, f"unknown tree entry mode {oct(mode)}"))

    def _write_blob(self, entry: pygit2.Object, rel: str, mode: int) -> None:
        try:
            _, size = self.repo.odb.read_header(entry.id)
        except KeyError:  # a partial snapshot left the blob out (its large files)
            if dbt_may_read(rel):
                raise
            self.skipped.append(SkippedPath(rel, "file absent from the mirror (a partial copy); dbt does not read it"))
            return
        if size > self.max_file_bytes:
            self.skipped.append(SkippedPath(rel, f"file of {size} bytes is over the {self.max_file_bytes}-byte bound"))
            return
        self.files += 1
        if self.files > self.max_files:
            raise FetchError(f"refusing to export: the tree has more than {self.max_files} files (raise the bound)")
        path = self.root / rel
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o755 if mode & 0o111 else 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(_blob_at(self.repo, entry.id, rel).data)

    def write_links(self) -> None:
        """Create the kept symlinks, then drop any whose real target leaves the tree via a chain, and any
        that leads nowhere (a dangling link or chain: dbt would fail on it with a bare FileNotFoundError)."""
        for rel, target in self._links:
            os.symlink(target, self.root / rel)
        real_root = os.path.realpath(self.root)
        for rel, target in self._links:
            path = self.root / rel
            resolved = os.path.realpath(path)
            if os.path.commonpath([real_root, resolved]) != real_root:
                path.unlink()
                self.skipped.append(SkippedPath(rel, _leaves_tree(target)))
        for rel, target in self._links:
            path = self.root / rel
            if os.path.islink(path) and not os.path.exists(path):
                path.unlink()
                self.skipped.append(SkippedPath(rel, f"symlink leads nowhere: its target does not exist (-> {target})"))


def _leaves_tree(target: str) -> str:
    """Why a symlink is skipped. An absolute target names a path of the machine the repository was made on
    (a committed virtualenv's ``/opt/homebrew/...``): it is not recorded, since a pin records no machine's
    paths (``corpus check``'s machine-path rule refused such a pin)."""
    shown = "an absolute path" if target.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", target) else target
    return f"symlink leaves the tree (-> {shown})"


def _link_stays_inside(rel: str, target: str) -> bool:
    """Lexical check: the target, read from the link's folder, stays within the exported tree."""
    if not target or target.startswith("/") or "\0" in target:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return not (joined == ".." or joined.startswith("../"))

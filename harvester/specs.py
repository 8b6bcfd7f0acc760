"""Repository specs: ``owner/repo@sha``, ``<git URL>@sha`` and ``<local path or file:// URL>@sha``,
and the public identity a pin is recorded under.

Parsing is pure: it decides what the user named (a GitHub shorthand, a git URL, a local path) and
which revision, and refuses anything ambiguous with a SpecError. Whether the revision exists is the
git store's business.

Where the bytes come from and what a repository is called are two things. A spec says where to fetch
(for a local copy: a path of this machine); an :class:`Identity` says what the repository is in every
committed artefact (pin id, task ids, split groups, ledgers, datasets, cards): its public origin
(``--origin https://github.com/owner/name``), a name given with ``--name``, the origin remote of a
local copy, or the local project's own dbt name under ``local://``. An identity never holds a path
of the machine that made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.core.errors import SpecError
from dbt_harvest.core.pin import GITHUB_URL, display_name

_GITHUB_SHORT = re.compile(r"^(?P<owner>[A-Za-z0-9][A-Za-z0-9_.-]*)/(?P<repo>[A-Za-z0-9_.-]+)$")
_URL = re.compile(r"^(?:https?|ssh|git)://[^\s]+$|^[\w.-]+@[\w.-]+:[^\s]+$")
_HEX = re.compile(r"^[0-9a-fA-F]{7,40}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_SLUG_PART = re.compile(r"[^A-Za-z0-9_.-]+")
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")
#: the scheme of a repository known only by name (no public location); never fetched from
LOCAL_SCHEME = "local://"


@dataclass(frozen=True)
class RepoSpec:
    """What a user asked for: where the repository is, and which revision."""

    text: str
    kind: str  # "github" | "url" | "local"
    url: str  # what git clones from (a URL or an absolute local path)
    owner: str
    repo: str
    rev: str

    @property
    def slug(self) -> str:
        """``owner__repo``: the stable, file-name-safe name of the repository."""
        return f"{self.owner}__{self.repo}"

    @property
    def rev_is_sha(self) -> bool:
        return bool(_HEX.match(self.rev))

    @property
    def display(self) -> str:
        """What the pin records as the repository: owner/repo for GitHub, else the URL."""
        return f"{self.owner}/{self.repo}" if self.kind == "github" else self.url


@dataclass(frozen=True)
class Identity:
    """What a pinned repository is called in committed artefacts: a public URL or ``local://<name>``."""

    owner: str
    repo: str
    url: str  # https://github.com/owner/name, another public git URL, or local://[owner/]name

    @property
    def slug(self) -> str:
        """``owner__repo``: the pin id's prefix."""
        return f"{self.owner}__{self.repo}"

    @property
    def display(self) -> str:
        """What task records show as the repository: ``owner/repo`` on GitHub, else the URL."""
        return display_name(self.url)


def origin_identity(origin: str) -> Identity:
    """The identity of a public origin URL (credentials dropped); a local path is refused."""
    text = _USERINFO.sub(r"\g<scheme>", origin.strip().rstrip("/"))  # never record a user or token
    match = GITHUB_URL.match(text)
    if match:
        owner, repo = match["owner"], match["repo"]
        # the form a GitHub shorthand spec fetches from, so both name one mirror and one repository
        return Identity(_clean(owner), _clean(repo), f"https://github.com/{owner}/{repo.removesuffix('.git')}.git")
    if not _URL.match(text) or text.startswith(("file://", LOCAL_SCHEME)):
        raise SpecError(
            f"--origin {origin!r} is not a public git URL; give one like https://github.com/owner/name "
            "(or name the repository with --name owner/name)"
        )
    tail = [p for p in re.split(r"[/:]", text.removesuffix(".git")) if p]
    if len(tail) < 3:
        raise SpecError(f"--origin {origin!r}: cannot tell the owner and repository name from it")
    return Identity(_clean(tail[-2]), _clean(tail[-1]), text)


def named_identity(name: str) -> Identity:
    """The identity of ``--name owner/name`` (or a bare ``name``, owner ``local``): ``local://owner/name``."""
    parts = [p for p in name.strip().split("/") if p]
    if not 1 <= len(parts) <= 2 or any(p in (".", "..") for p in parts):
        raise SpecError(f"--name {name!r}: give owner/name or name")
    owner, repo = (_clean(parts[0]), _clean(parts[1])) if len(parts) == 2 else ("local", _clean(parts[0]))
    return Identity(owner, repo, f"{LOCAL_SCHEME}{owner}/{repo}")


def spec_identity(spec: RepoSpec) -> Identity:
    """The identity of a GitHub or URL spec: where it is fetched from is public already."""
    if spec.kind == "local":
        raise SpecError("a local spec has no public identity of its own; use local_identity()")
    return Identity(spec.owner, spec.repo, spec.url)


def local_identity(remote_url: str | None, project_name: str | None, folder: str) -> Identity:
    """A local copy's identity without --origin/--name: its origin remote when that is a public URL,
    else its dbt project's name, else its folder's name (never its path)."""
    if remote_url and _URL.match(remote_url.strip()) and not remote_url.startswith(("file://", LOCAL_SCHEME)):
        try:
            return origin_identity(remote_url)
        except SpecError:
            pass
    name = _clean(project_name) if project_name and project_name.strip() else _clean(folder)
    return Identity("local", name, f"{LOCAL_SCHEME}local/{name}")


def _clean(part: str) -> str:
    part = part.removesuffix(".git")
    return _SLUG_PART.sub("-", part).strip("-") or "repo"


def parse_spec(text: str, *, cwd: Path | None = None) -> RepoSpec:
    """Parse a spec; raise SpecError with the reason when it is malformed."""
    text = text.strip()
    if "@" not in text:
        raise SpecError(f"malformed spec {text!r}: expected <repo>@<commit> (e.g. acme/analytics@1a2b3c4)")
    where, rev = text.rsplit("@", 1)
    if not where:
        raise SpecError(f"malformed spec {text!r}: nothing before '@'")
    if not rev:
        raise SpecError(f"malformed spec {text!r}: no commit after '@'")
    if not _REF.match(rev) or ".." in rev:
        raise SpecError(f"malformed spec {text!r}: {rev!r} is neither a commit sha nor a ref name")

    if where.startswith("file://"):
        path = Path(where.removeprefix("file://"))
        return _local(text, path, rev, cwd)
    if _URL.match(where):
        tail = re.split(r"[/:]", where.rstrip("/"))
        if len(tail) < 2 or not tail[-1]:
            raise SpecError(f"malformed spec {text!r}: cannot tell the repository name from {where!r}")
        return RepoSpec(text, "url", where, _clean(tail[-2]), _clean(tail[-1]), rev)
    if where.startswith((".", "/", "~")) or (Path(where).exists() and not _GITHUB_SHORT.match(where)):
        return _local(text, Path(where).expanduser(), rev, cwd)
    match = _GITHUB_SHORT.match(where)
    if match:
        owner, repo = match["owner"], match["repo"].removesuffix(".git")
        return RepoSpec(text, "github", f"https://github.com/{owner}/{repo}.git", owner, repo, rev)
    raise SpecError(f"malformed spec {text!r}: expected owner/repo@sha, <git URL>@sha or <local path>@sha")


def _local(text: str, path: Path, rev: str, cwd: Path | None) -> RepoSpec:
    base = cwd or Path.cwd()
    absolute = (base / path).resolve() if not path.is_absolute() else path.resolve()
    return RepoSpec(text, "local", str(absolute), "local", _clean(absolute.name), rev)

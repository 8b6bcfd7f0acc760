"""Repository specs: ``owner/repo@sha``, ``<git URL>@sha`` and ``<local path or file:// URL>@sha``.

Parsing is pure: it decides what the user named (a GitHub shorthand, a git URL, a local path) and
which revision, and refuses anything ambiguous with a SpecError. Whether the revision exists is the
git store's business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import SpecError

_GITHUB_SHORT = re.compile(r"^(?P<owner>[A-Za-z0-9][A-Za-z0-9_.-]*)/(?P<repo>[A-Za-z0-9_.-]+)$")
_URL = re.compile(r"^(?:https?|ssh|git)://[^\s]+$|^[\w.-]+@[\w.-]+:[^\s]+$")
_HEX = re.compile(r"^[0-9a-fA-F]{7,40}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_SLUG_PART = re.compile(r"[^A-Za-z0-9_.-]+")


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
    raise SpecError(
        f"malformed spec {text!r}: expected owner/repo@sha, <git URL>@sha or <local path>@sha"
    )


def _local(text: str, path: Path, rev: str, cwd: Path | None) -> RepoSpec:
    base = cwd or Path.cwd()
    absolute = (base / path).resolve() if not path.is_absolute() else path.resolve()
    return RepoSpec(text, "local", str(absolute), "local", _clean(absolute.name), rev)

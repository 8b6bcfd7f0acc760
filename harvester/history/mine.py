"""`harvest mine`: scan a pinned repository's history for fixes and pin each fix's parent with the fix applied.

Each pin it writes is a history pin (``Pin.is_history``): the parent commit with the parent's data (seeds,
vars, packages as the parent pins them) and the fix commit's model files, built twice like every pin, so gold
is the fixed project. The mint then undoes the fix (``history.candidate``) and admits the task by the same
rules as every other. A candidate whose parent cannot be pinned (it does not build on this toolchain, a
package it needs is missing offline, the fix needs more than the model file) is refused with the first line
of the error, and the scan goes on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pygit2

from dbt_harvest.core import atomic
from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.home import harvest_home, mirrors_dir, pin_folder_name, pins_dir
from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.add import AddOptions, HistoryFix, add, repo_mirror_copy
from dbt_harvest.harvester.gitstore import GitStore
from dbt_harvest.harvester.history.scan import Verdict, scan
from dbt_harvest.harvester.sandbox import Limits
from dbt_harvest.harvester.specs import LOCAL_SCHEME, parse_spec


@dataclass(frozen=True)
class MineOptions:
    since: str | None = None  # ISO date: commits authored on or after it
    start: str | None = None  # where the walk starts (a commit or ref of the repository; None: the pinned commit)
    max_commits: int = 500  # first-parent commits walked back from the pinned one, at most
    max_fixes: int | None = None  # fix candidates pinned, at most (newest first)
    source: Path | None = None  # a local copy of the repository to read (a pin made from a local copy)
    repo_mirror: Path | None = None
    package_mirror: Path | None = None
    sandboxed: bool = True
    limits: Limits = Limits()
    scan_only: bool = False
    # re-pin the history pins already under pins/ that were mined from this pin (a corpus rebuilt on a fresh
    # machine), nothing else: the same ids, `harvest add --rebuild`'s drift report
    rebuild: bool = False
    # try again the parents an earlier run could not pin on this toolchain (their refusals are remembered)
    retry_refused: bool = False


@dataclass(frozen=True)
class Pinned:
    verdict: Verdict
    pin_id: str = ""  # the history pin written (or found), "" when refused
    refused: str = ""  # why the fix's parent could not be pinned
    status: str = ""  # "added" | "exists" | "rebuilt" | "refused before" (a remembered refusal, not tried again)
    drift: tuple[str, ...] = ()  # a rebuild's differences from the committed pin

    def to_dict(self) -> dict[str, object]:
        return {
            **self.verdict.to_dict(),
            "pin": self.pin_id,
            "refused": self.refused,
            "status": self.status,
            "drift": list(self.drift),
        }


@dataclass(frozen=True)
class MineReport:
    base: str
    verdicts: tuple[Verdict, ...]
    pinned: tuple[Pinned, ...] = field(default=())

    @property
    def pin_ids(self) -> list[str]:
        return [p.pin_id for p in self.pinned if p.pin_id]

    def to_dict(self) -> dict[str, object]:
        rejected: dict[str, int] = {}
        for v in self.verdicts:
            if not v.taken:
                key = v.reason.split(" (", 1)[0]
                rejected[key] = rejected.get(key, 0) + 1
        refused: dict[str, int] = {}
        for p in self.pinned:
            if p.refused:
                key = refusal_class(p.refused)
                refused[key] = refused.get(key, 0) + 1
        return {
            "pin": self.base,
            "commits": len(self.verdicts),
            "candidates": sum(v.taken for v in self.verdicts),
            "rejected": dict(sorted(rejected.items(), key=lambda kv: -kv[1])),
            "pinned": len(self.pin_ids),
            "pin_refused": refused,
            "taken": [v.to_dict() for v in self.verdicts if v.taken],
            "fixes": [p.to_dict() for p in self.pinned],
            "not_taken": [v.to_dict() for v in self.verdicts if not v.taken],
        }


def refusal_class(reason: str) -> str:
    """A refusal's kind, for counting: its text up to the first quoted or bracketed detail."""
    import re

    return re.split(r"[('\"{\[]| in FilePath| at /", reason, maxsplit=1)[0].strip(" :;,")[:100]


def is_public_url(url: str) -> bool:
    """A pin recorded under a public URL (not ``local://``: a repository pinned from a local copy)."""
    return not url.startswith(LOCAL_SCHEME)


def _repository(base: Pin, options: MineOptions) -> pygit2.Repository:
    """The base pin's repository (its mirror, fetched from the local copy or repository mirror if given)."""
    store = GitStore(mirrors_dir())
    if options.source is not None:
        return store.mirror(base.url, fetch_from=str(options.source.resolve()))
    local = repo_mirror_copy(parse_spec(base.spec), options.repo_mirror) if is_public_url(base.url) else None
    return store.mirror(base.url, fetch_from=str(local) if local else None)


def _resolve(repo: pygit2.Repository, rev: str, base: Pin) -> str:
    """The commit ``rev`` names in the repository; HEAD falls back to the main or master branch (a mirror's HEAD
    can name a branch the repository no longer has)."""
    for name in (rev, "refs/heads/main", "refs/heads/master") if rev == "HEAD" else (rev,):
        try:
            return str(repo.revparse_single(name).peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError):
            continue
    raise HarvestError(f"--from {rev!r} is not a commit or ref of {base.repo}")


def _add_options(base: Pin, verdict: Verdict, options: MineOptions, repo: pygit2.Repository) -> tuple[str, AddOptions]:
    """The spec and add options that pin the fix's parent with the fix, under the base pin's identity."""
    fix = HistoryFix(commit=verdict.sha, files=verdict.files, date=verdict.date, mined_from=base.id)
    compat = pins_dir() / "patches" / f"{base.compat_patch_sha256}.diff" if base.compat_patch_sha256 else None
    # the project where the base pin has it, else wherever discovery finds one at the parent (a package whose
    # integration_tests/ came later, a project that moved)
    where = f"{base.project_dir.strip('/')}/dbt_project.yml" if base.project_dir not in ("", ".") else "dbt_project.yml"
    project_dir = (
        base.project_dir if GitStore(mirrors_dir()).read_file(repo, verdict.parent, where) is not None else None
    )
    common = AddOptions(
        project_dir=project_dir,
        package_mirror=options.package_mirror,
        repo_mirror=options.repo_mirror,
        sandboxed=options.sandboxed,
        limits=options.limits,
        compat_patch=compat,
        allow_edits=bool(base.compat_edits),
        fix=fix,
        rebuild=options.rebuild,
        # the packages the parent's authors built with: ranges resolve as `dbt deps` did at the parent's commit
        packages_as_of=_commit_time(repo, verdict.parent),
    )
    if options.source is not None:
        if is_public_url(base.url):
            return f"{options.source}@{verdict.parent}", replace(common, origin=base.url)
        return f"{options.source}@{verdict.parent}", replace(common, name=base.url.removeprefix(LOCAL_SCHEME))
    return f"{base.spec.rsplit('@', 1)[0]}@{verdict.parent}", common


def _commit_time(repo: pygit2.Repository, sha: str) -> int | None:
    """When ``sha`` was committed (seconds since the epoch); None when the repository lacks it."""
    try:
        found = repo[sha]
    except (KeyError, ValueError):
        return None
    return int(found.commit_time) if isinstance(found, pygit2.Commit) else None


def mine(base: Pin, options: MineOptions = MineOptions(), on_fix: Callable[[Pinned], None] | None = None) -> MineReport:
    """Scan the base pin's history; pin every fix candidate's parent with its fix (newest first)."""
    if base.is_history or base.augmentation_sha256:
        raise HarvestError(
            f"{base.id} is a derived pin; mine the history of the pin it was made from ({base.mined_from or base.augments})"
        )
    repo = _repository(base, options)
    if options.rebuild:
        history = history_pins(base.id)
        verdicts = tuple(Verdict(p.fix_commit, p.commit, p.fix_date, "", True, "", p.fix_files) for p in history)
        report, taken = MineReport(base.id, ()), list(verdicts)
    else:
        start = base.commit
        if options.start:
            start = _resolve(repo, options.start, base)
        verdicts = tuple(scan(repo, start, since=options.since, max_commits=options.max_commits))
        report = MineReport(base.id, verdicts)
        if options.scan_only:
            return report
        taken = [v for v in verdicts if v.taken][: options.max_fixes]
    pinned: list[Pinned] = []
    remembered = Refusals(base.id)
    for verdict in taken:
        spec, add_options = _add_options(base, verdict, options, repo)
        key = refusal_key(base, verdict, add_options)
        before = None if options.retry_refused or options.rebuild else remembered.get(verdict.sha, key)
        if before is not None:
            outcome = Pinned(verdict, refused=before, status="refused before")
        else:
            try:
                result = add(spec, add_options)
                outcome = Pinned(verdict, result.pin.id, status=result.status, drift=result.drift)
            except HarvestError as exc:
                # long enough for a reason per dbt release `harvest add` tried (harvester.toolchain)
                outcome = Pinned(verdict, refused=" ".join(str(exc).split())[:2000])
                remembered.put(verdict.sha, key, outcome.refused)
        pinned.append(outcome)
        if on_fix is not None:
            on_fix(outcome)
    return replace(report, pinned=tuple(pinned))


#: refusals that depend on this machine's reach (a package mirror, the network), never remembered
_CIRCUMSTANTIAL = ("package mirror", "unreachable", "cannot reach", "sandbox", "timed out", "wall time limit")


def refusal_key(base: Pin, verdict: Verdict, options: AddOptions) -> str:
    """What decides whether a fix's parent pins: the commits and files, the base's compat patch, the project
    folder, and the toolchain (dbt-core, dbt-duckdb, duckdb...): another toolchain tries it again."""
    from dbt_harvest.core.versions import versions
    from dbt_harvest.harvester.toolchain.releases import walk_releases

    data = {
        "parent": verdict.parent,
        "fix": verdict.sha,
        "files": list(verdict.files),
        "project_dir": options.project_dir,
        "compat": base.compat_patch_sha256,
        "versions": versions(),
        # the dbt releases `harvest add` may walk (harvester.toolchain): a parent refused before a release was
        # supported is tried again on it
        "releases": [release.dbt_core for release in walk_releases()],
        "packages_as_of": options.packages_as_of,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class Refusals:
    """The parents of a base pin's fixes that could not be pinned, with why, under HARVEST_HOME/history: a later
    `harvest mine` does not build them again on the same toolchain (`--retry-refused` does)."""

    def __init__(self, base_id: str) -> None:
        self.path = harvest_home() / "history" / pin_folder_name(base_id) / "refused.json"
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            data = {}
        self._data: dict[str, dict[str, str]] = data if isinstance(data, dict) else {}

    def get(self, fix_commit: str, key: str) -> str | None:
        row = self._data.get(fix_commit)
        return str(row["reason"]) if isinstance(row, dict) and row.get("key") == key and row.get("reason") else None

    def put(self, fix_commit: str, key: str, reason: str) -> None:
        if any(word in reason for word in _CIRCUMSTANTIAL):
            return
        self._data[fix_commit] = {"key": key, "reason": reason}
        atomic.write_text(self.path, json.dumps(self._data, sort_keys=True, indent=1) + "\n")


def history_pins(base_id: str, pins: Path | None = None) -> list[Pin]:
    """The history pins mined from ``base_id`` under the pins folder."""
    from dbt_harvest.core.pin import list_pins

    return [p for p in list_pins(pins or pins_dir()) if p.mined_from == base_id]


__all__ = ["MineOptions", "MineReport", "Pinned", "history_pins", "mine"]

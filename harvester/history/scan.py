"""Which commits of a repository's history fix model logic, and why each other commit does not.

The walk follows first parents back from the pinned commit, bounded by a date and a count: a merged pull
request is seen as the one commit that merged it, its change against the first parent (what the main line
was before it), which is also how squash-merging projects record it. Each commit is judged from what it
changed and what it says, with no build:

- the repository's first commit is not a fix (no parent to be the bug);
- a commit that changes no model SQL (docs, schema YAML, seeds, tests, CI, config) is not a fix of logic;
- a commit that adds, removes or renames a model, or changes more model files than a task undoes, is left
  out, as is one that also changes macros (its model change may need them);
- a change of whitespace or comments only is formatting;
- what remains must say it fixes something (fix, bug, correct, wrong, dedupe...) in its subject or the first
  paragraph of its body (a merged pull request's title), not in a squash merge's list of work-in-progress
  commits ("* fix missing comma").

Whether the fix changes what the project builds is measured later, by the same admission as every task:
a refactor that changes nothing is refused there ("the official check cannot see the change").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

import pygit2

#: words by which a commit says it fixes behaviour (subject or body)
FIX_WORDS = re.compile(
    r"(?<![a-z])(fix(e[sd]|ing)?|bug(fix(es)?|s)?|hotfix|correct(s|ed|ion|ly)?|incorrect(ly)?|wrong(ly)?|"
    r"de-?dup(e|es|ed|licate[sd]?|lication)?|duplicat(e[sd]?|es|ion)|inaccura(te|cy)|erroneous|"
    r"mis-?(count|calculat\w*|match\w*)|double[- ]count\w*|off[- ]by[- ]one|regression|handl(e[sd]?|ing)|"
    r"ensur(e[sd]?|ing)|prevent(s|ed|ing)?|missing|nulls?|resolv(e[sd]?|ing)|broken|issues?)(?![a-z])",
    re.IGNORECASE,
)
#: a fix of something that is not model logic, said in so many words
NOT_LOGIC = re.compile(
    r"(?<![a-z])(typos?|docs?|documentation|readme|changelog|lint(ing)?|sqlfluff|ci|"
    r"yml|yaml|tests?)(?![a-z])",
    re.IGNORECASE,
)

#: fix words that say nothing about what was fixed (beside "typo" or "docs" they are not about logic)
_PLAIN_FIX = frozenset({"fix", "fixes", "fixed", "fixing"})

_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/|\{#.*?#\}", re.DOTALL)


@dataclass(frozen=True)
class Change:
    path: str
    status: str  # "added" | "deleted" | "modified" | "renamed" | other git statuses


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: tuple[str, ...]
    date: str  # author date, ISO 8601 UTC
    subject: str
    body: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Verdict:
    """One commit judged: ``taken`` as a fix candidate, else ``reason`` says why not."""

    sha: str
    parent: str
    date: str
    subject: str
    taken: bool
    reason: str
    files: tuple[str, ...]  # the model files a taken fix changes

    def to_dict(self) -> dict[str, object]:
        return {
            "commit": self.sha,
            "parent": self.parent,
            "date": self.date,
            "subject": self.subject,
            "taken": self.taken,
            "reason": self.reason,
            "files": list(self.files),
        }


def is_model_sql(path: str) -> bool:
    """A dbt model's SQL file: ``.sql`` under a ``models`` folder, outside vendored packages and build output."""
    parts = PurePosixPath(path).parts
    return (
        path.endswith(".sql") and "models" in parts[:-1] and not {"dbt_packages", "dbt_modules", "target"} & set(parts)
    )


def _kind(path: str) -> str:
    parts = PurePosixPath(path).parts
    lowered = {p.lower() for p in parts[:-1]}
    if is_model_sql(path):
        return "model SQL"
    if path.endswith(".sql") and "macros" in lowered:
        return "macros"
    if lowered & {".github", ".buildkite", ".circleci", ".gitlab", "ci", ".ci"}:
        return "CI"
    if path.endswith((".csv", ".tsv")) or lowered & {"seeds", "data"}:
        return "seeds"
    if path.endswith(".md") or lowered & {"docs", "doc"}:
        return "docs"
    if lowered & {"tests", "test"} or path.endswith(".sql"):
        return "tests"
    if path.endswith((".yml", ".yaml")):
        return "YAML (docs, tests, config)"
    return "other files"


def normalized(sql: str) -> str:
    """The SQL with comments removed and whitespace collapsed: two texts equal here differ in formatting only."""
    return " ".join(_COMMENTS.sub(" ", sql).split())


def stated(commit: CommitInfo) -> str:
    """What a commit says it does: its subject and the first paragraph of its body (a merged pull request's
    title), without bullet lines (a squash merge lists its work-in-progress commits there: "* fix", "* fix
    missing comma", which say nothing about the change as a whole)."""
    first = commit.body.strip().split("\n\n", 1)[0] if commit.body.strip() else ""
    lines = [line for line in first.splitlines() if not line.lstrip().startswith(("* ", "- "))]
    return "\n".join([commit.subject, *lines])


def judge(commit: CommitInfo, text: Callable[[str, str], str | None], max_files: int = 1) -> Verdict:
    """Whether ``commit`` is a fix candidate; ``text(sha, path)`` reads a file at a commit (None: absent)."""
    parent = commit.parents[0] if commit.parents else ""

    def no(reason: str, files: tuple[str, ...] = ()) -> Verdict:
        return Verdict(commit.sha, parent, commit.date, commit.subject, False, reason, files)

    if not commit.parents:
        return no("the repository's first commit")
    models = tuple(sorted(c.path for c in commit.changes if is_model_sql(c.path)))
    if not models:
        kinds = sorted({_kind(c.path) for c in commit.changes})
        return no(f"changes no model SQL (only {', '.join(kinds) or 'nothing'})")
    if any(c.status != "modified" for c in commit.changes if is_model_sql(c.path)):
        return no("adds, removes or renames a model", models)
    if len(models) > max_files:
        return no(f"changes {len(models)} model files (a history task undoes at most {max_files})", models)
    if any(_kind(c.path) == "macros" for c in commit.changes):
        return no("changes macros too (the model change may need them)", models)
    if all(normalized(text(parent, f) or "") == normalized(text(commit.sha, f) or "") for f in models):
        return no("formatting or comments only", models)
    message = stated(commit)
    if not FIX_WORDS.search(message):
        return no("the message does not say it fixes anything", models)
    words = {m.group(0).lower() for m in FIX_WORDS.finditer(message)}
    if NOT_LOGIC.search(commit.subject) and words <= _PLAIN_FIX:
        return no("the message fixes docs, tests, typos or lint, not logic", models)
    return Verdict(commit.sha, parent, commit.date, commit.subject, True, "", models)


_STATUS = {
    pygit2.enums.DeltaStatus.ADDED: "added",
    pygit2.enums.DeltaStatus.DELETED: "deleted",
    pygit2.enums.DeltaStatus.MODIFIED: "modified",
    pygit2.enums.DeltaStatus.RENAMED: "renamed",
}


def commit_info(repo: pygit2.Repository, commit: pygit2.Commit) -> CommitInfo:
    """What :func:`judge` reads of a commit: parents, author date, message, changed paths (vs first parent)."""
    changes: tuple[Change, ...] = ()
    if commit.parents:
        diff = repo.diff(commit.parents[0], commit)  # each commit compared as its tree
        changes = tuple(
            Change(
                d.new_file.path if d.status != pygit2.enums.DeltaStatus.DELETED else d.old_file.path,
                _STATUS.get(d.status, "other"),
            )
            for d in diff.deltas
        )
    when = datetime.fromtimestamp(commit.author.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    subject, _, body = commit.message.partition("\n")
    return CommitInfo(
        str(commit.id), tuple(str(p) for p in commit.parent_ids), when, subject.strip(), body.strip(), changes
    )


def walk(
    repo: pygit2.Repository, start: str, *, since: str | None = None, max_commits: int = 500
) -> Iterator[CommitInfo]:
    """First-parent history from ``start`` (included), newest first, down to ``since`` (an ISO date, inclusive)
    and at most ``max_commits`` commits."""
    commit = repo.revparse_single(start).peel(pygit2.Commit)
    for _ in range(max_commits):
        info = commit_info(repo, commit)
        if since and info.date[: len(since)] < since:
            return
        yield info
        if not commit.parents:
            return
        commit = commit.parents[0]


def reader(repo: pygit2.Repository) -> Callable[[str, str], str | None]:
    """``text(sha, path)`` over ``repo`` for :func:`judge` (None for an absent or non-UTF-8 file)."""
    from dbt_harvest.harvester.history.fix import FixError, file_text

    def text(sha: str, path: str) -> str | None:
        try:
            return file_text(repo, sha, path)
        except FixError:
            return None

    return text


def scan(
    repo: pygit2.Repository, start: str, *, since: str | None = None, max_commits: int = 500, max_files: int = 1
) -> list[Verdict]:
    """Every commit of the walk judged, newest first."""
    text = reader(repo)
    return [judge(info, text, max_files) for info in walk(repo, start, since=since, max_commits=max_commits)]

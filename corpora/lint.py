"""Contamination lint: every way a benchmark or an evaluation task could leak into training, as evidence.

Checks, each a small function returning Violations (kind, subject, evidence):
  benchmark-project     a pin's dbt project is one of Spider 2.0-DBT's projects
  benchmark-package     a pin IS one of the benchmark's packages (domain or utility repository)
  benchmark-dependency  a pin depends on a benchmark domain package (utility dependencies are fine)
  unassigned            a pin has no reserved split
  split-mismatch        a task's split disagrees with its pin's reservation (or sits in another split's folder)
  group-split           one split group has members on two sides
  shared-model-file     one model file (content hash) on two sides
  ngram-overlap         a training problem statement shares a word 13-gram of its task-specific words (the
                        statement template's fixed phrases cut out, see corpora.digest) with an evaluation one;
                        an n-gram that three repositories' statements share is common documentation, and
                        so is a column's documentation (name and description) that an evaluation completion
                        lists word for word
  same-statement        a training problem statement is word for word an evaluation one (a copy too short
                        for 13 task-specific words in a row)
`harvest lint` prints them and exits non-zero; `dataset build` and `train` run it first and refuse.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.core.pin import Pin, list_pins
from dbt_harvest.core.task_record import TaskRecord, task_from_dict
from dbt_harvest.corpora.digest import (
    NGRAM,
    TaskDigest,
    digest,
    documented_spans,
    ngrams,
    specific_ngrams,
    statement_sha,
)
from dbt_harvest.corpora.exclusions import Exclusions, load_exclusions
from dbt_harvest.corpora.groups import split_groups
from dbt_harvest.corpora.repos import is_empty_file_hash, package_refs, pin_identities

EVAL = frozenset({"dev", "test"})


@dataclass(frozen=True)
class Violation:
    kind: str
    subject: str
    evidence: str

    def line(self) -> str:
        return f"{self.kind}: {self.subject}: {self.evidence}"


def check_exclusions(pins: Sequence[Pin], exclusions: Exclusions) -> list[Violation]:
    out: list[Violation] = []
    bench = exclusions.describe()
    for pin in pins:
        if pin.project_name.lower() in exclusions.project_names:
            out.append(Violation("benchmark-project", pin.id, f"dbt project {pin.project_name!r} is a {bench} project"))
        owned = sorted(pin_identities(pin) & exclusions.benchmark_repos)
        if owned:
            kind = "domain" if set(owned) & exclusions.domain_packages else "utility"
            out.append(Violation("benchmark-package", pin.id, f"{pin.url} is the {bench} {kind} package {owned[0]}"))
        for pkg in pin.packages:
            hit = sorted(package_refs(pkg) & exclusions.domain_packages)
            if hit:
                out.append(
                    Violation(
                        "benchmark-dependency",
                        pin.id,
                        f"depends on {bench} domain package {hit[0]} ({pkg.source}, requested {pkg.requested!r})",
                    )
                )
    return out


def check_assigned(pins: Sequence[Pin], splits: Mapping[str, str]) -> list[Violation]:
    return [
        Violation("unassigned", p.id, "no reserved split; run `harvest split assign`")
        for p in pins
        if p.id not in splits
    ]


def check_task_splits(tasks: Sequence[TaskDigest], splits: Mapping[str, str]) -> list[Violation]:
    out = []
    for task in tasks:
        reserved = splits.get(task.pin)
        if reserved is not None and reserved != task.split:
            out.append(
                Violation(
                    "split-mismatch", task.instance_id, f"task says {task.split}, pin {task.pin} is reserved {reserved}"
                )
            )
    return out


def check_groups(pins: Sequence[Pin], splits: Mapping[str, str]) -> list[Violation]:
    out = []
    for gid, members in split_groups(pins).items():
        sides = {splits[m] for m in members if m in splits}
        if len(sides) > 1:
            detail = ", ".join(f"{m}={splits[m]}" for m in members if m in splits)
            out.append(Violation("group-split", gid, f"members on {len(sides)} sides: {detail}"))
    return out


def check_model_files(pins: Sequence[Pin], splits: Mapping[str, str]) -> list[Violation]:
    seen: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for pin in pins:
        if pin.id not in splits:
            continue
        for path, sha in sorted(pin.model_files.items()):
            if not is_empty_file_hash(sha):
                seen[sha].append((splits[pin.id], pin.id, path))
    out = []
    for sha, where in sorted(seen.items()):
        if len({split for split, _, _ in where}) > 1:
            detail = "; ".join(f"{split}: {pin}:{path}" for split, pin, path in where)
            out.append(Violation("shared-model-file", sha[:12], detail))
    return out


#: a word n-gram found in the statements of this many split groups (different repositories, any split) is
#: shared documentation, not a trace of one evaluation task: Fivetran's packages describe ``source_relation``
#: with one doc block in every package, and a completion statement quotes a model's whole column list
SHARED_GROUPS = 3


def shared_ngrams(tasks: Sequence[TaskRecord | TaskDigest]) -> frozenset[str]:
    """The n-grams (as digests) that statements of at least ``SHARED_GROUPS`` split groups hold."""
    groups: dict[str, set[str]] = defaultdict(set)
    for task in tasks:
        grams = specific_ngrams(task.problem_statement) if isinstance(task, TaskRecord) else task.ngrams
        for gram in grams:
            groups[gram].add(task.split_group)
    return frozenset(gram for gram, seen in groups.items() if len(seen) >= SHARED_GROUPS)


def _same_column_docs(task: TaskRecord | TaskDigest, documented: frozenset[tuple[str, str, int]]) -> frozenset[str]:
    """The n-grams of a training statement that lie in a column's documentation which an evaluation
    completion lists word for word (name and description): one column documented the same way in two
    repositories (a vendor's doc block, such as Fivetran's ``is_most_recent_record``) is that vendor's public
    text, not a trace of the other task. Words that only partly match a documented line are still evidence."""
    if not isinstance(task, TaskRecord):
        return frozenset()
    return frozenset(gram for span in documented_spans(task.problem_statement, documented) for gram in ngrams(span))


def check_ngrams(train: Sequence[TaskRecord | TaskDigest], evaluation: Sequence[TaskDigest]) -> list[Violation]:
    """Training statements that share a task-specific n-gram (or their whole text) with an evaluation one; an
    n-gram that the statements of ``SHARED_GROUPS`` repositories share is documentation common to them all
    (``shared_ngrams``), and no evidence."""
    shared = shared_ngrams([*train, *evaluation])
    documented = frozenset(line for task in evaluation for line in task.column_lines)
    index: dict[str, str] = {}
    whole: dict[str, str] = {}
    for held_out in evaluation:
        for gram in held_out.ngrams:
            index.setdefault(gram, f"{held_out.split} task {held_out.instance_id}")
        whole.setdefault(held_out.statement_sha, f"{held_out.split} task {held_out.instance_id}")
    out: list[Violation] = []
    for task in train:
        sha = statement_sha(task.problem_statement) if isinstance(task, TaskRecord) else task.statement_sha
        if sha in whole:
            out.append(
                Violation(
                    "same-statement", task.instance_id, f"its problem statement is word for word that of {whole[sha]}"
                )
            )
        texts = (
            specific_ngrams(task.problem_statement) if isinstance(task, TaskRecord) else dict.fromkeys(task.ngrams, "")
        )
        excused = shared | _same_column_docs(task, documented)
        hits: dict[str, str] = {}
        for gram, text in texts.items():
            if gram in index and gram not in excused and index[gram] not in hits:
                hits[index[gram]] = text
        for other, text in sorted(hits.items()):
            shown = f" {text!r}" if text else ""
            out.append(Violation("ngram-overlap", task.instance_id, f"shares the {NGRAM}-gram{shown} with {other}"))
    return out


def lint(
    pins: Sequence[Pin],
    tasks: Sequence[TaskRecord | TaskDigest],
    exclusions: Exclusions,
    *,
    splits: Mapping[str, str] | None = None,
) -> list[Violation]:
    """All violations. ``splits`` (pin id -> reserved split) comes from the ledger; without it, from the tasks."""
    digests = [t if isinstance(t, TaskDigest) else digest(t) for t in tasks]
    known = dict(splits) if splits is not None else {d.pin: d.split for d in digests}
    out = check_exclusions(pins, exclusions)
    if splits is not None:
        out += check_assigned(pins, known)
    out += check_task_splits(digests, known)
    out += check_groups(pins, known)
    out += check_model_files(pins, known)
    train = [t for t in tasks if t.split == "train"]
    out += check_ngrams(train, [d for d in digests if d.split in EVAL])
    return out


def _folder_tasks(home: Path) -> tuple[list[TaskRecord], list[Violation]]:
    """Train and dev records as stored, with a violation for any record outside its split's folder."""
    records, out = [], []
    for split in ("train", "dev"):
        folder = home / "tasks" / split
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            record = task_from_dict(json.loads(path.read_text(encoding="utf-8")), where=str(path))
            if record.split != split:
                out.append(
                    Violation("split-mismatch", record.instance_id, f"says {record.split} but sits in tasks/{split}/")
                )
            records.append(record)
    return records, out


def lint_project(
    pins_dir: Path, home: Path, exclusions: Exclusions | None = None, *, sealed: bool = True
) -> list[Violation]:
    """Lint what is on disk: every pin, the reservation ledger, train/dev tasks, sealed test digests.

    ``sealed=False`` (a home that grew train/dev pins and never minted the test split) leaves the sealed
    digests out, so train is checked against dev only; the caller must say so."""
    from dbt_harvest.corpora.ledger import SplitLedger
    from dbt_harvest.corpora.sealed import sealed_digests

    pins = list_pins(pins_dir)
    ledger = SplitLedger.load(pins_dir)
    splits = {p.id: a.split for p in pins if (a := ledger.assignment(p)) is not None}
    records, out = _folder_tasks(home)
    tasks: list[TaskRecord | TaskDigest] = [*records, *(sealed_digests(home, pins_dir) if sealed else [])]
    return out + lint(pins, tasks, exclusions or load_exclusions(), splits=splits)

"""`harvest dataset build`: task records -> a Hub-ready dataset folder, all or nothing.

Order: lint (refuse on any violation) -> read train/dev through the firewall's loader -> drop repositories
without a redistributable license (public builds) -> refuse an empty split -> in a temp folder beside the
target: gold files copied and hash-verified, parquet shards per split, the DatasetDict saved to disk,
the card, and a manifest hashing every file -> one rename. A failure at any step leaves no folder.

Folder layout::

    README.md                       dataset card (YAML: configs, license, task_categories, tags)
    data/<split>-<fp>-00000-of-0000N.parquet
    gold/<sha256>.duckdb            gold for the rows of the published splits
    dataset_dict/                   DatasetDict.save_to_disk (not uploaded)
    build.json                      manifest: facts for the card, per-split gold, sha256 of every file

``<fp>`` is a fingerprint of the split's rows (:func:`rows_fingerprint`), and the card's ``configs``
name ``data/<split>-<fp>-*``. The ``datasets`` library caches a loaded folder under the folder's name
and its data-file patterns, not its content, so without it ``load_dataset(folder)`` served the rows of
an older build, or of another folder with the same name, from the user's cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from dbt_harvest.core import atomic
from dbt_harvest.core.licenses import REDISTRIBUTABLE
from dbt_harvest.core.task_record import (
    KINDS,
    LOCAL_TESTS_BUCKETS,
    ORIGINS,
    SOURCES,
    STATEMENTS,
    TaskRecord,
    local_tests_bucket,
    statement_of,
)
from dbt_harvest.corpora.card import CardFacts, RepoProvenance, render
from dbt_harvest.corpora.dedupe import distinct
from dbt_harvest.corpora.errors import DatasetBuildError, LintError
from dbt_harvest.corpora.exclusions import Exclusions, load_exclusions
from dbt_harvest.corpora.features import task_features, to_row
from dbt_harvest.corpora.lint import lint_project
from dbt_harvest.corpora.sealed import sealed_count
from dbt_harvest.corpora.store import load_tasks
from dbt_harvest.harvester.gold import matches

MANIFEST = "build.json"
BUILDABLE = ("train", "dev")
SHARD_ROWS = 5000


@dataclass(frozen=True)
class BuildResult:
    out: Path
    splits: dict[str, int]
    gold_files: tuple[str, ...]
    left_out_repos: int
    left_out_tasks: int
    files: dict[str, str]  # relative path -> sha256


def _select(records: dict[str, list[TaskRecord]], public: bool) -> tuple[dict[str, list[TaskRecord]], int, int]:
    if not public:
        return records, 0, 0
    kept: dict[str, list[TaskRecord]] = {}
    dropped_repos: set[str] = set()
    dropped = 0
    for split, items in records.items():
        kept[split] = [r for r in items if r.license in REDISTRIBUTABLE]
        for r in items:
            if r.license not in REDISTRIBUTABLE:
                dropped_repos.add(r.repo)
                dropped += 1
    return kept, len(dropped_repos), dropped


def _known_failures(records: dict[str, list[TaskRecord]], pins: Path) -> dict[str, int]:
    """Split -> tasks whose project has dbt tests that fail on the original (``baseline_tests``: never run)."""
    from dbt_harvest.core.pin import pin_path, read_pin

    failing = {
        p for p in {r.pin for rows in records.values() for r in rows} if read_pin(pin_path(p, pins)).known_failing_tests
    }
    return {s: sum(1 for r in rows if r.pin in failing) for s, rows in records.items()}


def _compat_edits(records: dict[str, list[TaskRecord]], pins: Path) -> dict[str, int]:
    """Split -> tasks whose compat patch edits files of the repository (``compat_edits``, declared)."""
    from dbt_harvest.core.pin import pin_path, read_pin

    edited = {p for p in {r.pin for rows in records.values() for r in rows} if read_pin(pin_path(p, pins)).compat_edits}
    return {s: sum(1 for r in rows if r.pin in edited) for s, rows in records.items()}


def _provenance(records: dict[str, list[TaskRecord]], home: Path, pins: Path) -> tuple[RepoProvenance, ...]:
    from dbt_harvest.core.pin import pin_path, read_pin

    counts: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], TaskRecord] = {}
    for split, items in records.items():
        for r in items:
            counts[(r.pin, split)] += 1
            first.setdefault((r.pin, split), r)
    rows = []
    for (pin_id, split), n in sorted(counts.items()):
        r = first[(pin_id, split)]
        url = read_pin(pin_path(pin_id, pins)).url
        rows.append(RepoProvenance(repo=r.repo, url=url, commit=r.base_commit, license=r.license, split=split, tasks=n))
    return tuple(rows)


def _copy_gold(shas: Sequence[str], home: Path, dest: Path) -> None:
    for sha in shas:
        src = home / "gold" / f"{sha}.duckdb"
        if not src.is_file():
            raise DatasetBuildError(f"gold {sha[:12]} is missing from {src.parent}; re-run `harvest add` for its pin")
        target = dest / "gold" / f"{sha}.duckdb"
        atomic.install_file(src, target)
        if not matches(target, sha):
            raise DatasetBuildError(
                f"gold {sha[:12]} in {src.parent} is corrupted (neither its bytes nor its tables "
                f"hash to its name; its bytes hash to {atomic.sha256_file(target)[:12]})"
            )


def rows_fingerprint(rows: Sequence[dict]) -> str:
    """12 hex digits of sha256 over the rows in order: what a split's data file names carry."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:12]


def _rows(records: list[TaskRecord], pins: Path) -> list[dict]:
    """Self-contained rows: each record with its pin's rebuild facts and its compat patch's text."""
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.harvester.workspace import augmentation_text, compat_patch_text, port_patch_text, synthesis_text

    cache: dict[str, tuple] = {}
    rows = []
    for r in records:
        if r.pin not in cache:
            pin = read_pin(pin_path(r.pin, pins))
            texts = (compat_patch_text(pin, pins), augmentation_text(pin, pins), synthesis_text(pin, pins))
            cache[r.pin] = (pin, *texts, port_patch_text(pin, pins))
        pin, compat, augmentation, synthesis, port = cache[r.pin]
        try:
            rows.append(to_row(r, pin, compat, augmentation, synthesis, port))
        except ValueError as exc:
            raise DatasetBuildError(f"{exc}; re-run `harvest mint` for its pin") from None
    return rows


def _write_split(records: list[TaskRecord], split: str, dest: Path, shard_rows: int, pins: Path):
    """The split's Dataset and its rows' fingerprint; parquet shards ``data/<split>-<fp>-i-of-n``."""
    from datasets import Dataset

    rows = _rows(records, pins)
    fingerprint = rows_fingerprint(rows)
    ds = Dataset.from_list(rows, features=task_features())
    n = max(1, math.ceil(len(ds) / shard_rows))
    for i in range(n):
        shard = ds.shard(num_shards=n, index=i, contiguous=True)
        shard.to_parquet(str(dest / "data" / f"{split}-{fingerprint}-{i:05d}-of-{n:05d}.parquet"))
    return ds, fingerprint


def _hash_tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): atomic.sha256_file(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def build_dataset(
    out: Path,
    *,
    home: Path,
    pins: Path,
    splits: Sequence[str] = BUILDABLE,
    public: bool = True,
    exclusions: Exclusions | None = None,
    shard_rows: int = SHARD_ROWS,
    overwrite: bool = False,
    since: str | None = None,
    min_local_tests: int = 0,
    statement: str = "full",
    data_origin: str = "",
) -> BuildResult:
    """Build the folder at ``out`` (see the module docstring); raise before writing anything on bad input.
    ``statement``: which statement each row's ``problem_statement`` holds (``core.task_record.statement_of``:
    ``documentation`` gives completions their documentation alone); ``documentation_statement`` holds the
    documentation-only one either way. ``data_origin``: keep only tasks whose data has that origin
    (``core.task_record.ORIGINS``; "" keeps all)."""
    if statement not in STATEMENTS:
        raise DatasetBuildError(f"--statement {statement!r} is not one of {', '.join(STATEMENTS)}")
    if data_origin and data_origin not in ORIGINS:
        raise DatasetBuildError(f"--data-origin {data_origin!r} is not one of {', '.join(ORIGINS)}")
    wanted = _wanted_splits(splits)
    if out.exists() and not overwrite and (not out.is_dir() or any(out.iterdir())):
        raise DatasetBuildError(f"{out} already exists; choose another --out or pass --overwrite")
    exclusions = exclusions or load_exclusions()
    _refuse_contamination(pins, home, exclusions)
    records, duplicates = _load_records(wanted, home, pins, min_local_tests, since)
    if data_origin:
        records = {s: [r for r in rs if r.origin == data_origin] for s, rs in records.items()}
    if statement != "full":
        records = {
            s: [replace(r, problem_statement=statement_of(r, statement)) for r in rs] for s, rs in records.items()
        }
    kept, left_repos, left_tasks = _select(records, public)
    _refuse_empty_splits(wanted, records, kept)
    gold_by_split = {s: sorted({r.gold_sha256 for r in kept[s]}) for s in wanted}
    all_gold = sorted({g for shas in gold_by_split.values() for g in shas})
    facts = CardFacts(
        title=out.name,
        generator_versions=tuple(sorted({r.generator_version for s in wanted for r in kept[s]})),
        tool_versions=_common_versions([r for s in wanted for r in kept[s]]),
        splits={s: len(kept[s]) for s in wanted},
        provenance=_provenance(kept, home, pins),
        left_out_repos=left_repos,
        left_out_tasks=left_tasks,
        public=public,
        exclusions_source=dict(exclusions.source),
        exclusions_counts={
            "project_names": len(exclusions.project_names),
            "domain_packages": len(exclusions.domain_packages),
            "utility_packages": len(exclusions.utility_packages),
        },
        sealed_test_tasks=sealed_count(home, pins),
        duplicate_tasks=duplicates,
        min_local_tests=min_local_tests,
        statement=statement,
        data_origin=data_origin,
        since=since or "",
        **_split_counts(kept, wanted, pins),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        facts, files = _write_folder(
            tmp, facts, kept, wanted, gold_by_split, all_gold, home=home, pins=pins, shard_rows=shard_rows
        )
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BuildResult(out, facts.splits, tuple(all_gold), left_repos, left_tasks, files)


def _wanted_splits(splits: Sequence[str]) -> tuple[str, ...]:
    """The requested splits, each once, in order (DatasetBuildError for test, an unknown split, or none)."""
    wanted = tuple(dict.fromkeys(splits))
    for split in wanted:
        if split == "test":
            raise DatasetBuildError(
                "the test split is sealed: it is read only by the audit and never built into a dataset"
            )
        if split not in BUILDABLE:
            raise DatasetBuildError(f"unknown split {split!r}; choose from {', '.join(BUILDABLE)}")
    if not wanted:
        raise DatasetBuildError("no split requested")
    return wanted


def _refuse_contamination(pins: Path, home: Path, exclusions: Exclusions) -> None:
    """LintError naming the first contamination violation, if `harvest lint` finds any."""
    violations = lint_project(pins, home, exclusions)
    if violations:
        raise LintError(
            f"{len(violations)} contamination violation(s), first: {violations[0].line()}; run `harvest lint`"
        )


def _load_records(
    wanted: Sequence[str], home: Path, pins: Path, min_local_tests: int, since: str | None
) -> tuple[dict[str, list[TaskRecord]], int]:
    """(split -> records the build keeps, duplicate tasks dropped): read through the firewall's loader, forks'
    repeated mutations dropped, then the ``--min-local-tests`` and ``--since`` filters; DatasetBuildError
    when no split has a task left."""
    loaded = {s: distinct(load_tasks(s, home, pins, purpose="dataset")) for s in wanted}
    records = {s: rows for s, (rows, _) in loaded.items()}
    if min_local_tests:  # tasks whose local checks are more than "it builds"
        records = {s: [r for r in rows if r.local_tests >= min_local_tests] for s, rows in records.items()}
    if since is not None:  # the view after a model's training cut-off: real fixes made on or after the date
        records = {
            s: [r for r in rows if r.source == "history" and r.fix_date[: len(since)] >= since]
            for s, rows in records.items()
        }
    duplicates = sum(n for _, n in loaded.values())
    if not any(records.values()):
        if min_local_tests:
            raise DatasetBuildError(
                f"no task of {', '.join(wanted)} has {min_local_tests} or more covering dbt tests "
                "(local_tests); give a lower --min-local-tests"
            )
        if since is not None:
            raise DatasetBuildError(
                f"no history task of {', '.join(wanted)} has a fix made on or after {since}; mine "
                "newer fixes (`harvest mine`) or give an earlier --since"
            )
        raise DatasetBuildError(
            f"no tasks in {home / 'tasks'} for {', '.join(wanted)}; mint tasks first (`harvest mint`)"
        )
    return records, duplicates


def _refuse_empty_splits(
    wanted: Sequence[str], records: dict[str, list[TaskRecord]], kept: dict[str, list[TaskRecord]]
) -> None:
    """DatasetBuildError for the first requested split left without tasks, saying why and what to do."""
    for split in wanted:
        if kept[split]:
            continue
        if records[split]:
            raise DatasetBuildError(
                f"split {split!r} would be empty: its {len(records[split])} task(s) come from repositories without a "
                "redistributable license (no LICENSE file we recognise); build a private dataset with --private "
                "(published only with --private), or add and mint licensed repositories"
            )
        others = [s for s in wanted if s != split and kept[s]]
        hint = f"build only {', '.join(others)} with --split" if others else "mint tasks for it first (`harvest mint`)"
        raise DatasetBuildError(f"split {split!r} has no tasks; {hint}")


class _SplitCounts(TypedDict):
    """The card's per-split task counts (``CardFacts`` fields of the same names)."""

    local_tests_zero: dict[str, int]
    local_tests_hist: dict[str, dict[str, int]]
    augmented: dict[str, int]
    known_failures: dict[str, int]
    compat_edits: dict[str, int]
    kinds: dict[str, dict[str, int]]
    sources: dict[str, dict[str, int]]
    origins: dict[str, dict[str, int]]
    dialects: dict[str, dict[str, int]]


def _split_counts(kept: dict[str, list[TaskRecord]], wanted: Sequence[str], pins: Path) -> _SplitCounts:
    """Per split: tasks without covering tests, the local_tests histogram, augmented tasks, tasks of projects
    with known failing tests or an editing compat patch, tasks per kind and per source."""
    return {
        "local_tests_zero": {s: sum(1 for r in kept[s] if r.local_tests == 0) for s in wanted},
        "local_tests_hist": {
            s: {
                b: n
                for b in LOCAL_TESTS_BUCKETS
                if (n := sum(1 for r in kept[s] if local_tests_bucket(r.local_tests) == b))
            }
            for s in wanted
        },
        "augmented": {s: sum(1 for r in kept[s] if "+aug-" in r.pin) for s in wanted},
        "known_failures": _known_failures(kept, pins),
        "compat_edits": _compat_edits(kept, pins),
        "kinds": {s: {k: n for k in KINDS if (n := sum(1 for r in kept[s] if r.kind == k))} for s in wanted},
        "sources": {s: {k: n for k in SOURCES if (n := sum(1 for r in kept[s] if r.source == k))} for s in wanted},
        "origins": {s: {k: n for k in ORIGINS if (n := sum(1 for r in kept[s] if r.origin == k))} for s in wanted},
        "dialects": {s: dict(sorted(Counter(r.sql_dialect for r in kept[s]).items())) for s in wanted},
    }


def _write_folder(
    tmp: Path,
    facts: CardFacts,
    kept: dict[str, list[TaskRecord]],
    wanted: Sequence[str],
    gold_by_split: dict[str, list[str]],
    all_gold: Sequence[str],
    *,
    home: Path,
    pins: Path,
    shard_rows: int,
) -> tuple[CardFacts, dict[str, str]]:
    """Write the whole dataset into ``tmp``: gold, corpus reports, parquet shards, the saved DatasetDict, the
    card and the manifest. Returns the card's facts completed (reports, fingerprints) and the files' sha256."""
    from datasets import DatasetDict

    _copy_gold(all_gold, home, tmp)
    facts = replace(facts, corpus_report=_corpus_report(kept, pins, tmp))
    (tmp / "data").mkdir()
    written = {s: _write_split(kept[s], s, tmp, shard_rows, pins) for s in wanted}
    facts = replace(facts, fingerprints={s: fp for s, (_, fp) in written.items()})
    dd = DatasetDict({s: ds for s, (ds, _) in written.items()})
    dd.save_to_disk(str(tmp / "dataset_dict"))
    atomic.write_text(tmp / "README.md", render(facts, wanted))
    files = _hash_tree(tmp)
    manifest = {
        "format": 1,
        "facts": facts.to_dict(),
        "gold": gold_by_split,
        "files": files,
    }
    atomic.write_text(tmp / MANIFEST, json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    return facts, files


def _corpus_report(kept: dict[str, list[TaskRecord]], pins: Path, folder: Path) -> dict[str, str]:
    """Per split, the corpus report (markdown) of the repositories with rows in it; each split's chart
    beside the card (a card published for one split shows that split's report alone)."""
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.corpora.card import report_chart
    from dbt_harvest.corpora.ledger import SplitLedger
    from dbt_harvest.corpora.report import build_report, chart, markdown

    ledger = SplitLedger.load(pins)
    out: dict[str, str] = {}
    for split, rows in kept.items():
        chosen = sorted({r.pin for r in rows})
        if not chosen:
            continue
        report = build_report([read_pin(pin_path(p, pins)) for p in chosen], ledger)
        chart(report, folder / report_chart(split))
        out[split] = markdown(report)
    return out


def _common_versions(records: Sequence[TaskRecord]) -> dict[str, str]:
    seen: dict[str, set[str]] = defaultdict(set)
    for r in records:
        for k, v in r.versions.items():
            seen[k].add(v)
    return {k: " / ".join(sorted(v)) for k, v in sorted(seen.items())}


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished folder to ``out``; an old folder (overwrite) is moved aside first, then removed."""
    if out.exists():
        aside = out.parent / f".{out.name}.old-{tmp.name.rsplit('-', 1)[-1]}"
        out.rename(aside)
        try:
            tmp.rename(out)
        except BaseException:
            aside.rename(out)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    else:
        tmp.rename(out)


def read_manifest(folder: Path) -> dict:
    """The build manifest of a dataset folder, with every listed file re-hashed (DatasetBuildError if not)."""
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        CardFacts.from_dict(manifest["facts"])
        manifest["gold"]
    except FileNotFoundError:
        raise DatasetBuildError(
            f"{folder} is not a built dataset (no {MANIFEST}); run `harvest dataset build`"
        ) from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DatasetBuildError(f"{path}: malformed build manifest ({exc})") from None
    for rel, sha in sorted(files.items()):
        target = folder / rel
        if not target.is_file():
            raise DatasetBuildError(f"{folder}: {rel} is missing; rebuild the dataset")
        if atomic.sha256_file(target) != sha:
            raise DatasetBuildError(f"{folder}: {rel} changed since the build (sha256 differs); rebuild the dataset")
    return manifest

"""The dataset card: README.md with Hub YAML front matter, provenance, and a non-contamination statement.

The metadata is huggingface_hub's ``DatasetCardData`` (license, pretty name, task categories, tags, size
category, one ``configs`` data-file entry per split) and the file is a ``DatasetCard``: the library writes
the YAML front matter, and the Hub validates it on upload (``tests/corpora/test_card.py`` reads it back).

Rendered from :class:`CardFacts` (stored in the build manifest), so `harvest publish` can render the card
again for exactly the split it uploads: a Hub repo never lists a split whose files it does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from dbt_harvest.corpora.features import COLUMNS, SWE_BENCH_MAPPING

if TYPE_CHECKING:
    from huggingface_hub import DatasetCardData

TAGS = ("dbt", "sql", "duckdb", "data-engineering", "code-repair", "agents", "swe-bench")


@dataclass(frozen=True)
class RepoProvenance:
    repo: str
    url: str
    commit: str
    license: str
    split: str
    tasks: int


@dataclass(frozen=True)
class CardFacts:
    title: str
    generator_versions: tuple[str, ...]
    tool_versions: dict[str, str]
    splits: dict[str, int]  # split -> rows
    provenance: tuple[RepoProvenance, ...]
    left_out_repos: int  # repositories without a redistributable license (public builds)
    left_out_tasks: int
    public: bool
    exclusions_source: dict[str, Any]
    exclusions_counts: dict[str, int]
    sealed_test_tasks: int
    duplicate_tasks: int = 0  # the same mutation minted from two pins of one split group (forks)
    fingerprints: dict[str, str] = field(default_factory=dict)  # split -> rows fingerprint in its file names
    # split -> tasks whose mutated lineage no dbt test covers (local_tests = 0)
    local_tests_zero: dict[str, int] | None = None
    # split -> the corpus report (corpora.report) of that split's repositories, markdown; its chart is
    # corpus_report-<split>.png. Per split, so that a card published for one split reports that split only.
    corpus_report: dict[str, str] = field(default_factory=dict)
    # split -> tasks whose seeds carry distinguishing rows the harvester added (augmented pins)
    augmented: dict[str, int] | None = None
    # split -> kind -> tasks (repair, completion); None for a build made before completions existed
    kinds: dict[str, dict[str, int]] | None = None
    # split -> local_tests bucket (core.task_record.LOCAL_TESTS_BUCKETS) -> tasks; None for older builds
    local_tests_hist: dict[str, dict[str, int]] | None = None
    min_local_tests: int = 0  # `--min-local-tests N`: tasks with fewer covering dbt tests were left out
    statement: str = "full"  # `--statement`: full (a completion's documentation and facts) or documentation
    # split -> tasks of projects with dbt tests that fail on the original project (baseline_tests); None: older
    known_failures: dict[str, int] | None = None
    # split -> tasks whose compat patch edits files of the repository (declared compat_edits); None: older builds
    compat_edits: dict[str, int] | None = None
    # split -> source -> tasks (mutation, history); None for a build made before history tasks existed
    sources: dict[str, dict[str, int]] | None = None
    since: str = ""  # `--since DATE`: only history tasks whose fix is that recent
    # split -> data origin (repository, augmented, synthesized) -> tasks; None for a build made before it was counted
    origins: dict[str, dict[str, int]] | None = None
    data_origin: str = ""  # `--data-origin`: only tasks of that origin were kept ("" = every origin)
    # split -> dialect (native, ported:<dialect>) -> tasks; None for a build made before it was counted
    dialects: dict[str, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["provenance"] = [asdict(p) for p in self.provenance]
        data["generator_versions"] = list(self.generator_versions)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CardFacts:
        report = data.get("corpus_report")
        return cls(
            **{
                **data,
                # a build made before the report was kept per split has one text for all of them: not shown
                "corpus_report": dict(report) if isinstance(report, dict) else {},
                "generator_versions": tuple(data["generator_versions"]),
                "provenance": tuple(RepoProvenance(**p) for p in data["provenance"]),
            }
        )


def report_chart(split: str) -> str:
    """The file name of one split's corpus report chart, beside the card."""
    return f"corpus_report-{split}.png"


class HubLicense(TypedDict, total=False):
    """The card's YAML license keys (``license_name`` only with ``license: other``)."""

    license: str
    license_name: str


def hub_license(spdx_ids: Sequence[str]) -> HubLicense:
    """YAML license keys: the one license's Hub id, or ``other`` with a name when repositories differ."""
    ids = sorted(set(spdx_ids))
    if len(ids) == 1:
        return {"license": ids[0].lower()}
    return {"license": "other", "license_name": "per-repository (see Provenance)"}


def _size_category(n: int) -> str:
    return "n<1K" if n < 1000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "100K<n<1M"


def data_files(facts: CardFacts, split: str) -> dict[str, str]:
    """The card's ``configs`` entry of one split: its data files, by the fingerprint they carry."""
    fingerprint = facts.fingerprints.get(split)
    return {"split": split, "path": f"data/{split}-{fingerprint}-*" if fingerprint else f"data/{split}-*"}


def card_data(
    facts: CardFacts, splits: Sequence[str], other_configs: Mapping[str, str] | None = None
) -> DatasetCardData:
    """The card's metadata as huggingface_hub's ``DatasetCardData``; ``other_configs`` (split -> data-file
    path) lists splits of another build that the Hub repository already holds, so that publishing one split
    keeps loading the others."""
    from huggingface_hub import DatasetCardData

    rows = [p for p in facts.provenance if p.split in splits]
    files = [data_files(facts, s) for s in splits]
    files += [{"split": s, "path": path} for s, path in sorted((other_configs or {}).items())]
    return DatasetCardData(
        **hub_license([p.license for p in rows]),
        pretty_name=facts.title,
        task_categories=["text-generation"],
        tags=list(TAGS),
        size_categories=[_size_category(sum(facts.splits[s] for s in splits))],
        configs=[{"config_name": "default", "data_files": files}],
    )


def _repo_cell(p: RepoProvenance) -> str:
    """A link for a public URL; a repository known only by name (``local://``) is shown, not linked."""
    return f"[{p.repo}]({p.url})" if p.url.startswith(("https://", "http://")) else f"`{p.repo}`"


def render(facts: CardFacts, splits: Sequence[str], other_configs: Mapping[str, str] | None = None) -> str:
    """The README.md for a folder holding ``splits`` (a subset of the built ones), plus ``other_configs``:
    splits a Hub repository holds from another build (listed, not described)."""
    from huggingface_hub import DatasetCard

    data = card_data(facts, splits, other_configs)
    lines = [
        *_intro_lines(facts),
        *_splits_lines(facts, splits, other_configs),
        *_kinds_lines(facts, splits),
        *_history_lines(facts, splits),
        *_local_checks_lines(facts, splits),
        *_compat_lines(facts, splits),
        *_augmented_lines(facts, splits),
        *_columns_lines(),
        *_provenance_lines([p for p in facts.provenance if p.split in splits]),
        *_contamination_lines(facts),
        *_corpus_report_lines(facts, splits),
        *_versions_lines(facts),
    ]
    return str(DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)))


def _of_split(facts: CardFacts, splits: Sequence[str], counts: Mapping[str, int] | None) -> str:
    """``train 3 of 1200, dev 0 of 30``: a count per split out of the split's rows."""
    return ", ".join(f"{s} {(counts or {}).get(s, 0)} of {facts.splits[s]}" for s in splits)


def _per_split_breakdown(
    facts: CardFacts, splits: Sequence[str], table: Mapping[str, Mapping[str, int]] | None, default: str
) -> str:
    """``train 1000 completion + 200 repair, dev 30 repair``: tasks per key and split (a build that did
    not count them has every row under ``default``)."""
    return ", ".join(
        f"{s} "
        + " + ".join(f"{n} {k}" for k, n in sorted(((table or {}).get(s) or {default: facts.splits[s]}).items()))
        for s in splits
    )


def _intro_lines(facts: CardFacts) -> list[str]:
    """The title and what a row is."""
    return [
        f"# {facts.title}",
        "",
        "Repair tasks for data-engineering agents, minted from real public dbt repositories by",
        f"dbt-harvest (generator {', '.join(facts.generator_versions)}). Each row is one real",
        "project at an exact commit with one model file broken: the broken project builds, and in most tasks every",
        "dbt test passes; only a hidden comparison with the gold tables fails. The true repair scores 1; a",
        "plausible wrong repair that passes the local checks scores 0.",
        "",
    ]


def _splits_lines(facts: CardFacts, splits: Sequence[str], other_configs: Mapping[str, str] | None) -> list[str]:
    """The rows per split (and the splits another build published), and how splits are kept apart."""
    return [
        "## Splits",
        "",
        "| split | rows |",
        "|---|---|",
        *[f"| {s} | {facts.splits[s]} |" for s in dict.fromkeys(splits)],  # a split named twice is one row
        *[
            f"| {s} | published from another build (see this repository's history) |"
            for s in sorted(other_configs or {})
        ],
        "",
        "Splits are repository-disjoint: repositories that share history, files, or a package family",
        "(a package and its `_source` package) are in one split group, and groups were reserved to splits",
        "before any task was minted (hash-committed ledger in the generator's `pins/` folder).",
        "",
    ]


#: what the card says of the completions' statements, per `harvest dataset build --statement`
STATEMENT_WORDS = {
    "full": "A completion's `problem_statement` gives its documentation and then facts about the expected table, "
    "read from gold (row count, grain, column types and nulls, example rows at the boundary cases); "
    "`documentation_statement` holds the documentation alone (Spider 2.0-DBT's shape).",
    "documentation": "This build gives each completion its documentation alone (`--statement documentation`, "
    "Spider 2.0-DBT's shape): `problem_statement` and `documentation_statement` are the same text.",
}


def _kinds_lines(facts: CardFacts, splits: Sequence[str]) -> list[str]:
    """Repair and completion tasks: what each is, and how many per split."""
    return [
        "## Task kinds",
        "",
        "A `repair` task plants one edit in a model (`broken_patch`) for the agent to find and undo. A `completion`",
        "task removes a documented model's SQL file (`broken_patch` deletes it; `patch` writes it back): the agent",
        "writes the model from its documentation (`problem_statement`: description, columns, tests, the models it",
        "may read), Spider 2.0-DBT's own shape. Both are graded the same way against gold. Tasks per kind and split: "
        + _per_split_breakdown(facts, splits, facts.kinds, "repair")
        + ".",
        'Keep one kind with `ds.filter(lambda row: row["kind"] == "completion")`.',
        "",
        STATEMENT_WORDS.get(facts.statement, STATEMENT_WORDS["full"]),
        "",
    ]


def _history_lines(facts: CardFacts, splits: Sequence[str]) -> list[str]:
    """Tasks that undo a real fix from a repository's history, per split (and the ``--since`` cut)."""
    since = (
        f" This build keeps only fixes made on or after {facts.since} (`--since`): tasks newer than a model's "
        "training cut-off."
        if facts.since
        else ""
    )
    return [
        "## Real fixes from history",
        "",
        "A repair task whose `source` is `history` undoes a fix the repository's own engineers made: `base_commit` is",
        "the fix's parent with its data, built with the fix's model files (`fix_files` of `fix_commit`) applied, and",
        "`broken_patch` puts the parent's model back. `fix_commit`, `fix_date`, `fix_subject` and `fix_url` are",
        "provenance (the statement describes the symptom, never the commit message). Tasks per source and split: "
        + _per_split_breakdown(facts, splits, facts.sources, "mutation")
        + "."
        + since,
        'Keep one source with `ds.filter(lambda row: row["source"] == "history")`.',
        "",
    ]


def _local_checks_lines(facts: CardFacts, splits: Sequence[str]) -> list[str]:
    """What the local checks prove: tasks without covering tests, the coverage table, known failing tests."""
    known_failures = (
        []
        if facts.known_failures is None
        else [
            "",
            "Some projects carry dbt tests that fail on the original project (`baseline_tests` with status fail or "
            "error, SWE-bench's FAIL_TO_FAIL): every build leaves them out, so they are no local check. Tasks of such "
            "projects, per split: " + _of_split(facts, splits, facts.known_failures) + ".",
        ]
    )
    return [
        "## Local checks",
        "",
        "`local_tests` counts the dbt tests over the broken model and its descendants. Where it is 0 the",
        "local checks only prove that the project builds: an agent gets no test signal for that bug.",
        "Tasks with `local_tests` = 0, per split: " + _of_split(facts, splits, facts.local_tests_zero) + ".",
        'Keep only tested tasks with `ds.filter(lambda row: row["local_tests"] > 0)`.',
        *_local_tests_table(facts, splits),
        *known_failures,
        "",
    ]


def _compat_lines(facts: CardFacts, splits: Sequence[str]) -> list[str]:
    """Tasks whose compat patch edits files of the repository (none for a build made before they were counted)."""
    if facts.compat_edits is None:
        return []
    return [
        "## Compat patches",
        "",
        "`compat_patch` makes a project build on DuckDB. Most add one new file (a `duckdb__` macro); a patch that "
        "edits files of the repository lists them in `compat_edits` (declared when the pin was made: "
        "configuration, seeds, YAML or macros, never model SQL, which the tasks change and grade). Tasks whose "
        "patch edits files, per split: " + _of_split(facts, splits, facts.compat_edits) + ".",
        "",
    ]


def _augmented_lines(facts: CardFacts, splits: Sequence[str]) -> list[str]:
    """Tasks whose seeds carry rows the harvester added, per split."""
    return [
        "## Augmented data",
        "",
        "Where a project's own seeds could not tell a bug from the original, the harvester added the fewest",
        "seed rows that can (`augmentation_patch`, applied before every build of the task; the original project",
        "builds and passes all its dbt tests on them). Tasks with `augmented` = true, per split: "
        + _of_split(facts, splits, facts.augmented)
        + ".",
        'Keep only upstream data with `ds.filter(lambda row: not row["augmented"])`.',
        "",
        "## Data origin",
        "",
        "Where a repository ships no data for its sources, the harvester synthesized it from the project's own",
        "contract (its sources' YAML, its dbt tests and how its SQL uses each column; `synthesis_patch`, applied",
        "before every build; the project's own tests pass on it). `data_origin` says which each task has, per split: "
        + _per_split_breakdown(facts, splits, facts.origins, "repository")
        + "."
        + (f" This build kept `{facts.data_origin}` tasks only (`--data-origin`)." if facts.data_origin else ""),
        "",
        "Where a project was written for another warehouse, its models' SQL was ported to DuckDB with sqlglot",
        "(`port_patch`, the Jinja kept; statements never mention it). `dialect` says which, per split: "
        + _per_split_breakdown(facts, splits, facts.dialects, "native")
        + ".",
        "",
    ]


def _columns_lines() -> list[str]:
    """The setup step, every column's meaning, and how the columns read as SWE-bench's."""
    return [
        "## Columns",
        "",
        "`patch` is the gold repair, as in SWE-bench; the bug is `broken_patch`. Every row is self-contained:",
        "it names the repository (`origin_url`, `base_commit`, its git `tree`), the dbt packages at exact commits,",
        "the compat patch, the clock and the database file, so `harvest tasks materialize DATASET INSTANCE_ID OUT/`",
        "rebuilds the task on a fresh machine (checking the tree id and every sha256). The setup step (`setup`):",
        "export `base_commit` without history, vendor `packages` into `<project_dir>/dbt_packages`, apply",
        "`compat_patch`, then `broken_patch`. A model's answer is graded by building the repaired project with",
        "dbt-duckdb at `clock` and comparing `condition_tabs` with the gold file `gold_file` (Spider 2.0-DBT's",
        "`duckdb_match` with `condition_cols` and `ignore_orders`; `harvest score --task DATASET:INSTANCE_ID`).",
        "",
        "| column | meaning |",
        "|---|---|",
        *[f"| `{name}` | {meaning} |" for name, meaning in COLUMNS.items()],
        "",
        "### Reading it as SWE-bench / SWE-smith",
        "",
        "| SWE-bench / SWE-smith | here |",
        "|---|---|",
        *[f"| `{name}` | {meaning} |" for name, meaning in SWE_BENCH_MAPPING.items()],
        "",
        "Gold DuckDB files are under `gold/`, named by their sha256; verify the hash before scoring.",
        "",
    ]


def _provenance_lines(rows: Sequence[RepoProvenance]) -> list[str]:
    """One table row per repository and split: where its tasks come from, under which license."""
    return [
        "## Provenance",
        "",
        "| repository | commit | license | split | tasks |",
        "|---|---|---|---|---|",
        *[f"| {_repo_cell(p)} | `{p.commit}` | {p.license} | {p.split} | {p.tasks} |" for p in rows],
        "",
        "Each task's files stay under the license of its source repository (column `license`).",
        "",
    ]


def _contamination_lines(facts: CardFacts) -> list[str]:
    """The non-contamination statement: benchmark exclusions, disjoint splits, sealed test, duplicates, licenses."""
    ex = facts.exclusions_counts
    src = facts.exclusions_source
    licenses = (
        f"- Licenses: {facts.left_out_repos} repositories ({facts.left_out_tasks} tasks) whose license does not "
        "permit redistribution (or could not be determined) were left out of this public build."
        if facts.public
        else "- Licenses: private build; repositories without a redistributable license are included. Do not make public."
    )
    return [
        "## Non-contamination statement",
        "",
        f"- Benchmark: every repository was checked against the Spider 2.0-DBT exclusion list "
        f"({src.get('repo', '?')} at `{src.get('commit', '?')}`, {src.get('commit_date', '?')}): "
        f"{ex.get('project_names', 0)} benchmark dbt project names, {ex.get('domain_packages', 0)} domain packages "
        f"(a repository that is one, or depends on one, is excluded) and {ex.get('utility_packages', 0)} utility "
        "packages (depending on them is allowed; the utility repositories themselves are excluded).",
        "- Splits: no split group on two sides, no identical model file (content hash) on two sides, no",
        "  training problem statement equal to an evaluation one, and no word 13-gram of task-specific words (the",
        "  statement template's fixed phrases cut out) shared between them (lint run before this build: 0 violations).",
        f"- Test split: {facts.sealed_test_tasks} test tasks are sealed and are not part of this dataset.",
        "- Withheld from every row: wrong-repair patches and gold table fingerprints.",
        f"- Duplicates: {facts.duplicate_tasks} tasks repeating another's mutation (a fork of the same repository, "
        "same split group, file and broken patch) were dropped; the first instance id of each is kept.",
        licenses,
    ]


def _corpus_report_lines(facts: CardFacts, splits: Sequence[str]) -> list[str]:
    """Each split's corpus report with its chart (nothing when no split has one)."""
    reported = [s for s in splits if facts.corpus_report.get(s)]
    if not reported:
        return []
    lines = [
        "",
        "## Corpus report",
        "",
        "What minting produced per repository of these splits (candidates, kept per operator family, yield,",
        "screening rejections, silent vs loud bugs, kept tasks with an informative wrong repair, build and",
        "mint wall time where measured):",
    ]
    for split in reported:
        lines += [
            "",
            f"### {split}",
            "",
            facts.corpus_report[split].rstrip(),
            "",
            f"![kept tasks per repository and family, {split}]({report_chart(split)})",
        ]
    return lines


def _versions_lines(facts: CardFacts) -> list[str]:
    """The tool versions the tasks were verified with."""
    versions = ", ".join(f"{k} {v}" for k, v in sorted(facts.tool_versions.items()))
    return ["", "## Versions", "", f"Verified with: {versions or 'unknown'}.", ""]


def _local_tests_table(facts: CardFacts, splits: Sequence[str]) -> list[str]:
    """How many dbt tests cover each task's broken lineage, per split (the strength of its local checks)."""
    from dbt_harvest.core.task_record import LOCAL_TESTS_BUCKETS

    if facts.local_tests_hist is None:
        return []
    lines = ["", "| covering dbt tests (`local_tests`) | " + " | ".join(splits) + " |", "|---|" + "---|" * len(splits)]
    for bucket in LOCAL_TESTS_BUCKETS:
        lines.append(
            f"| {bucket} | "
            + " | ".join(str((facts.local_tests_hist.get(s) or {}).get(bucket, 0)) for s in splits)
            + " |"
        )
    if facts.min_local_tests:
        lines += [
            "",
            f"This build keeps only tasks with at least {facts.min_local_tests} covering dbt test(s) "
            "(`harvest dataset build --min-local-tests`).",
        ]
    return lines

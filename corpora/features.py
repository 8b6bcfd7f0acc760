"""The public row of a task: explicit `datasets.Features`, SWE-bench-style names, nothing secret.

Names follow SWE-bench / SWE-smith where a column exists there: ``instance_id``, ``repo``,
``base_commit``, ``patch`` (the gold fix, as in SWE-bench) and ``problem_statement``. The bug itself is
``broken_patch`` (apply it to ``base_commit`` to get the task's broken project; ``patch`` then repairs it).
Wrong-repair patches (they would teach the checker's blind spots) and gold table fingerprints never
appear in a row; the gold DuckDB file is referenced by its content-addressed path ``gold/<sha256>.duckdb``.
"""

from __future__ import annotations

from typing import Any

from core.task_record import TaskRecord

#: column -> one-line meaning, rendered into the dataset card
COLUMNS: dict[str, str] = {
    "instance_id": "content-hashed task id: <owner>__<repo>.<sha8>.<operator>.<hash8>",
    "repo": "source repository (owner/repo or URL)",
    "base_commit": "exact commit the task is built on (40-hex)",
    "pin": "harvester pin id of repo@commit",
    "project_dir": "dbt project folder inside the repository",
    "problem_statement": "what the user reports; the hidden check is not described",
    "family": "mutation family (e.g. join, filter, aggregate)",
    "operator": "mutation operator inside the family",
    "effect": "what the bug does to the data",
    "file": "repo-relative path of the model file that was broken",
    "broken_patch": "unified diff: original -> broken (apply to base_commit to get the task)",
    "patch": "unified diff: broken -> original, the gold repair (SWE-bench's `patch`)",
    "local_checks": "dbt build / dbt test outcome of the broken project (builds, tests_total, tests_failed)",
    "graded_tables": "gold tables the hidden check compares (Spider 2.0-DBT condition_tabs)",
    "graded_columns": "per graded table, the column indexes compared (condition_cols)",
    "ignore_orders": "per graded table, whether row order is ignored",
    "gold_file": "content-addressed gold DuckDB file in this dataset: gold/<sha256>.duckdb",
    "license": "SPDX id of the source repository's license",
    "split_group": "repositories that must share a split (forks, package families)",
    "generator_version": "dbt-harvest version that minted the task",
    "versions": "tool versions the task was verified with (dbt-core, dbt-duckdb, duckdb, ...)",
    "weak": "true when no wrong repair was confirmed for the task",
}


def task_features():  # -> datasets.Features
    """The explicit schema of a public row (datasets imported here, not at module load)."""
    from datasets import Features, List, Value

    return Features({
        "instance_id": Value("string"),
        "repo": Value("string"),
        "base_commit": Value("string"),
        "pin": Value("string"),
        "project_dir": Value("string"),
        "problem_statement": Value("string"),
        "family": Value("string"),
        "operator": Value("string"),
        "effect": Value("string"),
        "file": Value("string"),
        "broken_patch": Value("string"),
        "patch": Value("string"),
        "local_checks": {
            "builds": Value("bool"),
            "tests_total": Value("int32"),
            "tests_failed": Value("int32"),
        },
        "graded_tables": List(Value("string")),
        "graded_columns": List(List(Value("int32"))),
        "ignore_orders": List(Value("bool")),
        "gold_file": Value("string"),
        "license": Value("string"),
        "split_group": Value("string"),
        "generator_version": Value("string"),
        "versions": List({"name": Value("string"), "version": Value("string")}),
        "weak": Value("bool"),
    })


def gold_file(sha256: str) -> str:
    return f"gold/{sha256}.duckdb"


def to_row(record: TaskRecord) -> dict[str, Any]:
    """The public row of a record; fields not listed here (wrong repairs, timings) are never copied."""
    return {
        "instance_id": record.instance_id,
        "repo": record.repo,
        "base_commit": record.base_commit,
        "pin": record.pin,
        "project_dir": record.project_dir,
        "problem_statement": record.problem_statement,
        "family": record.family,
        "operator": record.operator,
        "effect": record.effect,
        "file": record.file,
        "broken_patch": record.broken_patch,
        "patch": record.fix_patch,
        "local_checks": {
            "builds": record.local_checks.builds,
            "tests_total": record.local_checks.tests_total,
            "tests_failed": record.local_checks.tests_failed,
        },
        "graded_tables": list(record.grading.condition_tabs),
        "graded_columns": [list(c) for c in record.grading.condition_cols],
        "ignore_orders": list(record.grading.ignore_orders),
        "gold_file": gold_file(record.gold_sha256),
        "license": record.license,
        "split_group": record.split_group,
        "generator_version": record.generator_version,
        "versions": [{"name": k, "version": v} for k, v in sorted(record.versions.items())],
        "weak": record.weak,
    }

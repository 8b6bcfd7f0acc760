"""The public row of a task: explicit `datasets.Features`, SWE-bench-style names, nothing secret.

A row is self-contained: with it (and the gold file it names) a fresh machine rebuilds the task
(`harvest tasks materialize`) and grades a submission (`harvest score --task`) without our task store:
the origin URL, commit and git tree id, the dbt project folder, every dbt package at its exact commit and
origin, the compat patch (text and sha256), the pinned clock, the DuckDB file name the profile uses, the
grading spec in Spider 2.0-DBT's own shape (``condition_tabs``, ``condition_cols``, ``ignore_orders``),
the gold file's path and sha256, and the tool versions.

Names follow SWE-bench / SWE-smith where a column exists there: ``instance_id``, ``repo``,
``base_commit``, ``patch`` (the gold fix, as in SWE-bench), ``problem_statement``, ``FAIL_TO_PASS``,
``PASS_TO_PASS``, ``version``, ``environment_setup``. SWE-bench's ``base_commit`` is already broken; ours is
the clean upstream commit and the bug is ``broken_patch`` (SWE-smith's ``patch``), applied first: that
setup step is spelled out in ``setup`` and in the card (:data:`SWE_BENCH_MAPPING`).
Wrong-repair patches (they would teach the checker's blind spots) and gold table fingerprints never
appear in a row; the gold DuckDB file is referenced by its content-addressed path ``gold/<sha256>.duckdb``.
"""

from __future__ import annotations

from typing import Any

from dbt_harvest.core.pin import Pin
from dbt_harvest.core.task_record import TaskRecord, statement_of

#: the file name of the DuckDB database every build of a task uses (the profile's ``path``)
DATABASE_FILE = "build.duckdb"
#: the one-line setup step of every row
SETUP = (
    "export the repository at base_commit (without .git) -> vendor `packages` at their commits into "
    "<project_dir>/dbt_packages -> apply compat_patch -> apply broken_patch; then seed + build with "
    "dbt-duckdb, profile path ./" + DATABASE_FILE + " (`database_file`), schema profile_schema, the wall clock "
    "frozen at `clock` (libfaketime: `FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f '<clock>'`; a plain "
    "`faketime '<clock>'` ticks), TZ=UTC, PYTHONHASHSEED=0, without the tests `baseline_tests` lists as failing "
    "(`harvest tasks materialize` prints the command)"
)

#: column -> one-line meaning, rendered into the dataset card
COLUMNS: dict[str, str] = {
    "instance_id": "content-hashed task id: <owner>__<repo>.<sha8>.<operator>.<hash8>",
    "repo": "source repository (owner/repo or URL)",
    "base_commit": "exact commit the task is built on (40-hex)",
    "pin": "harvester pin id of repo@commit",
    "project_dir": "dbt project folder inside the repository",
    "problem_statement": "what the user reports; the hidden check is not described (a completion: its "
    "documentation and facts about the expected table, or the documentation alone when built with "
    "`--statement documentation`)",
    "documentation_statement": "a completion's statement from the project's documentation alone (Spider 2.0-DBT's "
    "shape); a repair's problem_statement",
    "kind": "repair (undo one planted edit of a model) or completion (write a documented model whose file is missing)",
    "family": "mutation family (e.g. join, filter, aggregate); completion for a completion task",
    "operator": "mutation operator inside the family",
    "effect": "what the bug does to the data",
    "file": "repo-relative path of the model file that was broken",
    "broken_patch": "unified diff: original -> broken (apply to base_commit to get the task)",
    "patch": "unified diff: broken -> original, the gold repair (SWE-bench's `patch`)",
    "local_checks": "dbt build / dbt test outcome of the broken project (builds, tests_total, tests_failed)",
    "condition_tabs": "gold tables the hidden check compares (Spider 2.0-DBT duckdb_match `condition_tabs`)",
    "condition_cols": "per graded table, the column indexes compared (`condition_cols`; empty = all columns)",
    "ignore_orders": "per graded table, whether row order is ignored (`ignore_orders`)",
    "gold_file": "content-addressed gold DuckDB file in this dataset: gold/<sha256>.duckdb",
    "gold_sha256": "sha256 of the gold file (verify before scoring)",
    "origin_url": "where the repository is fetched from (a public git URL; `local://` when pinned from a private copy)",
    "tree": "git tree id of base_commit (a materialized export is checked against it)",
    "project_name": "the dbt project's name (dbt_project.yml)",
    "profile_schema": "the schema the profile builds in (`main` unless the project needs another)",
    "database_file": "the DuckDB file the profile's `path` names, relative to the workspace root",
    "clock": "the pinned build clock (libfaketime `@<date>`); every build of the task runs at it",
    "packages": "dbt packages vendored into <project_dir>/dbt_packages: name, source, requested range, version, exact commit, origin URL",
    "compat_patch": "unified diff applied after vendoring and before broken_patch (DuckDB compatibility, data fixes); empty if none",
    "compat_patch_sha256": "sha256 of compat_patch (empty if none)",
    "compat_edits": "files of the repository the compat patch edits (declared with `harvest add --allow-edits`: configuration, "
    "seeds, YAML or macros, never model SQL); empty when it only adds files",
    "augmented": "true when the task's seeds carry distinguishing rows the harvester added (augmentation_patch); filter with `not row['augmented']` for upstream data only",
    "augmentation_patch": "unified diff adding seed rows, applied after compat_patch and before broken_patch; empty if none",
    "augmentation_patch_sha256": "sha256 of augmentation_patch (empty if none)",
    "data_origin": "where the task's data comes from: repository (the project's own seeds), augmented (its seeds plus "
    "distinguishing rows: augmentation_patch) or synthesized (the repository ships no data: synthesis_patch derives "
    "it from the project's own YAML, tests and SQL)",
    "synthesis_patch": "unified diff adding the synthesized source data as seeds (and the `source` macro that reads "
    "them), applied after compat_patch and before augmentation_patch; empty unless data_origin is synthesized",
    "synthesis_patch_sha256": "sha256 of synthesis_patch (empty if none)",
    "dialect": "the SQL the models are built from: native (the repository's, written for DuckDB or portable) or "
    "ported:<dialect> (written for another warehouse and ported with sqlglot: port_patch)",
    "port_patch": "unified diff rewriting the model files the port changed into DuckDB's SQL (Jinja kept), applied "
    "after compat_patch; empty unless dialect is ported",
    "port_patch_sha256": "sha256 of port_patch (empty if none)",
    "setup": "the setup step, spelled out (SWE-bench rows start from an already broken base_commit; ours do not)",
    "FAIL_TO_PASS": "graded checks that fail on the broken project and pass after the gold repair (the hidden duckdb_match)",
    "PASS_TO_PASS": "local checks that pass before and after the repair (the project's dbt build and tests)",
    "baseline_tests": "the project's own dbt tests that did not pass on the original project: unique_id and dbt's status; "
    "fail/error ones (SWE-bench's FAIL_TO_FAIL) are left out of every build (`--exclude`), warn ones run",
    "version": "toolchain the task was verified with, as one string (SWE-bench's `version`)",
    "environment_setup": "pip requirement line that recreates the toolchain (SWE-bench's environment setup)",
    "license": "SPDX id of the source repository's license",
    "split_group": "repositories that must share a split (forks, package families)",
    "generator_version": "dbt-harvest version that minted the task",
    "versions": "tool versions the task was verified with (dbt-core, dbt-duckdb, duckdb, ...)",
    "weak": "true when no wrong repair was confirmed for the task",
    "local_tests": "dbt tests over the broken model and its descendants (0: the local checks only prove it builds)",
    "source": "mutation (a planted edit) or history (the task undoes a fix the repository's engineers made: base_commit is "
    "the fix's parent, built with the fix applied)",
    "fix_commit": "history tasks: the fix commit (40-hex); its model files, over base_commit, are what gold was built from",
    "fix_date": "history tasks: the fix's author date (ISO 8601); `harvest dataset build --since DATE` keeps the newer ones",
    "fix_subject": "history tasks: the fix commit's subject line (provenance only: it often names the fix; never shown to an agent)",
    "fix_url": "history tasks: a link to the fix commit (GitHub), else empty",
    "fix_files": "history tasks: the files the fix changed (taken from fix_commit over base_commit before any build)",
    "fix_sha256": "history tasks: sha256 of the fix as a unified diff (base_commit -> fix_commit over fix_files), checked when materialized",
}


def task_features():  # -> datasets.Features
    """The explicit schema of a public row (datasets imported here, not at module load)."""
    from datasets import Features, List, Value

    return Features(
        {
            "instance_id": Value("string"),
            "repo": Value("string"),
            "base_commit": Value("string"),
            "pin": Value("string"),
            "project_dir": Value("string"),
            "problem_statement": Value("string"),
            "documentation_statement": Value("string"),
            "kind": Value("string"),
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
            "condition_tabs": List(Value("string")),
            "condition_cols": List(List(Value("int32"))),
            "ignore_orders": List(Value("bool")),
            "gold_file": Value("string"),
            "gold_sha256": Value("string"),
            "origin_url": Value("string"),
            "tree": Value("string"),
            "project_name": Value("string"),
            "profile_schema": Value("string"),
            "database_file": Value("string"),
            "clock": Value("string"),
            "packages": List(
                {
                    "name": Value("string"),
                    "source": Value("string"),
                    "requested": Value("string"),
                    "version": Value("string"),
                    "commit": Value("string"),
                    "url": Value("string"),
                }
            ),
            "compat_patch": Value("string"),
            "compat_patch_sha256": Value("string"),
            "compat_edits": List(Value("string")),
            "augmented": Value("bool"),
            "augmentation_patch": Value("string"),
            "augmentation_patch_sha256": Value("string"),
            "data_origin": Value("string"),
            "synthesis_patch": Value("string"),
            "synthesis_patch_sha256": Value("string"),
            "dialect": Value("string"),
            "port_patch": Value("string"),
            "port_patch_sha256": Value("string"),
            "setup": Value("string"),
            "FAIL_TO_PASS": List(Value("string")),
            "PASS_TO_PASS": List(Value("string")),
            "baseline_tests": List({"unique_id": Value("string"), "status": Value("string")}),
            "version": Value("string"),
            "environment_setup": Value("string"),
            "license": Value("string"),
            "split_group": Value("string"),
            "source": Value("string"),
            "fix_commit": Value("string"),
            "fix_date": Value("string"),
            "fix_subject": Value("string"),
            "fix_url": Value("string"),
            "fix_files": List(Value("string")),
            "fix_sha256": Value("string"),
            "generator_version": Value("string"),
            "versions": List({"name": Value("string"), "version": Value("string")}),
            "weak": Value("bool"),
            "local_tests": Value("int32"),
        }
    )


def gold_file(sha256: str) -> str:
    return f"gold/{sha256}.duckdb"


#: SWE-bench / SWE-smith column -> how to read it here (rendered into the card)
SWE_BENCH_MAPPING: dict[str, str] = {
    "instance_id": "same meaning",
    "repo": "same meaning (`owner/name`); fetch from `origin_url`",
    "base_commit": "NOT the buggy state: the clean upstream commit. Apply `compat_patch`, then `broken_patch`, to get what SWE-bench's base_commit would hold (`setup`)",
    "patch": "same meaning: the gold fix, applied to the broken project",
    "patch (SWE-smith)": "our `broken_patch` (SWE-smith's `patch` introduces the bug)",
    "test_patch": "none: the hidden test is the gold comparison (`condition_tabs` vs `gold_file`), never a file in the project",
    "FAIL_TO_PASS": "the hidden duckdb_match over `condition_tabs`",
    "PASS_TO_PASS": "the project's own dbt build and tests (`local_checks` says how many); tests in `baseline_tests` with status fail or error failed on the original project and are never run (SWE-bench's FAIL_TO_FAIL)",
    "version / environment_setup_commit": "`version` (toolchain) and `environment_setup` (pip line); there is no setup commit",
    "image_name": "none: `harvest tasks materialize` builds the workspace; builds run in bubblewrap",
}


def fail_to_pass(record: TaskRecord) -> list[str]:
    """The hidden check, named as one entry: it is one bit over every graded table."""
    return ["duckdb_match(" + ", ".join(record.grading.condition_tabs) + ")"]


def pass_to_pass(record: TaskRecord) -> list[str]:
    """The local checks that pass on the broken project and on the repair (test names are not recorded)."""
    checks = record.local_checks
    if not checks.builds:
        return []
    passing = checks.tests_total - checks.tests_failed
    return ["dbt build (models)", f"dbt test ({passing} of {checks.tests_total} passing on the broken project)"]


def toolchain(versions: dict[str, str]) -> tuple[str, str]:
    """(``version``, ``environment_setup``) from a record's tool versions."""
    keys = ("dbt-core", "dbt-duckdb", "duckdb")
    version = " ".join(f"{k}=={versions[k]}" for k in keys if k in versions)
    return version, ("pip install " + version) if version else ""


def to_row(
    record: TaskRecord,
    pin: Pin | None = None,
    compat_patch: str = "",
    augmentation: str = "",
    synthesis: str = "",
    port: str = "",
) -> dict[str, Any]:
    """The public row of a record (``pin`` supplies what rebuilds the task; ``compat_patch``,
    ``augmentation``, ``synthesis`` and ``port`` the text of its patches).

    Fields not listed here (wrong repairs, timings, table fingerprints) are never copied."""
    if pin is not None:
        _check_pin_texts(record, pin, compat_patch, augmentation, synthesis, port)
    return {
        **_task_fields(record),
        **_rebuild_fields(pin, compat_patch, augmentation, synthesis, port),
        "data_origin": record.origin,
        "dialect": record.sql_dialect,
        **_check_fields(record, pin),
        **_toolchain_fields(record),
        **_history_fields(record, pin),
    }


def _check_pin_texts(
    record: TaskRecord, pin: Pin, compat_patch: str, augmentation: str, synthesis: str = "", port: str = ""
) -> None:
    """ValueError unless ``pin`` is the record's pin and the patch texts hash to the pin's sha256."""
    import hashlib

    if pin.id != record.pin or pin.commit != record.base_commit:
        raise ValueError(f"{record.instance_id}: pin {pin.id} is not the task's pin {record.pin}")
    if pin.compat_patch_sha256 and hashlib.sha256(compat_patch.encode()).hexdigest() != pin.compat_patch_sha256:
        raise ValueError(f"{record.instance_id}: compat patch text does not match the pin's sha256")
    if pin.augmentation_sha256 and hashlib.sha256(augmentation.encode()).hexdigest() != pin.augmentation_sha256:
        raise ValueError(f"{record.instance_id}: augmentation patch text does not match the pin's sha256")
    if pin.synthesis_sha256 and hashlib.sha256(synthesis.encode()).hexdigest() != pin.synthesis_sha256:
        raise ValueError(f"{record.instance_id}: synthesized data patch text does not match the pin's sha256")
    if pin.port_sha256 and hashlib.sha256(port.encode()).hexdigest() != pin.port_sha256:
        raise ValueError(f"{record.instance_id}: dialect port patch text does not match the pin's sha256")


def _task_fields(record: TaskRecord) -> dict[str, Any]:
    """The task itself: ids, statement, the bug and its repair, local checks, grading spec and gold."""
    return {
        "instance_id": record.instance_id,
        "repo": record.repo,
        "base_commit": record.base_commit,
        "pin": record.pin,
        "project_dir": record.project_dir,
        "problem_statement": record.problem_statement,
        "documentation_statement": statement_of(record, "documentation"),
        "kind": record.kind,
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
        "condition_tabs": list(record.grading.condition_tabs),
        "condition_cols": [list(c) for c in record.grading.condition_cols],
        "ignore_orders": list(record.grading.ignore_orders),
        "gold_file": gold_file(record.gold_sha256),
        "gold_sha256": record.gold_sha256,
    }


def _rebuild_fields(
    pin: Pin | None, compat_patch: str, augmentation: str, synthesis: str = "", port: str = ""
) -> dict[str, Any]:
    """What rebuilds the project from its pin: origin, tree, profile, clock, packages, compat and seed patches."""
    return {
        "origin_url": pin.url if pin else "",
        "tree": pin.tree if pin else "",
        "project_name": pin.project_name if pin else "",
        "profile_schema": pin.profile_schema if pin else "main",
        "database_file": pin.db_file if pin else DATABASE_FILE,
        "clock": pin.clock if pin else "",
        "packages": [
            {
                "name": p.name,
                "source": p.source,
                "requested": p.requested,
                "version": p.version,
                "commit": p.commit,
                "url": p.url,
            }
            for p in (pin.packages if pin else ())
        ],
        "compat_patch": compat_patch if pin and pin.compat_patch_sha256 else "",
        "compat_patch_sha256": pin.compat_patch_sha256 if pin else "",
        "compat_edits": list(pin.compat_edits) if pin else [],
        "augmented": bool(pin and pin.augmentation_sha256),
        "augmentation_patch": augmentation if pin and pin.augmentation_sha256 else "",
        "augmentation_patch_sha256": pin.augmentation_sha256 if pin else "",
        "synthesis_patch": synthesis if pin and pin.synthesis_sha256 else "",
        "synthesis_patch_sha256": pin.synthesis_sha256 if pin else "",
        "port_patch": port if pin and pin.port_sha256 else "",
        "port_patch_sha256": pin.port_sha256 if pin else "",
    }


def _check_fields(record: TaskRecord, pin: Pin | None) -> dict[str, Any]:
    """The setup step and the checks in SWE-bench's terms, with the project's known failing dbt tests."""
    return {
        "setup": SETUP,
        "FAIL_TO_PASS": fail_to_pass(record),
        "PASS_TO_PASS": pass_to_pass(record),
        "baseline_tests": [{"unique_id": t.unique_id, "status": t.status} for t in (pin.baseline_tests if pin else ())],
    }


def _toolchain_fields(record: TaskRecord) -> dict[str, Any]:
    """Versions and environment, license and split group, and how strong the task's checks are."""
    version, setup_env = toolchain(record.versions)
    return {
        "version": version,
        "environment_setup": setup_env,
        "license": record.license,
        "split_group": record.split_group,
        "generator_version": record.generator_version,
        "versions": [{"name": k, "version": v} for k, v in sorted(record.versions.items())],
        "weak": record.weak,
        "local_tests": record.local_tests,
    }


def _history_fields(record: TaskRecord, pin: Pin | None) -> dict[str, Any]:
    """Where the bug comes from; for a history task, the fix commit it undoes."""
    return {
        "source": record.source,
        "fix_commit": record.fix_commit,
        "fix_date": record.fix_date,
        "fix_subject": record.fix_subject,
        "fix_url": fix_url(pin.url, record.fix_commit) if pin is not None and record.fix_commit else "",
        "fix_files": list(pin.fix_files) if pin is not None else [],
        "fix_sha256": pin.fix_sha256 if pin is not None else "",
    }


def fix_url(url: str, commit: str) -> str:
    """A link to a commit of a GitHub repository ('' for any other host)."""
    from dbt_harvest.core.pin import GITHUB_URL

    match = GITHUB_URL.match(url.strip())
    return f"https://github.com/{match['owner']}/{match['repo'].removesuffix('.git')}/commit/{commit}" if match else ""

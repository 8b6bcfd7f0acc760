"""The task record: the frozen contract between minting and everything downstream.

`harvest mint` writes one JSON file per kept task under HARVEST_HOME/tasks; corpora, eval and train
read them. The id is content-hashed (``<owner>__<repo>.<sha8>.<operator>.<hash8>``) so that the same
mutation minted twice collides instead of duplicating. Reading validates every field, and
reads a statement minted before its closing depended on the local checks with today's closing
(``core.closing.restated``: a statement never claims dbt tests that do not cover the bug).

Two kinds of task share the record (``kind``): a ``repair`` (one planted edit of a model file to undo) and
a ``completion`` (a documented model's file is missing; write it from its contract: Spider 2.0-DBT's own
shape). A completion's ``broken_patch`` deletes the file, its ``fix_patch`` creates it with the original
text, each wrong "repair" creates it with a plausible wrong text, and its operator is ``complete``. A
repair's JSON has no ``kind`` key, so every record minted before completions existed keeps its hash.

A repair's bug is planted by a mutator (``source`` ``mutation``) or mined from the repository's history
(``history``: the task undoes a fix its engineers made, operator ``history``, with the fix commit, its date
and subject as provenance); a planted task's JSON has none of these keys.

A completion minted with facts states them (``facts``: row count, grain, types and nulls, example rows)
after the documentation, and keeps the documentation-only statement beside it (``documentation_statement``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.core.closing import restated
from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.scorer.spec import GradingSpec, SpecFormatError
from dbt_harvest.core.statement_facts import TableFacts

GENERATOR_VERSION = "0.1.0"
SPLITS = ("train", "dev", "test")
KINDS = ("repair", "completion")
#: how many dbt tests cover a task's broken lineage (``TaskRecord.local_tests``), in the buckets the card and
#: the corpus report count (0: the local checks only prove that the project builds)
LOCAL_TESTS_BUCKETS = ("0", "1", "2-4", "5+")


def local_tests_bucket(n: int) -> str:
    """The bucket of :data:`LOCAL_TESTS_BUCKETS` that ``n`` covering tests fall in."""
    return "0" if n <= 0 else "1" if n == 1 else "2-4" if n <= 4 else "5+"


#: where a task's bug comes from (``TaskRecord.source``)
SOURCES = ("mutation", "history")
#: the operator (and id segment) of every completion task
COMPLETE_OPERATOR = "complete"


def kind_of_id(instance_id: str) -> str:
    """The kind of a task from its id alone (``<slug>.<sha8>.<operator>.<hash8>``): what a lock or a
    sealed listing, which hold ids but not records, needs to count tasks per kind."""
    parts = instance_id.rsplit(".", 2)
    return "completion" if len(parts) == 3 and parts[1] == COMPLETE_OPERATOR else "repair"


class TaskRecordError(HarvestError):
    """A task record is malformed or fails its own hash check."""


@dataclass(frozen=True)
class LocalChecks:
    """What the task's local checks (dbt build + dbt tests) say about the broken project.

    ``covering_tests``: the dbt tests (unique ids) over the mutated model and its descendants, the ones
    an agent's ``dbt build`` runs against the bug; empty means the local checks only prove it compiles.
    """

    builds: bool
    tests_total: int
    tests_failed: int
    covering_tests: tuple[str, ...] = ()

    @property
    def silent(self) -> bool:
        """A silent bug: the project builds and every dbt test passes, only the hidden check fails."""
        return self.builds and self.tests_failed == 0


@dataclass(frozen=True)
class Claim:
    """One thing the problem statement tells a data consumer, checked against the built tables before
    the task was kept: ``kind`` is ``more_rows`` / ``fewer_rows`` (about ``table``) or how ``column`` moved
    (``higher``, ``lower``, ``true_more``, ``true_less``, ``nulls_more``, ``nulls_less``, ``different``)."""

    table: str  # a graded table (grading.condition_tabs)
    kind: str
    column: str = ""


@dataclass(frozen=True)
class WrongRepairNote:
    """What a wrong repair tried (``intent``, from its operator) and what it did, measured on its build:
    the broken build's symptoms it ``fixes`` and those it ``leaves`` (or breaks anew)."""

    intent: str
    fixes: tuple[str, ...] = ()
    leaves: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskRecord:
    instance_id: str
    pin: str  # pin id, e.g. acme__analytics@1a2b3c4d5e6f
    repo: str  # owner/repo (or the URL for non-GitHub repositories)
    base_commit: str
    project_dir: str
    split: str
    split_group: str
    family: str
    operator: str
    effect: str
    file: str  # repo-relative path of the mutated model file
    broken_patch: str  # unified diff: original -> broken (applied to materialize the task)
    fix_patch: str  # unified diff: broken -> original (the true repair)
    wrong_repair_patches: tuple[str, ...]  # unified diffs over the broken file; never public
    grading: GradingSpec
    problem_statement: str
    local_checks: LocalChecks
    gold_sha256: str  # the pin's gold name (harvester.gold)
    license: str
    versions: dict[str, str]
    generator_version: str = GENERATOR_VERSION
    weak: bool = False  # kept with --allow-weak: no wrong repair was confirmed
    # one note per wrong repair patch, in the same order
    wrong_repair_notes: tuple[WrongRepairNote, ...] = ()
    # what the problem statement claims, each checked on the confirmed build's tables
    claims: tuple[Claim, ...] = ()
    # the DuckDB database name (file stem) of the profile gold was built with; graded values never
    # depend on it (the pin's database_columns are not graded)
    database: str = "build"
    # digest of the broken build's gradable outputs: two tasks of a pin with the same one are one bug
    broken_signature: str = ""
    # "repair" or "completion" (module docstring); omitted from a repair's JSON
    kind: str = "repair"
    # where the bug comes from: "mutation" (planted by an operator) or "history" (a repair task that undoes a fix
    # the repository's engineers made: harvester/history); a history task's provenance is the fix commit, its
    # author date and subject line (never shown to an agent: the statement describes the symptom). All omitted
    # from the JSON of a planted task, so its bytes and hash stay as they were
    source: str = "mutation"
    fix_commit: str = ""
    fix_date: str = ""
    fix_subject: str = ""
    # a completion's statement of the project's documentation alone (Spider 2.0-DBT's shape), kept beside the
    # full ``problem_statement`` that adds the ``facts`` about the expected tables (core.statement_facts); a
    # dataset build or export chooses either, and both are graded the same. Omitted from the JSON when empty
    # (repairs, and completions minted before the facts), so those records keep their bytes and hashes
    documentation_statement: str = ""
    facts: tuple[TableFacts, ...] = ()
    # where the task's data comes from when it is not the repository's (``origin``): "synthesized" (from the
    # project's contract: harvester/synth); "" for the repository's seeds, augmented or not. Omitted when empty
    data_origin: str = ""
    # the SQL the task's models were built from when it is not the repository's own: "ported:<dialect>" (the
    # pin's models ported to DuckDB's SQL: harvester/port); "" = native. Omitted when empty
    dialect: str = ""

    @property
    def sql_dialect(self) -> str:
        """``native`` or ``ported:<dialect>``."""
        return self.dialect or "native"

    @property
    def origin(self) -> str:
        """The data's origin: ``synthesized``, ``augmented`` (the repository's seeds plus derived rows: an
        augmented pin, ``<base>+aug-<sha>``) or ``repository``."""
        if self.data_origin:
            return self.data_origin
        return "augmented" if "+aug-" in self.pin else "repository"

    @property
    def local_tests(self) -> int:
        """How many dbt tests cover the mutated lineage (0: the local checks only prove the project builds)."""
        return len(self.local_checks.covering_tests)

    def to_json(self) -> str:
        data = asdict(self)
        data["grading"] = self.grading.to_dict()
        data["wrong_repair_patches"] = list(self.wrong_repair_patches)
        if self.kind == "repair":
            del data["kind"]  # records minted before completions existed keep their bytes and hashes
        if self.source == "mutation":
            for key in ("source", "fix_commit", "fix_date", "fix_subject"):
                del data[key]  # likewise for records minted before history tasks existed
        data["facts"] = [f.to_dict() for f in self.facts]
        for key in ("documentation_statement", "facts", "data_origin", "dialect"):
            if not data[key]:
                del data[key]  # likewise for records minted before completion statements stated facts
        return json.dumps(data, sort_keys=True, indent=1) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON data (what ``to_json`` writes)."""
        data: dict[str, Any] = json.loads(self.to_json())  # to_json writes one JSON object
        return data

    @property
    def sha8(self) -> str:
        return self.base_commit[:8]


#: what a record's ``data_origin`` may hold ("" = the repository's seeds, augmented or not)
DATA_ORIGINS = ("", "synthesized")
#: the warehouse dialects a pin's models can be ported from (harvester/port; sqlglot's names)
PORT_DIALECTS = ("snowflake", "bigquery", "postgres", "redshift")

#: every origin a task's data can have (``TaskRecord.origin``), as datasets and cards count them
ORIGINS = ("repository", "augmented", "synthesized")

#: which statement a dataset build or an export gives a task (``statement_of``)
STATEMENTS = ("full", "documentation")


def statement_of(record: TaskRecord, which: str = "full") -> str:
    """The task's statement: ``full`` (what the mint wrote: a completion's documentation and facts) or
    ``documentation`` (a completion's documentation alone, Spider 2.0-DBT's shape). A task without a
    documentation-only statement (a repair, or a completion minted before the facts) has one statement,
    which both give."""
    if which not in STATEMENTS:
        raise TaskRecordError(f"statement {which!r} is not one of {', '.join(STATEMENTS)}")
    if which == "documentation" and record.documentation_statement:
        return record.documentation_statement
    return record.problem_statement


def task_id(repo_slug: str, commit: str, operator: str, file: str, broken_patch: str) -> str:
    """Content-hashed id: the same mutation of the same file at the same commit gets the same id."""
    digest = hashlib.sha256(f"{commit}\0{file}\0{operator}\0{broken_patch}".encode()).hexdigest()[:8]
    return f"{repo_slug}.{commit[:8]}.{operator}.{digest}"


#: fields older records carry that no longer mean anything; reading such a record drops them
#: (``timings``: per-stage seconds, moved to the mint's per-candidate reports so that the same task
#: minted twice is byte-identical)
RETIRED_FIELDS = frozenset({"timings"})


def task_from_dict(data: dict[str, Any], where: str = "task") -> TaskRecord:
    """Validate a parsed task record; raise TaskRecordError naming the first bad field."""
    if not isinstance(data, dict):
        raise TaskRecordError(f"{where}: not a JSON object")
    known = set(TaskRecord.__dataclass_fields__)
    data = {k: v for k, v in data.items() if k not in RETIRED_FIELDS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise TaskRecordError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
    nested = {"grading", "local_checks", "wrong_repair_patches", "wrong_repair_notes", "claims", "facts"}
    try:
        grading = GradingSpec.from_dict(data["grading"])
        raw_checks = dict(data["local_checks"])
        raw_checks["covering_tests"] = tuple(raw_checks.get("covering_tests", ()))
        checks = LocalChecks(**raw_checks)
        values = {k: data[k] for k in known if k not in nested and k in data}
        notes = tuple(
            WrongRepairNote(str(n["intent"]), tuple(n.get("fixes", ())), tuple(n.get("leaves", ())))
            for n in data.get("wrong_repair_notes", ())
        )
        claims = tuple(Claim(**c) for c in data.get("claims", ()))
        record = TaskRecord(
            **values,
            grading=grading,
            local_checks=checks,
            wrong_repair_patches=tuple(data.get("wrong_repair_patches", ())),
            wrong_repair_notes=notes,
            claims=claims,
            facts=tuple(TableFacts.from_dict(f) for f in data.get("facts", ())),
        )
    except (KeyError, TypeError, ValueError, AttributeError, SpecFormatError) as exc:
        detail = " ".join(str(exc).splitlines())  # a key quoted from the file may hold a line break
        raise TaskRecordError(f"{where}: malformed task record ({detail})") from None
    if record.kind not in KINDS:
        raise TaskRecordError(f"{where}: kind {record.kind!r} is not one of {', '.join(KINDS)}")
    if (record.kind == "completion") != (record.operator == COMPLETE_OPERATOR):
        raise TaskRecordError(f"{where}: operator {record.operator!r} does not go with kind {record.kind!r}")
    if record.source not in SOURCES:
        raise TaskRecordError(f"{where}: source {record.source!r} is not one of {', '.join(SOURCES)}")
    if (record.source == "history") != bool(record.fix_commit) or (
        record.source == "history" and record.kind != "repair"
    ):
        raise TaskRecordError(f"{where}: a history task is a repair with its fix_commit; this record mixes them")
    if record.data_origin not in DATA_ORIGINS:
        raise TaskRecordError(
            f"{where}: data_origin {record.data_origin!r} is not one of {', '.join(DATA_ORIGINS[1:])}"
        )
    if record.dialect and not (record.dialect.startswith("ported:") and record.dialect[7:] in PORT_DIALECTS):
        raise TaskRecordError(f"{where}: dialect {record.dialect!r} is not ported:<{'|'.join(PORT_DIALECTS)}>")
    if (record.facts or record.documentation_statement) and record.kind != "completion":
        raise TaskRecordError(f"{where}: only a completion states facts; this {record.kind} has them")
    if record.split not in SPLITS:
        raise TaskRecordError(f"{where}: split {record.split!r} is not one of {', '.join(SPLITS)}")
    for name in ("instance_id", "pin", "base_commit", "file", "broken_patch", "fix_patch", "problem_statement"):
        if not isinstance(getattr(record, name), str) or not getattr(record, name):
            raise TaskRecordError(f"{where}: field {name!r} must be a non-empty string")
    return restated(record)  # a statement that closed on dbt tests no test is over reads as minted today


def read_task(path: Path) -> TaskRecord:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskRecordError(f"no task record at {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskRecordError(f"{path}: not valid JSON ({exc})") from None
    return task_from_dict(data, where=str(path))


def write_task(record: TaskRecord, tasks: Path) -> Path:
    path = tasks / f"{record.instance_id}.json"
    atomic.write_text(path, record.to_json())
    return path

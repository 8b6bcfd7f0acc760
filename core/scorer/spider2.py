"""Scoring a Spider 2.0-DBT results folder exactly as the official ``evaluate.py`` reads it, honestly aggregated.

The official driver's layout rules (docs/SCORER_SPEC.md, "The results folder, as evaluate.py reads it",
lists them in full, each checked against the official code run side by side):

- ``<gold>`` holds one ``.jsonl`` file, ``spider2_eval.jsonl``; ``<results>`` one, ``results_metadata.jsonl``
  (anything else: evaluate.py refuses the folder, and so does :func:`read_folders`).
- Both are read line by line until the first line that is not JSON; lines are keyed by ``instance_id``
  (a later line wins). Only instances in both are scored (the official denominator), each gold line
  merged with its results line, the results line's keys winning.
- ``answer_type`` ``file``: ``answer_or_path`` relative to ``<results>/<instance_id>/`` (os.path.join: an
  absolute path stands alone); ``evaluation`` is one entry or a list, and the LAST ``duckdb_match`` /
  ``table_match`` entry decides (none: 0). ``answer``: only ``string_match``/``number_match`` count (a
  ``duckdb_match`` entry scores 0). ``files``: the CSV ``tables_match``. Any other type: 0.
- ``duckdb_match`` defaults: ``condition_tabs`` absent = every table of the gold (``SHOW TABLES``),
  ``condition_cols`` absent = all columns, ``ignore_orders`` absent = all false; an error inside = 0.
- It prints ``k/M k M`` over the M scored instances; some malformed lines stop the whole run instead.

What this module adds: a verdict per instance with its status and reason; ``string_match``,
``number_match``, ``table_match``, ``tables_match`` and BigQuery answers are reported as not mirrored
(never guessed); the line evaluate.py would print (or why it prints none) beside the honest k/N over ALL
instances of the gold metadata, in which not submitted, not mirrored and unsound instances (a missing
gold file, a spec grading nothing, a results line replacing the gold's ``evaluation``) count 0.
A gold file shipped under another name is used only when the caller names it (``aliases``: instance id
-> file name in that instance's gold folder); both names and the file's sha256 are recorded, the file is
never renamed.

Planning (what evaluate.py does with one merged line, :func:`plan_instance`, :func:`resolve_call`) is pure;
the rest opens only the files the two folders name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_harvest.core.atomic import sha256_file
from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.scorer.errors import GoldFileError, GoldTableError
from dbt_harvest.core.scorer.source import is_plain_identifier, open_source
from dbt_harvest.core.scorer.spec import GradingSpec

METADATA_NAME = "spider2_eval.jsonl"
RESULTS_METADATA_NAME = "results_metadata.jsonl"
DUCKDB_PARAMETERS = frozenset({"gold", "condition_tabs", "condition_cols", "ignore_orders"})
TABLES_MATCH_PARAMETERS = frozenset({"gold", "condition_cols", "ignore_orders"})
NOT_MIRRORED_FUNCS = ("string_match", "number_match")

# Instance statuses.
GRADED = "graded"  # duckdb_match ran (mirrored): official is 0 or 1, with the reason of a 0
FIXED = "fixed"  # the official driver's score does not depend on the submitted data (it is given)
NOT_SUBMITTED = "not_submitted"  # no results line: the official driver skips the instance
NOT_MIRRORED = "not_mirrored"  # the official driver would run a check this project does not mirror
CRASHES = "crashes"  # the official driver stops with an exception on this instance (no score at all)


class Spider2LayoutError(HarvestError):
    """The gold or results folder does not have the Spider 2.0-DBT layout, or an alias is invalid."""


@dataclass(frozen=True)
class JsonlRead:
    """The records of a JSONL text as the official ``read_jsonl`` keeps them."""

    records: tuple[Any, ...]
    #: "" when every line was read; else "line N: <why>" (the official reader keeps nothing after it)
    stopped: str = ""


@dataclass(frozen=True)
class Plan:
    """What evaluate.py does with one merged line: the kind of outcome and what it needs."""

    status: str
    reason: str = ""
    official: int | None = None  # the score, when the status is FIXED
    pred: str = ""  # os.path.join(results, instance_id, answer_or_path), for GRADED
    gold: str = ""  # os.path.join(gold_dir, instance_id, parameters.gold), for GRADED
    parameters: dict[str, Any] = field(default_factory=dict)  # the deciding duckdb_match parameters
    #: why this instance is not a sound task (a broken metadata entry), "" when it is one
    task_problem: str = ""


@dataclass(frozen=True)
class GoldAlias:
    """A gold file used under a name other than the metadata's (recorded, never renamed)."""

    instance_id: str
    expected_name: str
    shipped_name: str
    sha256: str


@dataclass(frozen=True)
class InstanceResult:
    """One instance: what the official driver scores it (None when it does not or we cannot say) and why."""

    instance_id: str
    status: str
    official: int | None
    strict: int
    score: int  # the honest score: 1 only for a sound, submitted, graded instance that passes
    reason: str
    answer_type: str = ""
    task_problem: str = ""
    gold_alias: GoldAlias | None = None

    @property
    def submitted(self) -> bool:
        return self.status != NOT_SUBMITTED

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instance_id": self.instance_id,
            "status": self.status,
            "submitted": self.submitted,
            "answer_type": self.answer_type,
            "official": self.official,
            "strict": self.strict,
            "score": self.score,
            "reason": self.reason,
            "task_problem": self.task_problem,
        }
        if self.gold_alias is not None:
            out["gold_alias"] = {
                "expected_name": self.gold_alias.expected_name,
                "shipped_name": self.gold_alias.shipped_name,
                "sha256": self.gold_alias.sha256,
            }
        return out


@dataclass(frozen=True)
class Spider2Report:
    """Every instance of the gold metadata, the honest k/N and the official driver's k/M side by side."""

    instances: tuple[InstanceResult, ...]
    #: results lines naming instances the gold metadata does not have (ignored, as officially)
    extra_results: tuple[str, ...] = ()
    #: where the official reader stopped reading results_metadata.jsonl ("" when it read it whole)
    results_stopped: str = ""

    @property
    def total(self) -> int:
        return len(self.instances)

    @property
    def score(self) -> int:
        return sum(r.score for r in self.instances)

    @property
    def strict_score(self) -> int:
        return sum(r.strict for r in self.instances)

    @property
    def submitted(self) -> int:
        return sum(1 for r in self.instances if r.submitted)

    @property
    def official_score(self) -> int:
        return sum(1 for r in self.instances if r.official == 1)

    @property
    def official_unknown(self) -> int:
        """Submitted instances whose official score this project cannot say (not mirrored)."""
        return sum(1 for r in self.instances if r.status == NOT_MIRRORED)

    @property
    def official_crash(self) -> str:
        """Why evaluate.py would stop without printing a score on this folder ("" when it would not)."""
        for r in self.instances:
            if r.status == CRASHES:
                return f"{r.instance_id}: {r.reason}"
        if self.submitted == 0:
            return "no instance is submitted: evaluate.py divides by zero"
        return ""

    @property
    def official_line(self) -> str:
        """The last line evaluate.py prints, when this project can compute it ("" otherwise)."""
        if self.official_crash or self.official_unknown:
            return ""
        k, m = self.official_score, self.submitted
        return f"{k / m} {k} {m}"

    @property
    def unsound(self) -> int:
        """Submitted instances that are not sound tasks (a missing gold file, a spec grading nothing...)."""
        return sum(1 for r in self.instances if r.task_problem)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": [r.to_dict() for r in self.instances],
            "total": self.total,
            "score": self.score,
            "strict_score": self.strict_score,
            "unsound": self.unsound,
            "submitted": self.submitted,
            "official_score": self.official_score,
            "official_unknown": self.official_unknown,
            "official_crash": self.official_crash,
            "official_line": self.official_line,
            "extra_results": list(self.extra_results),
            "results_stopped": self.results_stopped,
        }


# ---------------------------------------------------------------------------------------------- reading


def read_jsonl_text(text: str) -> JsonlRead:
    """Parse ``text`` as the official ``read_jsonl``: line by line (universal newlines), each stripped;
    the first line that is not JSON ends the read and everything before it is kept."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    records: list[Any] = []
    for n, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line.strip()))
        except json.JSONDecodeError as exc:
            return JsonlRead(tuple(records), f"line {n}: {exc.msg}")
    return JsonlRead(tuple(records))


def check_jsonl_names(folder: Path, expected: str, what: str) -> Path:
    """The folder's only ``.jsonl`` entry, which must be ``expected`` (evaluate.py asserts both)."""
    if not folder.is_dir():
        raise Spider2LayoutError(f"{what} folder {folder} does not exist")
    found = sorted(name for name in os.listdir(folder) if name.endswith(".jsonl"))
    if expected not in found:
        hint = (
            (
                f"; write one JSON line per instance: instance_id, answer_type (file), answer_or_path "
                f"(the DuckDB file, relative to {folder}/<instance_id>/)"
            )
            if expected == RESULTS_METADATA_NAME
            else ""
        )
        raise Spider2LayoutError(f"{what} folder {folder} has no {expected}{hint}")
    others = [name for name in found if name != expected]
    if others:
        raise Spider2LayoutError(
            f"{what} folder {folder} holds other .jsonl files ({', '.join(others)}): evaluate.py accepts "
            f"only {expected} there; move them out"
        )
    path = folder / expected
    if not path.is_file():
        raise Spider2LayoutError(f"{path} is not a file")
    return path


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise Spider2LayoutError(
            f"{what} {path} is not UTF-8 ({exc.reason}): evaluate.py stops on it; re-save it as UTF-8"
        ) from None


def _key(record: Any, where: str) -> Any:
    if not isinstance(record, dict) or "instance_id" not in record:
        raise Spider2LayoutError(f"{where}: a line without an instance_id: evaluate.py stops on it; fix the line")
    iid = record["instance_id"]
    try:
        hash(iid)
    except TypeError:
        raise Spider2LayoutError(f"{where}: instance_id {iid!r} is not a string: evaluate.py stops on it") from None
    return iid


def read_gold_metadata(gold: Path) -> dict[Any, dict[str, Any]]:
    """``instance_id -> line`` of ``<gold>/spider2_eval.jsonl``, refusing what evaluate.py would not read whole."""
    path = check_jsonl_names(gold, METADATA_NAME, "gold")
    read = read_jsonl_text(_read_text(path, "gold metadata"))
    if read.stopped:
        raise Spider2LayoutError(
            f"{path} {read.stopped}: evaluate.py stops reading the gold there; fix or remove that line"
        )
    return {_key(r, str(path)): r for r in read.records}


# ---------------------------------------------------------------------------------------------- planning


def _crash(reason: str) -> Plan:
    return Plan(CRASHES, f"evaluate.py stops here with {reason}")


def _fixed(score: int, reason: str, task_problem: str = "") -> Plan:
    return Plan(FIXED, reason, official=score, task_problem=task_problem)


def _join(*parts: Any) -> str | None:
    """``os.path.join`` of JSON values as evaluate.py calls it; None where it raises TypeError (a non-string)."""
    try:
        joined: str = os.path.join(*parts)  # JSON has no bytes: a join that does not raise joined strings
    except TypeError:
        return None
    return joined


def plan_instance(record: dict[str, Any], results: str, gold_dir: str) -> Plan:
    """What evaluate.py does with one merged (gold + results) line; pure."""
    iid = record["instance_id"]
    if "evaluation" not in record:
        return _crash("KeyError 'evaluation' (the gold line has no evaluation)")
    evaluation = record["evaluation"]
    entries = evaluation if isinstance(evaluation, list) else [evaluation]
    if "answer_type" not in record:
        return _crash("KeyError 'answer_type' (the results line has no answer_type)")
    answer_type = record["answer_type"]
    if answer_type == "answer":
        return _plan_answer(entries)
    if answer_type == "file":
        if "answer_or_path" not in record:
            return _crash("KeyError 'answer_or_path'")
        return _plan_file(iid, record["answer_or_path"], entries, results, gold_dir)
    if answer_type == "files":
        if "answer_or_path" not in record:
            return _crash("KeyError 'answer_or_path'")
        return _plan_files(iid, evaluation, record["answer_or_path"])
    return _fixed(0, f"answer_type {answer_type!r} is none of file, files, answer: evaluate.py scores 0")


def _plan_answer(entries: list[Any]) -> Plan:
    if not entries:
        return _crash("ValueError (max() of no scores: the evaluation list is empty)")
    for entry in entries:
        if not isinstance(entry, dict) or "func" not in entry:
            return _crash("an exception inside its answer check (it drops into pdb)")
        if entry["func"] in NOT_MIRRORED_FUNCS:
            return Plan(NOT_MIRRORED, f"{entry['func']} over a text answer is not mirrored")
    return _fixed(0, "answer_type 'answer': duckdb_match never reads a text answer, evaluate.py scores 0")


def _plan_file(iid: Any, answer: Any, entries: list[Any], results: str, gold_dir: str) -> Plan:
    if not isinstance(answer, str):
        return _crash(f"AttributeError (answer_or_path {answer!r} is not a string)")
    if answer.endswith(".sql"):
        return Plan(NOT_MIRRORED, "a .sql answer is run on BigQuery by evaluate.py, not mirrored")
    decision: Plan | None = None
    for entry in entries:
        if not isinstance(entry, dict):
            return _crash(f"TypeError (evaluation entry {entry!r} is not an object)")
        if "func" not in entry:
            return _crash("KeyError 'func' (an evaluation entry has no func)")
        func = entry["func"]
        if func not in ("duckdb_match", "table_match"):
            continue
        params = entry.get("parameters")
        if "parameters" not in entry or not isinstance(params, dict):
            return _crash(f"an error reading {func}'s parameters (missing or not an object)")
        if "gold" not in params:
            return _crash(f"KeyError 'gold' ({func} has no gold parameter)")
        if func == "table_match":
            if isinstance(params["gold"], str) and _join(gold_dir, iid, params["gold"]) is None:
                return _crash("TypeError (the instance_id is not a string)")
            decision = Plan(NOT_MIRRORED, "table_match (CSV answers) is not mirrored")
            continue
        gold = _join(gold_dir, iid, params["gold"])
        if gold is None:
            return _crash(f"TypeError (instance_id {iid!r} or gold {params['gold']!r} is not a string)")
        pred = _join(results, iid, answer)
        assert pred is not None  # iid and answer are strings here
        decision = Plan(GRADED, pred=pred, gold=gold, parameters=dict(params))
    if decision is None:
        return _fixed(
            0,
            "no duckdb_match or table_match entry in evaluation: evaluate.py scores 0",
            "its evaluation has no duckdb_match entry",
        )
    return decision


def _plan_files(iid: Any, evaluation: Any, answer: Any) -> Plan:
    """answer_type 'files': the CSV tables_match runs with the evaluation object's parameters, whatever its func."""
    if not isinstance(evaluation, dict):
        return _crash("TypeError (answer_type 'files' reads one evaluation object, not a list)")
    params = evaluation.get("parameters")
    if not isinstance(params, dict) or "gold" not in params:
        return _crash("KeyError or TypeError (answer_type 'files' needs parameters with a gold)")
    golds, answers = params["gold"], answer
    for items in (golds, answers):
        if not isinstance(items, (str, list)) or any(_join("", iid, x) is None for x in items):
            return _crash(f"TypeError (answer_type 'files' joins {items!r} to paths)")
    unknown = sorted(set(params) - TABLES_MATCH_PARAMETERS)
    if unknown:
        return _crash(f"TypeError (answer_type 'files' calls the CSV tables_match, which rejects {', '.join(unknown)})")
    return Plan(NOT_MIRRORED, "answer_type 'files' (the CSV tables_match) is not mirrored")


@dataclass(frozen=True)
class DuckdbCall:
    """A duckdb_match call resolved against the gold's table list: a spec to grade, or a given score."""

    spec: GradingSpec | None
    official: int | None = None  # when spec is None and the score is known without the data
    reason: str = ""
    task_problem: str = ""
    mirrored: bool = True


def resolve_call(params: dict[str, Any], gold_tables: Callable[[], list[str]]) -> DuckdbCall:
    """Turn duckdb_match parameters into a grading spec the way the official function reads them; pure
    but for ``gold_tables`` (``SHOW TABLES`` on the gold), called only when condition_tabs is absent."""
    unknown = sorted(set(params) - DUCKDB_PARAMETERS)
    if unknown:
        why = f"duckdb_match rejects parameter(s) {', '.join(unknown)}: evaluate.py scores 0"
        return DuckdbCall(None, 0, why, why)
    tabs = params.get("condition_tabs")
    if tabs is None:
        tabs = gold_tables()
    if not isinstance(tabs, list) or not all(isinstance(t, str) for t in tabs):
        return DuckdbCall(
            None, reason=f"condition_tabs {tabs!r} is not a list of table names: not mirrored", mirrored=False
        )
    odd = [t for t in tabs if not is_plain_identifier(t)]
    if odd:
        return DuckdbCall(None, reason=f"table name {odd[0]!r} is not a plain identifier: not mirrored", mirrored=False)
    n = len(tabs)
    if n == 0:
        why = "no table to grade: evaluate.py passes every submission"
        return DuckdbCall(None, 1, why, why)
    orders = params.get("ignore_orders")
    cols = params.get("condition_cols")
    for name, value in (("ignore_orders", orders), ("condition_cols", cols)):
        if value is None:
            continue
        if not isinstance(value, list):
            return DuckdbCall(None, reason=f"{name} {value!r} is not a list: not mirrored", mirrored=False)
        if len(value) != n:
            why = f"{name} has {len(value)} entries for {n} tables: evaluate.py scores 0"
            return DuckdbCall(None, 0, why, why)
    orders = [False] * n if orders is None else orders
    cols = [[] for _ in range(n)] if cols is None else cols
    for entry in cols:
        if not isinstance(entry, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in entry
        ):
            return DuckdbCall(
                None,
                reason=f"condition_cols entry {entry!r} is not a list of column positions: not mirrored",
                mirrored=False,
            )
    spec = GradingSpec(
        gold=str(params.get("gold", "")),
        condition_tabs=tuple(tabs),
        condition_cols=tuple(tuple(c) for c in cols),
        ignore_orders=tuple(bool(o) for o in orders),
    )
    return DuckdbCall(spec)


# ---------------------------------------------------------------------------------------------- scoring


def show_tables(gold: Path) -> list[str]:
    """The tables of a gold database as DuckDB's ``SHOW TABLES`` lists them: what ``evaluate.py`` grades when
    an instance names no ``condition_tabs`` (the Spider2 checkout reader resolves a call the same way)."""
    with open_source(gold, gold=True) as con:
        return [str(row[0]) for row in con.execute("SHOW TABLES").fetchall()]


def score_instance(
    record: dict[str, Any] | None,
    gold_record: dict[str, Any],
    results: Path,
    gold_dir: Path,
    alias: str | None = None,
    results_stopped: str = "",
) -> InstanceResult:
    """Score one instance; ``record`` is the merged line (None when the instance was not submitted)."""
    iid = str(gold_record["instance_id"])
    if record is None:
        why = "not submitted (no results line" + (f" read: {results_stopped}" if results_stopped else "") + ")"
        return InstanceResult(iid, NOT_SUBMITTED, None, 0, 0, why)
    answer_type = str(record.get("answer_type", ""))
    plan = plan_instance(record, str(results), str(gold_dir))
    task_problem = _replaced_gold_keys(record, gold_record) or plan.task_problem
    if plan.status != GRADED:
        return _planned_result(iid, plan, answer_type, task_problem)
    gold_file, gold_alias = _gold_file(iid, Path(plan.gold), alias)
    if not gold_file.is_file():
        return _missing_gold_result(iid, gold_file, answer_type, gold_alias)
    try:
        call = resolve_call(plan.parameters, lambda: show_tables(gold_file))
    except GoldFileError as exc:
        return _broken_gold_result(iid, exc, answer_type, gold_alias)
    if call.spec is None:
        return _given_result(iid, call, answer_type, task_problem, gold_alias)
    return _graded_result(iid, gold_file, Path(plan.pred), call.spec, answer_type, task_problem, gold_alias)


def _replaced_gold_keys(record: dict[str, Any], gold_record: dict[str, Any]) -> str:
    """The task problem of a results line that replaces keys of the gold's line ("" when it replaces none)."""
    overridden = sorted(k for k in record if k != "instance_id" and k in gold_record and record[k] != gold_record[k])
    return f"the results line replaces the gold's {', '.join(overridden)}" if overridden else ""


def _planned_result(iid: str, plan: Plan, answer_type: str, task_problem: str) -> InstanceResult:
    """An instance whose outcome the plan alone decides (fixed, not mirrored, or a crash of evaluate.py)."""
    sound = not task_problem and plan.status == FIXED
    return InstanceResult(
        iid,
        plan.status,
        plan.official,
        0,
        int(sound and plan.official == 1),
        plan.reason,
        answer_type,
        task_problem,
    )


def _gold_file(iid: str, gold_file: Path, alias: str | None) -> tuple[Path, GoldAlias | None]:
    """The gold file to read: the metadata's, or the caller's alias beside it (recorded with its sha256)."""
    if alias is None:
        return gold_file, None
    shipped = gold_file.parent / alias
    if not shipped.is_file():
        raise Spider2LayoutError(f"gold alias {iid}={alias}: {shipped} does not exist")
    return shipped, GoldAlias(iid, gold_file.name, alias, sha256_file(shipped))


def _missing_gold_result(iid: str, gold_file: Path, answer_type: str, gold_alias: GoldAlias | None) -> InstanceResult:
    """A graded instance without its gold file: evaluate.py scores 0; the hint names the files there are."""
    others = sorted(p.name for p in gold_file.parent.glob("*.duckdb")) if gold_file.parent.is_dir() else []
    hint = f"; found {', '.join(others)}: pass --gold-alias {iid}=<file> to use one" if others else ""
    why = f"gold file {gold_file.name} missing{hint}"
    return InstanceResult(iid, FIXED, 0, 0, 0, f"{why}: evaluate.py scores 0", answer_type, why, gold_alias)


def _broken_gold_result(
    iid: str, exc: GoldTableError, answer_type: str, gold_alias: GoldAlias | None
) -> InstanceResult:
    """A gold file or table that cannot be read: evaluate.py scores 0, and the instance is no sound task."""
    return InstanceResult(iid, FIXED, 0, 0, 0, f"gold: {exc}", answer_type, str(exc), gold_alias)


def _given_result(
    iid: str, call: DuckdbCall, answer_type: str, task_problem: str, gold_alias: GoldAlias | None
) -> InstanceResult:
    """A duckdb_match call whose score does not depend on the data (or that this project does not mirror)."""
    status = FIXED if call.mirrored else NOT_MIRRORED
    sound = not (task_problem or call.task_problem) and status == FIXED
    return InstanceResult(
        iid,
        status,
        call.official,
        0,
        int(sound and call.official == 1),
        call.reason,
        answer_type,
        task_problem or call.task_problem,
        gold_alias,
    )


def _graded_result(
    iid: str,
    gold_file: Path,
    pred: Path,
    spec: GradingSpec,
    answer_type: str,
    task_problem: str,
    gold_alias: GoldAlias | None,
) -> InstanceResult:
    """Grade the submitted database against the gold: the official and strict verdicts, 0 for an unsound task."""
    from dbt_harvest.core.scorer import score

    try:
        result = score(gold_file, pred, spec)
    except GoldTableError as exc:
        return _broken_gold_result(iid, exc, answer_type, gold_alias)
    official, strict = result.official.score, result.strict.score
    reason = result.official.reason or result.strict.reason
    sound = not task_problem
    return InstanceResult(
        iid,
        GRADED,
        official,
        strict if sound else 0,
        official if sound else 0,
        reason,
        answer_type,
        task_problem,
        gold_alias,
    )


def validate_aliases(aliases: dict[str, str], known: Iterable[str]) -> None:
    ids = set(known)
    for iid, name in aliases.items():
        if iid not in ids:
            raise Spider2LayoutError(f"gold alias names unknown instance {iid!r}")
        if not name or "/" in name or "\\" in name or name in {".", ".."}:
            raise Spider2LayoutError(f"gold alias {iid}={name!r} must be a plain file name in the gold folder")


@dataclass(frozen=True)
class Folder:
    """A results folder read as evaluate.py reads it, before any file is scored."""

    gold: dict[Any, dict[str, Any]]
    results: dict[Any, dict[str, Any]]
    results_stopped: str
    extra_results: tuple[str, ...]


def read_folders(results: Path, gold: Path) -> Folder:
    """Read both metadata files with the official rules (layout errors raise)."""
    gold_lines = read_gold_metadata(gold)
    path = check_jsonl_names(results, RESULTS_METADATA_NAME, "results")
    read = read_jsonl_text(_read_text(path, "results metadata"))
    lines = {_key(r, str(path)): r for r in read.records}
    stopped = f"{path.name} {read.stopped} (evaluate.py reads no further)" if read.stopped else ""
    extra = tuple(str(k) for k in lines if k not in gold_lines)
    return Folder(gold_lines, lines, stopped, extra)


def score_folder(
    results: Path, gold: Path, aliases: dict[str, str] | None = None, progress: Callable[[], None] | None = None
) -> Spider2Report:
    """Score every instance of ``<gold>/spider2_eval.jsonl`` against the results folder ``results``."""
    return score_read(read_folders(results, gold), results, gold, aliases, progress)


def score_read(
    folder: Folder,
    results: Path,
    gold: Path,
    aliases: dict[str, str] | None = None,
    progress: Callable[[], None] | None = None,
) -> Spider2Report:
    """Score the instances of folders already read by :func:`read_folders` (``progress`` is called after each)."""
    aliases = dict(aliases or {})
    validate_aliases(aliases, (str(k) for k in folder.gold))
    rows = []
    for iid, gold_record in folder.gold.items():
        line = folder.results.get(iid)
        merged = {**gold_record, **line} if line is not None else None
        rows.append(score_instance(merged, gold_record, results, gold, aliases.get(str(iid)), folder.results_stopped))
        if progress is not None:
            progress()
    return Spider2Report(tuple(rows), folder.extra_results, folder.results_stopped)

"""Completion tasks: one documented model's file removed, to be written back from its contract.

A completion shard decides one model of one pin (``ShardJob.kind == "completion"``), through the same
driver as repair shards (plan, executors, reports, markers, budget, lock). Admission is as strict as a
repair's:

1. ``documented``: the model's contract can state what it must hold (:mod:`harvester.mint.contract`).
2. ``graded``: its table is gradable and the contract names at least one stable column of it (the graded
   columns are the documented ones; a generated id only when its recipe is documented).
3. ``missing_scores_zero``: without the file the project does not build (a model, test or snapshot reads
   the model: dbt's parse fails) or the table is absent (the scorer's 0). Decided from the manifest here;
   ``harvest tasks verify`` checks it on a fresh sandboxed build.
4. ``informative_wrong_completion``: a plausible wrong completion exists: a mutant of the original model
   (the mutators' "looks right, wrong business rule": an inner join for a left one, the other side of a
   filter, a count of all rows for a distinct count, ...) that builds, passes every dbt test of the project
   and scores 0 under the completion's grading. Up to ``MAX_WRONG_COMPLETIONS`` are kept. The mutants are
   tried in the order the pin's repair mint already screened them (its reports: confirmed mutants first),
   so a pin minted for repairs screens nothing twice.
5. ``statement_leaks``: the instruction quotes no line of the model's SQL.

Two gates make the task one a careful engineer can solve (the statement determines what is graded):

- ``unstable_gold``: only columns whose values survive the model's perturbed rebuilds are graded
  (``harvester.mint.stability``, applied to the pin when a shard opens it); a model with no documented
  stable column left is refused.
- ``underdetermined``: the statement states facts about the expected table next to the documentation
  (``core.statement_facts``: row count, grain, types and nulls, boundary example rows, accepted values),
  read from the gold, never the SQL; every informative wrong completion must contradict at least one of
  them on its own build, else the task is refused. The record keeps the documentation-only statement
  (``documentation_statement``) beside the full one.

The original SQL scores 1 by construction (gold is the pin's own build of it); ``tasks verify`` re-checks
that too.

"Create these tables": once a pin's single completions are decided, one pairs shard per pin
(``ShardJob.kind == "completion-pairs"``, run in the mint's last round) derives, for each kept completion of
a model M and each of up to ``MAX_PARENTS`` model parents P of M that could be a completion themselves
(documented, graded), the task that removes both files. It needs no build: its wrong completions are M's
confirmed ones with P written back as it was (they build, pass every test and score 0 on M's table, so on
the pair's grading), and without both files the project fails as it fails without M.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.pin import Pin, pin_path, read_pin
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.statement_facts import TableFacts, contradictions
from dbt_harvest.core.task_record import (
    COMPLETE_OPERATOR,
    LocalChecks,
    TaskRecord,
    WrongRepairNote,
    task_from_dict,
    task_id,
)
from dbt_harvest.harvester.gold import gold_path
from dbt_harvest.harvester.grading.verdict import grade_build
from dbt_harvest.harvester.mint.candidates import Candidate, model_candidates, model_file, why_not_mutable
from dbt_harvest.harvester.mint.checks import Rejected
from dbt_harvest.harvester.mint.confirm import BuildContext, Trial, mutant_builds
from dbt_harvest.harvester.mint.contract import (
    Contract,
    completion_statement,
    contract_of,
    graded_columns,
    why_not_completable,
)
from dbt_harvest.harvester.mint.domain import gold_values
from dbt_harvest.harvester.mint.engine import Engine
from dbt_harvest.harvester.mint.facts import facts_of, read_file_table
from dbt_harvest.harvester.mint.lineage import ModelNode, descendants
from dbt_harvest.harvester.mint.local_checks import Suite, suite
from dbt_harvest.harvester.mint.screen import screen
from dbt_harvest.harvester.mint.shard import (
    CandidateReport,
    ShardJob,
    ShardResult,
    catalog_of,
    open_pin,
    shard_scratch,
    warm_builder,
)
from dbt_harvest.harvester.mint.variants import VariantBuilder
from dbt_harvest.harvester.sandbox import Limits, safe_fs
from dbt_harvest.harvester.sandbox.inside.harvest_names import graded_name
from dbt_harvest.harvester.state import BuiltState
from dbt_harvest.harvester.workspace import template

FAMILY = "completion"
#: the version of the completion gates (stable gold, the stated facts, determinedness): part of every
#: completion shard's key, so a change re-decides the shards a finished mint would skip
GATES_VERSION = 1
EFFECT = "missing_model"
MAX_WRONG_COMPLETIONS = 2
MAX_TRIES = 6  # mutant builds per model at most
MAX_PARENTS = 2  # pairs per kept completion: a model and one of its first parents (by name)
#: screening outcomes (of this run, or the pin's repair reports) whose mutant may be a wrong completion: it
#: changed an output without wrecking it. Whether a wrong REPAIR of it exists, whether it did what its
#: operator tagged (rows vs values) and whether the repair's grading saw it do not matter here: the build
#: and the completion's own grading decide
_SCREEN_OK = frozenset({"", "no_wrong_repair", "effect_mismatch", "invisible"})
#: confirmation reasons of the repair mint that a completion does not care about (its mutant built and
#: scored 0: the rules after that are about repairs and statements)
_CONFIRM_OK = frozenset(
    {
        "",
        "duplicate",
        "duplicate_statement",
        "statement_false",
        "statement_leaks",
        "repair_build_fails",
        "repair_fails",
        "repair_not_minimal",
        "no_wrong_repair",
    }
)


def completion_key(file: str, original: str) -> str:
    """The report key of a model's completion shard (one decision per model and file text)."""
    return hashlib.sha256(f"completion\0{file}\0{original}".encode()).hexdigest()[:16]


def completion_spec(pin: Pin, node: ModelNode, contract: Contract) -> GradingSpec | None:
    """The grading of a completion: the model's own table, on the columns its contract names."""
    record = next((t for t in pin.gradable_tables if t.name == node.table), None)
    graded = graded_name(node.table) if record is not None else None
    if record is None or graded is None:
        return None
    cols = graded_columns(
        contract, tuple(c.name for c in record.columns), frozenset(record.stable_positions), node.raw_code
    )
    if not cols:
        return None
    return GradingSpec(
        gold=f"{pin.gold_sha256}.duckdb", condition_tabs=(graded,), condition_cols=(cols,), ignore_orders=(True,)
    )


def table_facts(pin: Pin, node: ModelNode, spec: GradingSpec, contract: Contract) -> TableFacts:
    """The facts a statement states about ``node``'s graded table, read from the pin's gold (its graded
    columns: the first table of ``spec``)."""
    table = spec.condition_tabs[0]
    gold = read_file_table(gold_path(pin.gold_sha256), table)
    if gold is None:
        raise ValueError(f"the gold of {pin.id} has no table {table}")
    record = next(t for t in pin.gradable_tables if t.name == node.table)
    names = [record.columns[i].name for i in spec.condition_cols[0]]
    return facts_of(gold, table, node.name, names, contract)


def _moved_by_perturbation(job: ShardJob, pin: Pin, node: ModelNode, contract: Contract) -> str:
    """The documented columns that would be graded but for the perturbed rebuilds ('' when none)."""
    committed = read_pin(pin_path(job.pin_id, Path(job.pins)))
    if completion_spec(committed, node, contract) is None:
        return ""
    now = {c.lower() for t in pin.tables if t.name == node.table for c in t.unstable_columns}
    before = {c.lower() for t in committed.tables if t.name == node.table for c in t.unstable_columns}
    documented = {c.name.lower() for c in contract.columns}
    moved = sorted((now - before) & documented) or ["every column (its rebuild failed)"]
    return ", ".join(moved)


def missing_breaks_parse(manifest: dict, uid: str, *more: str) -> bool:
    """Whether another model, snapshot or seed of the project reads ``uid`` (or one of ``more``, removed with
    it): without their files ``dbt parse`` fails on the dangling ``ref()``; otherwise the project builds and
    the models' tables are simply absent. A data test does not count: dbt only warns about a test whose
    model is gone and leaves it out (measured: 19 verified tasks, 9 whose models are read by a model fail
    to parse, the 10 others build without the file although 6 of them have tests on it)."""
    gone = {uid, *more}
    return any(
        gone & set((node.get("depends_on") or {}).get("nodes") or ())
        for other, node in (manifest.get("nodes") or {}).items()
        if other not in gone and node.get("resource_type") != "test"
    )


def leaked_line(statement: str, sql: str, min_chars: int = 24) -> str:
    """A line of the model's SQL (at least ``min_chars`` long) that the statement quotes, else ''."""
    flat = " ".join(statement.split()).lower()
    for line in sql.splitlines():
        text = " ".join(line.split()).lower()
        if len(text) >= min_chars and text in flat:
            return line.strip()
    return ""


def _rank(report: dict | None) -> int | None:
    """Where a candidate stands in the order wrong completions are tried (None: known to be no use)."""
    if report is None:
        return 3  # never screened (the repair shard stopped at its cap): screened here
    if report.get("stage") == "confirm":
        if report.get("kept"):
            return 0
        return 1 if report.get("reason", "") in _CONFIRM_OK else None
    return 2 if report.get("reason", "") in _SCREEN_OK else None


def completion_report(
    key: str,
    pin: Pin,
    model: str,
    file: str,
    kept: bool,
    reason: str,
    detail: str,
    *,
    timings: dict[str, float] | None = None,
    task_id: str = "",
    silent: bool | None = None,
    local_tests: int | None = None,
    informative: bool | None = None,
) -> CandidateReport:
    """The one report of a completion decision (a confirmation-stage report of family ``completion``)."""
    return CandidateReport(
        key,
        pin.id,
        model,
        file,
        COMPLETE_OPERATOR,
        FAMILY,
        EFFECT,
        "confirm",
        kept,
        reason,
        detail,
        task_id=task_id,
        silent=silent,
        timings=dict(timings or {}),
        local_tests=local_tests,
        informative=informative,
    )


def run_completion_shard(job: ShardJob) -> ShardResult:
    """Decide the completion task of ``job.model``: one report, and the task when it is kept."""
    pin, state, nodes = open_pin(job)
    node = nodes[job.model]
    file = model_file(node, pin)
    if why_not_mutable(node, pin) or file is None:
        return ShardResult((), ())
    tree = template(pin)
    original = (tree / file).read_text(encoding="utf-8")
    shard = _CompletionShard(job, pin, state, nodes, node, tree, file, original, time.perf_counter())
    # what this decision withdraws when it keeps nothing: the task an earlier decision of the same model kept
    # (its id depends on the removed file only), so a re-mint under stricter gates leaves no stale task
    withdrawn = (
        task_id(pin.id.split("@", 1)[0], pin.commit, COMPLETE_OPERATOR, file, make_patch(file, original, None)),
    )
    admitted = shard.admit()
    if isinstance(admitted, CandidateReport):
        return ShardResult((admitted,), (), withdrawn=withdrawn)
    wrong, last = shard.wrong_completions(admitted)
    if not wrong and not job.allow_weak:
        return ShardResult((shard.report(False, "no_wrong_completion", last),), (), withdrawn=withdrawn)
    agreeing = [c for c in wrong if not shard.contradicted.get(c.key)]
    if agreeing:
        detail = (
            f"{agreeing[0].mutation.operator} builds, passes the tests and scores 0, yet agrees with every stated fact"
        )
        return ShardResult((shard.report(False, "underdetermined", detail),), (), withdrawn=withdrawn)
    record = shard.record(admitted, wrong)
    kept = shard.report(
        True, "", "", task_id=record.instance_id, silent=False, local_tests=record.local_tests, informative=bool(wrong)
    )
    return ShardResult((kept,), (record,))


@dataclass(frozen=True)
class _Admitted:
    """What a model that passed the completion's admission checks (1-3 and 5) is decided with."""

    spec: GradingSpec
    tests: Suite
    covering: tuple[str, ...]  # the dbt tests over the model and its descendants
    statement: str  # the full statement: the documentation, then the facts
    documentation: str  # the documentation alone
    facts: TableFacts


@dataclass(frozen=True)
class _CompletionShard:
    """One model's completion shard: its pin, its file as committed, and when the decision started."""

    job: ShardJob
    pin: Pin
    state: BuiltState
    nodes: dict[str, ModelNode]
    node: ModelNode
    tree: Path
    file: str
    original: str
    started: float  # perf_counter at the start: the report's confirm timing
    # what each wrong completion's build contradicts of the stated facts (by candidate key), filled in as
    # they are found
    contradicted: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def report(
        self,
        kept: bool,
        reason: str,
        detail: str,
        *,
        task_id: str = "",
        silent: bool | None = None,
        local_tests: int | None = None,
        informative: bool | None = None,
    ) -> CandidateReport:
        """The shard's one report, timed from the start of the decision (a kept task's figures with it)."""
        return completion_report(
            completion_key(self.file, self.original),
            self.pin,
            self.job.model,
            self.file,
            kept,
            reason,
            detail,
            timings={"confirm": round(time.perf_counter() - self.started, 3)},
            task_id=task_id,
            silent=silent,
            local_tests=local_tests,
            informative=informative,
        )

    def admit(self) -> _Admitted | CandidateReport:
        """The model's grading and statement, or the report that rejects it (undocumented, not graded, leaks)."""
        pin, model = self.pin, self.job.model
        contract = contract_of(self.state.manifest, self.nodes, model, self.file, pin.known_failing_tests)
        why = why_not_completable(contract)
        if why:
            return self.report(False, why, "the project does not document what this model must hold")
        spec = completion_spec(pin, self.node, contract)
        if spec is None:
            moved = _moved_by_perturbation(self.job, self.pin, self.node, contract)
            if moved:
                return self.report(False, "unstable_gold", f"its documented columns move when rebuilt: {moved}")
            return self.report(False, "not_graded", "no stable column of its table is documented")
        tests = suite(self.state.manifest, pin.known_failing_tests)
        covering = tests.covering([model, *descendants(self.nodes, model)])
        facts = table_facts(pin, self.node, spec, contract)
        documentation = completion_statement(contract, tested=bool(covering))
        statement = completion_statement(contract, tested=bool(covering), facts=(facts,))
        leak = leaked_line(statement, self.original)
        if leak:
            return self.report(False, "statement_leaks", f"the statement quotes the SQL: {leak[:80]}")
        return _Admitted(spec, tests, covering, statement, documentation, facts)

    def ranked_mutants(self, gold: Path) -> list[tuple[int, int, Candidate]]:
        """The model's mutants worth trying as wrong completions, in the order they are tried (``_rank``, then
        the candidates' own order), each with its rank."""
        from dbt_harvest.harvester.mint.pipeline import load_reports

        prior = {str(r.get("key")): r for r in load_reports(self.pin.id)}
        job = self.job
        ranked: list[tuple[int, int, Candidate]] = []
        cands = model_candidates(self.pin, self.node, self.tree, job.families, job.seed, values=gold_values(gold))
        for i, cand in enumerate(cands):
            rank = _rank(prior.get(cand.key))
            if rank is not None:
                ranked.append((rank, i, cand))
        ranked.sort(key=lambda item: item[:2])
        return ranked

    def wrong_completions(self, admitted: _Admitted) -> tuple[list[Candidate], str]:
        """Up to ``MAX_WRONG_COMPLETIONS`` mutants that build, pass every dbt test and score 0 on the
        completion's grading (``MAX_TRIES`` builds at most), and the last reason a mutant was not one."""
        gold = gold_path(self.pin.gold_sha256)
        ranked = self.ranked_mutants(gold)
        trials = _MutantTrials(self, gold, admitted, shard_scratch(self.job, "complete-"))
        wrong: list[Candidate] = []
        last = "no mutant of the model changes a documented column"
        try:
            for rank, _, cand in ranked:
                if len(wrong) >= MAX_WRONG_COMPLETIONS or trials.tries >= MAX_TRIES:
                    break
                if rank == 3 and not trials.screens_ok(cand):  # not screened by the repair mint: screened now
                    continue
                why_not = trials.why_not_wrong(cand)
                if why_not:
                    last = why_not
                else:
                    wrong.append(cand)
        finally:
            trials.close()
        return wrong, last

    def record(self, admitted: _Admitted, wrong: list[Candidate]) -> TaskRecord:
        """The completion task: the file removed, written back by the fix, ``wrong`` the wrong completions."""
        pin, job, file, original = self.pin, self.job, self.file, self.original
        broken = missing_breaks_parse(self.state.manifest, job.model)
        checks = LocalChecks(builds=not broken, tests_total=0, tests_failed=0, covering_tests=admitted.covering)
        broken_patch = make_patch(file, original, None)
        return TaskRecord(
            instance_id=task_id(pin.id.split("@", 1)[0], pin.commit, COMPLETE_OPERATOR, file, broken_patch),
            pin=pin.id,
            repo=pin.repo,
            base_commit=pin.commit,
            project_dir=pin.project_dir,
            split=job.split,
            split_group=job.split_group,
            family=FAMILY,
            operator=COMPLETE_OPERATOR,
            effect=EFFECT,
            file=file,
            broken_patch=broken_patch,
            fix_patch=make_patch(file, None, original),
            wrong_repair_patches=tuple(make_patch(file, None, c.broken) for c in wrong),
            grading=admitted.spec,
            problem_statement=admitted.statement,
            documentation_statement=admitted.documentation,
            facts=(admitted.facts,),
            local_checks=checks,
            gold_sha256=pin.gold_sha256,
            license=pin.license,
            versions=dict(pin.versions),
            weak=not wrong,
            wrong_repair_notes=tuple(WrongRepairNote(c.mutation.description) for c in wrong),
            database=pin.database,
            kind="completion",
            data_origin="synthesized" if pin.synthesis_sha256 else "",
            dialect=pin.dialect if pin.port_sha256 else "",
        )


@dataclass
class _MutantTrials:
    """Building a model's mutants as candidate wrong completions: the screening engine and warm builder are
    opened on first use and closed with the scratch folder."""

    shard: _CompletionShard
    gold: Path
    admitted: _Admitted
    scratch: Path
    engine: Engine | None = None
    builder: VariantBuilder | None = None
    tries: int = 0

    def screens_ok(self, cand: Candidate) -> bool:
        """Screen a mutant the repair mint did not: whether it changed an output without wrecking it."""
        shard = self.shard
        if self.engine is None:
            self.engine = Engine(shard.state.database, catalog_of(shard.nodes), self.scratch / "engine")
        outcome = screen(self.engine, shard.pin, shard.nodes, cand, self.gold, self.admitted.tests)
        return outcome.reason in _SCREEN_OK

    def why_not_wrong(self, cand: Candidate) -> str:
        """Build the mutant (one try): '' when it is a wrong completion, else why not, in one line."""
        shard, job = self.shard, self.shard.job
        limits = Limits(wall_s=job.wall_s)
        if self.builder is None and job.incremental:
            self.builder = warm_builder(shard.pin, job, shard.state.database, limits)
        self.tries += 1
        ctx = BuildContext(
            shard.pin,
            self.gold,
            self.scratch / cand.key,
            job.sandboxed,
            limits,
            base_db=shard.state.database if job.incremental else None,
            select=(f"{shard.node.name}+",),
            builder=self.builder,
        )
        try:
            built = mutant_builds(Trial(ctx, cand, shard.nodes, self.admitted.tests)).mutant
        except Rejected as rejected:
            return f"a mutant does not build ({rejected.detail[:80]})"
        assert built is not None  # mutant_builds sets it or raises
        if built.tests_failed:
            return f"{cand.mutation.operator}: {built.tests_failed} dbt test(s) fail"
        graded = grade_build(self.gold, built.gold_file, self.admitted.spec, built_ok=built.models_ok)
        if graded.official or graded.strict:
            return f"{cand.mutation.operator}: scores 1 on the documented columns"
        facts = self.admitted.facts
        found = read_file_table(built.gold_file, facts.table) if built.gold_file is not None else None
        shard.contradicted[cand.key] = contradictions(facts, found)
        return ""

    def close(self) -> None:
        """Hand the warm builder back, close the engine and remove the scratch folder."""
        if self.builder is not None:
            self.builder.forget()
        if self.engine is not None:
            self.engine.close()
        safe_fs.rmtree(self.scratch)


def pairs_key(singles: list[TaskRecord]) -> str:
    """The digest a pin's pairs shard is decided on: its kept single completions, by id and content."""
    text = "\n".join(sorted(f"{t.instance_id} {hashlib.sha256(t.to_json().encode()).hexdigest()}" for t in singles))
    return hashlib.sha256(f"pairs\0{text}".encode()).hexdigest()[:16]


def singles(records: list[TaskRecord]) -> list[TaskRecord]:
    """The completion tasks of one model each among a pin's kept ``records``, by id."""
    from dbt_harvest.core.patching import parse_patch

    return sorted(
        (r for r in records if r.kind == "completion" and len(parse_patch(r.broken_patch)) == 1),
        key=lambda r: r.instance_id,
    )


def run_pairs_shard(job: ShardJob) -> ShardResult:
    """Derive the pin's two-model completions from its kept single ones (module docstring); no build."""
    pin, state, nodes = open_pin(job)
    pairs = _Pairs(job, pin, state.manifest, nodes, template(pin), suite(state.manifest, pin.known_failing_tests))
    kept = {t.file: t for t in (task_from_dict(json.loads(text)) for text in job.records)}
    by_file = {model_file(n, pin): uid for uid, n in nodes.items() if model_file(n, pin)}
    reports: list[CandidateReport] = []
    tasks: list[TaskRecord] = []
    for file, single in sorted(kept.items()):
        uid = by_file.get(file)
        if uid is None:
            continue
        contract = contract_of(state.manifest, nodes, uid, file, pin.known_failing_tests)
        for parent in pairs.parents(uid)[:MAX_PARENTS]:
            report, record = pairs.pair(single, uid, contract, parent)
            reports.append(report)
            if record is not None:
                tasks.append(record)
    return ShardResult(tuple(reports), tuple(tasks))


@dataclass(frozen=True)
class _Parent:
    """A model parent that could be a completion itself: documented and graded."""

    uid: str
    file: str
    contract: Contract
    spec: GradingSpec


@dataclass(frozen=True)
class _Pairs:
    """A pin's pairs shard: what deriving its two-model completions reads."""

    job: ShardJob
    pin: Pin
    manifest: dict[str, Any]
    nodes: dict[str, ModelNode]
    tree: Path
    tests: Suite

    def parents(self, uid: str) -> list[_Parent]:
        """The model parents of ``uid`` (by id) whose files are here and that could be completions themselves."""
        found: list[_Parent] = []
        for parent in sorted(p for p in self.nodes[uid].parents if p in self.nodes):
            pnode = self.nodes[parent]
            pfile = model_file(pnode, self.pin)
            if why_not_mutable(pnode, self.pin) or pfile is None or not (self.tree / pfile).is_file():
                continue
            pcontract = contract_of(self.manifest, self.nodes, parent, pfile, self.pin.known_failing_tests)
            pspec = completion_spec(self.pin, pnode, pcontract)
            if why_not_completable(pcontract) or pspec is None:
                continue
            found.append(_Parent(parent, pfile, pcontract, pspec))
        return found

    def pair(
        self, single: TaskRecord, uid: str, contract: Contract, parent: _Parent
    ) -> tuple[CandidateReport, TaskRecord | None]:
        """The two-model completion of ``single``'s model ``uid`` and ``parent``: its report, and its task
        unless the statement quotes either file's SQL."""
        file = single.file
        original = (self.tree / file).read_text(encoding="utf-8")
        poriginal = (self.tree / parent.file).read_text(encoding="utf-8")
        key = completion_key(f"{parent.file}+{file}", poriginal + "\0" + original)
        covering = self.tests.covering([parent.uid, *descendants(self.nodes, parent.uid)])
        facts = (table_facts(self.pin, self.nodes[parent.uid], parent.spec, parent.contract), *single.facts)
        statement = completion_statement(contract, parent.contract, tested=bool(covering), facts=facts)
        leak = leaked_line(statement, original) or leaked_line(statement, poriginal)
        if leak:
            detail = f"the statement quotes the SQL: {leak[:80]}"
            return completion_report(key, self.pin, uid, file, False, "statement_leaks", detail), None
        documentation = completion_statement(contract, parent.contract, tested=bool(covering))
        statements = (statement, documentation, facts)
        record = self.pair_record(single, uid, parent, original, poriginal, covering, statements)
        informative = bool(record.wrong_repair_patches)
        report = completion_report(
            key,
            self.pin,
            uid,
            file,
            True,
            "",
            "",
            task_id=record.instance_id,
            silent=False,
            local_tests=record.local_tests,
            informative=informative,
        )
        return report, record

    def pair_record(
        self,
        single: TaskRecord,
        uid: str,
        parent: _Parent,
        original: str,
        poriginal: str,
        covering: tuple[str, ...],
        statements: tuple[str, str, tuple[TableFacts, ...]],
    ) -> TaskRecord:
        """The pair's task: ``single``'s with both files removed and written back, graded on both tables; its
        wrong completions are the single's with the parent written back as it was (they contradict the
        single's facts, which the pair states too); ``statements``: the full one, the documentation alone,
        and the facts."""
        from dbt_harvest.core.patching import apply_to_text, parse_patch

        file, pfile, job = single.file, parent.file, self.job
        wrong_texts = [apply_to_text("", parse_patch(p)[0]) for p in single.wrong_repair_patches]
        broken_patch = make_patch(pfile, poriginal, None) + make_patch(file, original, None)
        spec = GradingSpec(
            gold=single.grading.gold,
            condition_tabs=(*parent.spec.condition_tabs, *single.grading.condition_tabs),
            condition_cols=(*parent.spec.condition_cols, *single.grading.condition_cols),
            ignore_orders=(*parent.spec.ignore_orders, *single.grading.ignore_orders),
        )
        checks = LocalChecks(
            builds=not missing_breaks_parse(self.manifest, uid, parent.uid),
            tests_total=0,
            tests_failed=0,
            covering_tests=covering,
        )
        return replace(
            single,
            instance_id=task_id(self.pin.id.split("@", 1)[0], self.pin.commit, COMPLETE_OPERATOR, file, broken_patch),
            broken_patch=broken_patch,
            fix_patch=make_patch(pfile, None, poriginal) + make_patch(file, None, original),
            wrong_repair_patches=tuple(
                make_patch(pfile, None, poriginal) + make_patch(file, None, w) for w in wrong_texts
            ),
            grading=spec,
            problem_statement=statements[0],
            documentation_statement=statements[1],
            facts=statements[2],
            local_checks=checks,
            split=job.split,
            split_group=job.split_group,
        )


__all__ = [
    "EFFECT",
    "FAMILY",
    "MAX_PARENTS",
    "MAX_WRONG_COMPLETIONS",
    "completion_key",
    "completion_report",
    "completion_spec",
    "leaked_line",
    "missing_breaks_parse",
    "pairs_key",
    "run_completion_shard",
    "run_pairs_shard",
    "singles",
]

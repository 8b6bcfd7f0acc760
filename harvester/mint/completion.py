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
   (the mutators' "looks right, wrong business rule") that builds, passes every dbt test of the project
   and scores 0 under the completion's grading. Up to ``MAX_WRONG_COMPLETIONS`` are kept. The mutants are
   tried in the order the pin's repair mint already screened them (its reports: confirmed mutants first),
   so a pin minted for repairs screens nothing twice.
5. ``statement_leaks``: the instruction quotes no line of the model's SQL.

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
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.pin import Pin
from dbt_harvest.core.scorer.spec import GradingSpec
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
from dbt_harvest.harvester.mint.lineage import ModelNode, descendants
from dbt_harvest.harvester.mint.local_checks import suite
from dbt_harvest.harvester.mint.screen import screen
from dbt_harvest.harvester.sandbox import Limits, safe_fs
from dbt_harvest.harvester.sandbox.inside.harvest_names import graded_name
from dbt_harvest.harvester.workspace import template

FAMILY = "completion"
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


def run_completion_shard(job):  # type: ignore[no-untyped-def]  # ShardJob -> ShardResult (shard imports us)
    """Decide the completion task of ``job.model``: one report, and the task when it is kept."""
    from dbt_harvest.harvester.mint.shard import CandidateReport, ShardResult, open_pin, warm_builder

    pin, state, nodes = open_pin(job)
    node = nodes[job.model]
    file = model_file(node, pin)
    if why_not_mutable(node, pin) or file is None:
        return ShardResult((), ())
    tree = template(pin)
    original = (tree / file).read_text(encoding="utf-8")
    key = completion_key(file, original)
    started = time.perf_counter()

    def report(kept: bool, reason: str, detail: str, **kw: object) -> CandidateReport:
        timings = {"confirm": round(time.perf_counter() - started, 3)}
        return CandidateReport(
            key,
            pin.id,
            job.model,
            file,
            COMPLETE_OPERATOR,
            FAMILY,
            EFFECT,
            "confirm",
            kept,
            reason,
            detail,
            timings=timings,
            **kw,
        )  # type: ignore[arg-type]

    contract = contract_of(state.manifest, nodes, job.model, file, pin.known_failing_tests)
    why = why_not_completable(contract)
    if why:
        return ShardResult((report(False, why, "the project does not document what this model must hold"),), ())
    spec = completion_spec(pin, node, contract)
    if spec is None:
        return ShardResult((report(False, "not_graded", "no stable column of its table is documented"),), ())
    tests = suite(state.manifest, pin.known_failing_tests)
    covering = tests.covering([job.model, *descendants(nodes, job.model)])
    statement = completion_statement(contract, tested=bool(covering))
    leak = leaked_line(statement, original)
    if leak:
        return ShardResult((report(False, "statement_leaks", f"the documentation quotes the SQL: {leak[:80]}"),), ())
    gold = gold_path(pin.gold_sha256)
    from dbt_harvest.harvester.mint.pipeline import load_reports

    prior = {str(r.get("key")): r for r in load_reports(pin.id)}
    ranked: list[tuple[int, int, Candidate]] = []
    for i, cand in enumerate(model_candidates(pin, node, tree, job.families, job.seed, values=gold_values(gold))):
        rank = _rank(prior.get(cand.key))
        if rank is not None:
            ranked.append((rank, i, cand))
    ranked.sort(key=lambda item: item[:2])
    scratch = Path(
        tempfile.mkdtemp(prefix="complete-", dir=Path(job.home) / "tmp" if (Path(job.home) / "tmp").is_dir() else None)
    )
    catalog = next((n.relation.split(".")[0].strip('"') for n in nodes.values() if n.relation), "build")
    engine: Engine | None = None
    builder = None
    limits = Limits(wall_s=job.wall_s)
    wrong: list[Candidate] = []
    tries = 0
    last = "no mutant of the model changes a documented column"
    try:
        for rank, _, cand in ranked:
            if len(wrong) >= MAX_WRONG_COMPLETIONS or tries >= MAX_TRIES:
                break
            if rank == 3:  # not screened by the repair mint: screen it now
                if engine is None:
                    engine = Engine(state.database, catalog, scratch / "engine")
                outcome = screen(engine, pin, nodes, cand, gold, tests)
                if outcome.reason not in _SCREEN_OK:
                    continue
            if builder is None and job.incremental:
                builder = warm_builder(pin, job, state.database, limits)
            tries += 1
            ctx = BuildContext(
                pin,
                gold,
                scratch / cand.key,
                job.sandboxed,
                limits,
                base_db=state.database if job.incremental else None,
                select=(f"{node.name}+",),
                builder=builder,
            )
            try:
                built = mutant_builds(Trial(ctx, cand, nodes, tests)).mutant
            except Rejected as rejected:
                last = f"a mutant does not build ({rejected.detail[:80]})"
                continue
            assert built is not None
            if built.tests_failed:
                last = f"{cand.mutation.operator}: {built.tests_failed} dbt test(s) fail"
                continue
            graded = grade_build(gold, built.gold_file, spec, built_ok=built.models_ok)
            if graded.official or graded.strict:
                last = f"{cand.mutation.operator}: scores 1 on the documented columns"
                continue
            wrong.append(cand)
    finally:
        if builder is not None:
            builder.forget()
        if engine is not None:
            engine.close()
        safe_fs.rmtree(scratch)
    if not wrong and not job.allow_weak:
        return ShardResult((report(False, "no_wrong_completion", last),), ())
    broken = missing_breaks_parse(state.manifest, job.model)
    checks = LocalChecks(builds=not broken, tests_total=0, tests_failed=0, covering_tests=covering)
    broken_patch = make_patch(file, original, None)
    record = TaskRecord(
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
        grading=spec,
        problem_statement=statement,
        local_checks=checks,
        gold_sha256=pin.gold_sha256,
        license=pin.license,
        versions=dict(pin.versions),
        weak=not wrong,
        wrong_repair_notes=tuple(WrongRepairNote(c.mutation.description) for c in wrong),
        database=pin.database,
        kind="completion",
    )
    kept = report(
        True, "", "", task_id=record.instance_id, silent=False, local_tests=record.local_tests, informative=bool(wrong)
    )
    return ShardResult((kept,), (record,))


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


def run_pairs_shard(job):  # type: ignore[no-untyped-def]  # ShardJob -> ShardResult
    """Derive the pin's two-model completions from its kept single ones (module docstring); no build."""
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.harvester.mint.shard import CandidateReport, ShardResult, open_pin

    pin, state, nodes = open_pin(job)
    tree = template(pin)
    tests = suite(state.manifest, pin.known_failing_tests)
    kept = {t.file: t for t in (task_from_dict(json.loads(text)) for text in job.records)}
    by_file = {model_file(n, pin): uid for uid, n in nodes.items() if model_file(n, pin)}
    reports: list[CandidateReport] = []
    tasks: list[TaskRecord] = []
    for file, single in sorted(kept.items()):
        uid = by_file.get(file)
        if uid is None:
            continue
        node = nodes[uid]
        contract = contract_of(state.manifest, nodes, uid, file, pin.known_failing_tests)
        parents = []
        for parent in sorted(p for p in node.parents if p in nodes):
            pnode = nodes[parent]
            pfile = model_file(pnode, pin)
            if why_not_mutable(pnode, pin) or pfile is None or not (tree / pfile).is_file():
                continue
            pcontract = contract_of(state.manifest, nodes, parent, pfile, pin.known_failing_tests)
            pspec = completion_spec(pin, pnode, pcontract)
            if why_not_completable(pcontract) or pspec is None:
                continue
            parents.append((parent, pfile, pcontract, pspec))
        for parent, pfile, pcontract, pspec in parents[:MAX_PARENTS]:
            original, poriginal = (tree / file).read_text(encoding="utf-8"), (tree / pfile).read_text(encoding="utf-8")
            key = completion_key(f"{pfile}+{file}", poriginal + "\0" + original)
            covering = tests.covering([parent, *descendants(nodes, parent)])
            statement = completion_statement(contract, pcontract, tested=bool(covering))
            leak = leaked_line(statement, original) or leaked_line(statement, poriginal)
            if leak:
                reports.append(
                    CandidateReport(
                        key,
                        pin.id,
                        uid,
                        file,
                        COMPLETE_OPERATOR,
                        FAMILY,
                        EFFECT,
                        "confirm",
                        False,
                        "statement_leaks",
                        f"the documentation quotes the SQL: {leak[:80]}",
                    )
                )
                continue
            wrong_texts = [apply_to_text("", parse_patch(p)[0]) for p in single.wrong_repair_patches]
            broken_patch = make_patch(pfile, poriginal, None) + make_patch(file, original, None)
            spec = GradingSpec(
                gold=single.grading.gold,
                condition_tabs=(*pspec.condition_tabs, *single.grading.condition_tabs),
                condition_cols=(*pspec.condition_cols, *single.grading.condition_cols),
                ignore_orders=(*pspec.ignore_orders, *single.grading.ignore_orders),
            )
            checks = LocalChecks(
                builds=not missing_breaks_parse(state.manifest, uid, parent),
                tests_total=0,
                tests_failed=0,
                covering_tests=covering,
            )
            record = replace(
                single,
                instance_id=task_id(pin.id.split("@", 1)[0], pin.commit, COMPLETE_OPERATOR, file, broken_patch),
                broken_patch=broken_patch,
                fix_patch=make_patch(pfile, None, poriginal) + make_patch(file, None, original),
                wrong_repair_patches=tuple(
                    make_patch(pfile, None, poriginal) + make_patch(file, None, w) for w in wrong_texts
                ),
                grading=spec,
                problem_statement=statement,
                local_checks=checks,
                split=job.split,
                split_group=job.split_group,
            )
            tasks.append(record)
            reports.append(
                CandidateReport(
                    key,
                    pin.id,
                    uid,
                    file,
                    COMPLETE_OPERATOR,
                    FAMILY,
                    EFFECT,
                    "confirm",
                    True,
                    "",
                    "",
                    task_id=record.instance_id,
                    silent=False,
                    local_tests=record.local_tests,
                    informative=bool(wrong_texts),
                )
            )
    return ShardResult(tuple(reports), tuple(tasks))


__all__ = [
    "EFFECT",
    "FAMILY",
    "MAX_PARENTS",
    "MAX_WRONG_COMPLETIONS",
    "completion_key",
    "completion_spec",
    "leaked_line",
    "missing_breaks_parse",
    "pairs_key",
    "run_completion_shard",
    "run_pairs_shard",
    "singles",
]

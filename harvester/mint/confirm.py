"""Stage 2, confirmation: real sandboxed dbt builds of the survivors of screening.

For one candidate, in fresh workspaces of the pin (or the pin's warm variant builder), the rules of
``CONFIRM_RULES`` run in that order and the first that says no is the rejection reason:

1. the mutant builds (its dbt tests are the local checks), and the dbt tests that cover the mutated
   lineage are recorded (none: the task is labelled, not dropped; its statement then names no test);
2. what the build shows (hooks included, not screening's prediction) passes the observation checks,
   and the graded tables and columns are chosen from it;
3. the mutant scores 0 under official and strict;
4. it is a new bug: no task of the pin kept so far has the same broken outputs;
5. the true repair (the inverse edit, applied to the broken file) builds and scores 1, in one hunk;
6. an informative wrong repair exists: it builds, passes every dbt test the true repair passes, scores
   0 against gold, and its graded output differs from the broken one under the official check (a wrong
   repair that changes nothing the grader sees proves nothing the broken project does not); what it
   fixes and what it leaves is measured;
7. the problem statement is written from the build's symptoms, leaks nothing, and every claim it makes
   holds on the built tables; no kept task of the pin has the same statement.

Each rule is a small function from ``Trial`` to ``Trial`` (raising ``Rejected``), so a candidate from
elsewhere (augmented data, a hand-made mutation) goes through exactly the same admission.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dbt_harvest.core.patching import apply_to_text, make_patch, parse_patch
from dbt_harvest.core.pin import Pin
from dbt_harvest.core.scorer import official
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import Claim, LocalChecks, WrongRepairNote
from dbt_harvest.harvester.build import BuildResult, build_workspace
from dbt_harvest.harvester.grading.verdict import grade_build
from dbt_harvest.harvester.mint.candidates import Candidate
from dbt_harvest.harvester.mint.checks import Rejected, check_observation, choose_grading, require
from dbt_harvest.harvester.mint.lineage import ModelNode, descendants
from dbt_harvest.harvester.mint.local_checks import Suite
from dbt_harvest.harvester.mint.observe import Observation, broken_signature, observe_build, repair_effect
from dbt_harvest.harvester.mint.statement import Symptom
from dbt_harvest.harvester.mint.variants import VariantBuilder
from dbt_harvest.harvester.sandbox import Limits, safe_fs
from dbt_harvest.harvester.workspace import fresh_workspace

MAX_WRONG_TRIES = 3


@dataclass(frozen=True)
class ConfirmOutcome:
    key: str
    ok: bool
    reason: str
    detail: str
    local_checks: LocalChecks | None = None
    broken_patch: str = ""
    fix_patch: str = ""
    wrong_patches: tuple[str, ...] = ()
    weak: bool = False
    timings: tuple[tuple[str, float], ...] = ()
    grading: GradingSpec | None = None  # chosen from the confirmed build
    effect: str = ""  # the effect on the mutated model's rows, as built
    statement: str = ""
    claims: tuple[Claim, ...] = ()
    wrong_notes: tuple[WrongRepairNote, ...] = ()
    signature: str = ""


@dataclass(frozen=True)
class BuildContext:
    """Where and how the variants of one candidate are built.

    With ``base_db`` (the pin's built database) each variant starts from a copy of it and rebuilds only
    ``select`` (the mutated model and its descendants, with their tests): the other relations are the
    pin's own, byte for byte. Without it every variant is a full seed + build.
    """

    pin: Pin
    gold: Path
    scratch: Path
    sandboxed: bool
    limits: Limits
    base_db: Path | None = None
    select: tuple[str, ...] = ()
    builder: VariantBuilder | None = None  # a warm sandbox for every variant (with base_db and select)


def build_variant(ctx: BuildContext, name: str, file: str, text: str) -> BuildResult:
    """The pin with ``file`` replaced by ``text``, built and captured: in the warm builder when there is
    one, else in a fresh workspace of its own."""
    if ctx.builder is not None and ctx.base_db is not None and ctx.select:
        return ctx.builder.build(name, file, text, ctx.select)
    workspace = ctx.scratch / name
    safe_fs.rmtree(workspace)
    fresh_workspace(ctx.pin, workspace)
    safe_fs.write_text(workspace, file, text)
    incremental = ctx.base_db is not None and bool(ctx.select)
    if incremental:
        shutil.copyfile(ctx.base_db, workspace / ctx.pin.db_file)  # type: ignore[arg-type]
    return build_workspace(
        workspace,
        ctx.pin.project_dir,
        _profile(workspace, ctx.pin),
        ctx.pin.profile_schema,
        ctx.pin.clock,
        sandboxed=ctx.sandboxed,
        limits=ctx.limits,
        log_path=ctx.scratch / f"{name}.log",
        select=ctx.select if incremental else (),
        seed=not incremental,
        exclude_tests=ctx.pin.excluded_tests,
        db_file=ctx.pin.db_file,
        toolchain=ctx.pin.toolchain,
    )


def _profile(workspace: Path, pin: Pin) -> str:
    from dbt_harvest.harvester.discovery import discover

    return discover(workspace, pin.project_dir).profile


def statement_digest(statement: str) -> str:
    """A short digest of a problem statement (what duplicate checks compare; the text stays private)."""
    return hashlib.sha256(" ".join(statement.split()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Seen:
    """What the pin's kept tasks already hold: broken-output signatures and statement digests."""

    signatures: frozenset[str] = frozenset()
    statements: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Trial:
    """One candidate going through confirmation; each rule fills in what it found."""

    ctx: BuildContext
    cand: Candidate
    nodes: dict[str, ModelNode]
    tests: Suite | None = None
    wrong_order: tuple[int, ...] | None = None
    allow_weak: bool = False
    writer: str | None = None
    seen: Seen = Seen()
    wrong_tries: int = MAX_WRONG_TRIES  # wrong repairs built at most
    mutant: BuildResult | None = None
    checks: LocalChecks | None = None
    observation: Observation | None = None
    spec: GradingSpec | None = None
    signature: str = ""
    repair: BuildResult | None = None
    wrong_patches: tuple[str, ...] = ()
    wrong_notes: tuple[WrongRepairNote, ...] = ()
    weak: bool = False
    symptoms: tuple[Symptom, ...] = ()
    statement: str = ""
    claims: tuple[Claim, ...] = ()
    timings: tuple[tuple[str, float], ...] = field(default=())

    @property
    def fix_patch(self) -> str:
        return make_patch(self.cand.file, self.cand.broken, self.cand.original)

    def timed(self, what: str, started: float, **changes: object) -> Trial:
        return replace(self, timings=(*self.timings, (what, time.perf_counter() - started)), **changes)  # type: ignore[arg-type]


def _captured(result: BuildResult) -> dict[str, tuple[int, str]]:
    return {t.name: (t.rows, t.fingerprint) for t in result.tables}


def mutant_builds(t: Trial) -> Trial:
    """1. The broken project builds; its dbt tests are the task's local checks."""
    started = time.perf_counter()
    mutant = build_variant(t.ctx, "mutant", t.cand.file, t.cand.broken)
    if not mutant.models_ok or mutant.gold_file is None:
        raise Rejected("mutant_build_fails", mutant.first_error)
    checks = LocalChecks(builds=True, tests_total=mutant.tests_total, tests_failed=mutant.tests_failed)
    return t.timed("mutant_build", started, mutant=mutant, checks=checks)


def mutant_observed(t: Trial) -> Trial:
    """2. What the build shows against gold passes the observation checks; the grading comes from it."""
    assert t.mutant is not None and t.mutant.gold_file is not None
    node = t.nodes[t.cand.model]
    obs = observe_build(t.ctx.pin, node.table, len(t.nodes), t.ctx.gold, t.mutant.gold_file, _captured(t.mutant))
    require(check_observation(obs, t.ctx.pin, t.cand.mutation.effect))
    return replace(t, observation=obs, spec=choose_grading(obs, t.ctx.pin, t.nodes))


def mutant_scores_zero(t: Trial) -> Trial:
    """3. The official and strict checks both score the broken project 0."""
    assert t.mutant is not None and t.spec is not None
    graded = grade_build(t.ctx.gold, t.mutant.gold_file, t.spec, built_ok=t.mutant.models_ok)
    if graded.official or graded.strict:
        raise Rejected("mutant_passes", f"official {graded.official} strict {graded.strict}")
    return t


def new_bug(t: Trial) -> Trial:
    """4. No task of the pin kept so far breaks its outputs the same way."""
    assert t.mutant is not None and t.mutant.gold_file is not None and t.observation is not None
    signature = broken_signature(t.ctx.pin, t.mutant.gold_file, t.observation)
    if signature in t.seen.signatures:
        raise Rejected("duplicate", f"the same broken outputs as a task already kept ({signature})")
    return replace(t, signature=signature)


def repair_restores(t: Trial) -> Trial:
    """5. The true repair builds, scores 1 under both checks, and is one hunk."""
    spec = t.spec
    assert spec is not None
    started = time.perf_counter()
    fix_patch = t.fix_patch
    repaired_text = apply_to_text(t.cand.broken, parse_patch(fix_patch)[0])  # the fix, applied to the broken file
    fixed = build_variant(t.ctx, "repair", t.cand.file, repaired_text)
    t = t.timed("repair_build", started, repair=fixed)
    if not fixed.models_ok or fixed.gold_file is None:
        raise Rejected("repair_build_fails", fixed.first_error)
    repaired = grade_build(t.ctx.gold, fixed.gold_file, spec, built_ok=fixed.models_ok)
    if not (repaired.official and repaired.strict):
        raise Rejected("repair_fails", repaired.reason)
    if sum(len(f.hunks) for f in parse_patch(fix_patch)) != 1 and t.cand.planted:
        # a planted edit is undone in one place; a fix mined from history is whatever its engineers wrote
        raise Rejected("repair_not_minimal", "the true repair is more than one hunk")
    return t


def informative_wrong_repair(t: Trial) -> Trial:
    """6. A wrong repair that builds, passes the dbt tests the repair passes, scores 0, and whose graded
    output differs from the broken one; what it fixes and leaves is measured on its build."""
    # bound once: ``t`` is replaced as builds are timed, and what the earlier rules found stays as it is
    spec, repair, mutant = t.spec, t.repair, t.mutant
    assert spec is not None and repair is not None and mutant is not None and mutant.gold_file is not None
    broken_gold = mutant.gold_file
    last = "no wrong repair offered"
    allowed_failures = set(repair.failed_tests)
    repairs = t.cand.mutation.wrong_repairs
    order = range(min(t.wrong_tries, len(repairs))) if t.wrong_order is None else t.wrong_order[: t.wrong_tries]
    for index in order:
        text = repairs[index].apply(t.cand.broken)
        started = time.perf_counter()
        result = build_variant(t.ctx, f"wrong{index}", t.cand.file, text)
        t = t.timed(f"wrong{index}_build", started)
        if not result.models_ok or result.gold_file is None:
            last = f"wrong repair {index} does not build"
            continue
        if not set(result.failed_tests) <= allowed_failures:
            last = f"wrong repair {index} fails dbt tests"
            continue
        if official(t.ctx.gold, result.gold_file, spec).passed:
            last = f"wrong repair {index} passes the official check"
            continue
        if official(broken_gold, result.gold_file, spec).passed:
            last = f"wrong repair {index} is not informative: its graded output matches the broken one"
            continue
        effect = repair_effect(t.ctx.pin, spec, t.ctx.gold, broken_gold, result.gold_file)
        note = WrongRepairNote(getattr(repairs[index], "intent", ""), effect.fixes, effect.leaves)
        return replace(t, wrong_patches=(make_patch(t.cand.file, t.cand.broken, text),), wrong_notes=(note,))
    if not t.allow_weak:
        raise Rejected("no_wrong_repair", last)
    return replace(t, weak=True)


def described(t: Trial) -> Trial:
    """7a. The problem statement, written from the confirmed build's symptoms; it must not leak the edit."""
    from dbt_harvest.core.closing import repair_closing
    from dbt_harvest.harvester.mint.claims import claims_of, symptoms_of, visible_symptoms
    from dbt_harvest.harvester.mint.statement import statement_for

    assert t.spec is not None and t.observation is not None and t.mutant is not None and t.mutant.gold_file is not None
    symptoms = tuple(
        visible_symptoms(
            t.ctx.pin, t.spec, symptoms_of(t.spec, t.observation, t.ctx.pin, t.nodes), t.ctx.gold, t.mutant.gold_file
        )
    )
    edit = t.cand.mutation.edit
    spans = [t.cand.original[edit.start : edit.end], edit.replacement]
    assert t.checks is not None
    try:
        statement = statement_for(list(symptoms), spans, t.writer, repair_closing(t.checks))
    except ValueError as exc:
        raise Rejected("statement_leaks", str(exc)) from None
    return replace(t, symptoms=symptoms, statement=statement, claims=claims_of(t.spec, symptoms))


def claims_hold(t: Trial) -> Trial:
    """7b. Every claim of the statement holds on the built tables (gold vs the broken build)."""
    from dbt_harvest.harvester.mint.claims import check_claims

    assert t.mutant is not None and t.mutant.gold_file is not None
    if not t.claims:
        raise Rejected("statement_false", "the statement claims nothing a data consumer could check")
    for check in check_claims(t.ctx.pin, t.claims, t.ctx.gold, t.mutant.gold_file):
        if not check.holds:
            raise Rejected(
                "statement_false", f"{check.claim.kind} {check.claim.table}.{check.claim.column}: {check.detail}"
            )
    return t


def new_statement(t: Trial) -> Trial:
    """7c. No kept task of the pin says the same thing."""
    if statement_digest(t.statement) in t.seen.statements:
        raise Rejected("duplicate_statement", "a task already kept has this problem statement word for word")
    return t


def covered(t: Trial) -> Trial:
    """1b. The dbt tests over the mutated model and its descendants (recorded; none is labelled, not fatal;
    the statement's closing names tests only when a test covers the lineage: ``core.closing``)."""
    assert t.checks is not None
    chain = [t.cand.model, *descendants(t.nodes, t.cand.model)]
    covering = t.tests.covering(chain) if t.tests is not None else ()
    return replace(t, checks=replace(t.checks, covering_tests=covering))


#: Confirmation, in order. Each rule takes the trial and returns it, or raises Rejected(reason, detail).
#: The statement rules need only the mutant's build, so they run before the repair and wrong-repair builds:
#: a duplicate or false statement (a third of the confirmations of some real packages) costs one build,
#: not three or four. The rules are independent checks, so the order decides only which reason a
#: candidate failing several is reported with, never what is kept.
CONFIRM_RULES: tuple[Callable[[Trial], Trial], ...] = (
    mutant_builds,
    covered,
    mutant_observed,
    mutant_scores_zero,
    new_bug,
    described,
    claims_hold,
    new_statement,
    repair_restores,
    informative_wrong_repair,
)


def confirm(
    ctx: BuildContext,
    cand: Candidate,
    spec: GradingSpec | None = None,
    *,
    allow_weak: bool = False,
    wrong_order: tuple[int, ...] | None = None,
    nodes: dict[str, ModelNode] | None = None,
    tests: Suite | None = None,
    writer: str | None = None,
    seen: Seen = Seen(),
    rules: tuple[Callable[[Trial], Trial], ...] = CONFIRM_RULES,
    wrong_tries: int = MAX_WRONG_TRIES,
) -> ConfirmOutcome:
    """Build and score the variants of one candidate through ``rules``; the first refusal is the rejection.

    ``spec`` (screening's prediction) is not used for the decision: the grading comes from the confirmed
    build. ``wrong_order`` (from screening) says which wrong repairs to build, in which order; by default
    the first ``MAX_WRONG_TRIES`` in their own order.
    """
    if nodes is None:
        from dbt_harvest.harvester.mint.lineage import models
        from dbt_harvest.harvester.state import load_state

        nodes = models(load_state(ctx.pin.id).manifest)
    if tests is None:
        from dbt_harvest.harvester.mint.local_checks import suite
        from dbt_harvest.harvester.state import load_state

        tests = suite(load_state(ctx.pin.id).manifest, ctx.pin.known_failing_tests)
    trial = Trial(ctx, cand, nodes, tests, wrong_order, allow_weak, writer, seen, wrong_tries)
    try:
        for rule in rules:
            trial = rule(trial)
    except Rejected as rejected:
        return ConfirmOutcome(
            cand.key,
            False,
            rejected.reason,
            rejected.detail,
            local_checks=trial.checks,
            timings=trial.timings,
            grading=trial.spec,
        )
    safe_fs.rmtree(ctx.scratch)
    assert trial.observation is not None
    return ConfirmOutcome(
        cand.key,
        True,
        "",
        "",
        local_checks=trial.checks,
        broken_patch=make_patch(cand.file, cand.original, cand.broken),
        fix_patch=trial.fix_patch,
        wrong_patches=trial.wrong_patches,
        weak=trial.weak,
        timings=trial.timings,
        grading=trial.spec,
        effect=trial.observation.effect,
        statement=trial.statement,
        claims=trial.claims,
        wrong_notes=trial.wrong_notes,
        signature=trial.signature,
    )

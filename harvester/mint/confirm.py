"""Stage 2, confirmation: real sandboxed dbt builds of the survivors of screening.

For one candidate, in fresh workspaces of the pin: the mutant builds and its dbt tests are the local
checks; the mutant scores 0 under official and strict; the true repair (the inverse edit, applied to
the broken file) scores 1; at least one wrong repair builds, passes every dbt test the true repair
passes, and scores 0 under official; the repair is one hunk and removing it leaves a 0. The checks
run in that order (``confirm``) and the first failure is the rejection reason.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from core.scorer import score
from core.scorer.spec import GradingSpec
from harvester.build import BuildResult, build_workspace
from harvester.mint.candidates import Candidate
from harvester.mint.variants import VariantBuilder
from core.patching import apply_to_text, make_patch, parse_patch
from core.pin import Pin
from harvester.sandbox import Limits, safe_fs
from harvester.state import DB_FILE
from core.task_record import LocalChecks
from harvester.workspace import fresh_workspace

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
        shutil.copyfile(ctx.base_db, workspace / DB_FILE)  # type: ignore[arg-type]
    return build_workspace(
        workspace, ctx.pin.project_dir, _profile(workspace, ctx.pin), ctx.pin.profile_schema, ctx.pin.clock,
        sandboxed=ctx.sandboxed, limits=ctx.limits, log_path=ctx.scratch / f"{name}.log",
        select=ctx.select if incremental else (), seed=not incremental,
    )


def _profile(workspace: Path, pin: Pin) -> str:
    from harvester.discovery import discover

    return discover(workspace, pin.project_dir).profile


def confirm(ctx: BuildContext, cand: Candidate, spec: GradingSpec, *, allow_weak: bool = False,
            wrong_order: tuple[int, ...] | None = None) -> ConfirmOutcome:
    """Build and score the variants of one candidate; the first failing check is the rejection.

    ``wrong_order`` (from screening) says which wrong repairs to build, in which order; by default the
    first ``MAX_WRONG_TRIES`` in their own order.
    """
    timings: list[tuple[str, float]] = []
    broken = cand.broken
    broken_patch = make_patch(cand.file, cand.original, broken)
    fix_patch = make_patch(cand.file, broken, cand.original)

    def reject(reason: str, detail: str, **kw: object) -> ConfirmOutcome:
        return ConfirmOutcome(cand.key, False, reason, detail, timings=tuple(timings), **kw)  # type: ignore[arg-type]

    clock = time.perf_counter()
    mutant = build_variant(ctx, "mutant", cand.file, broken)
    timings.append(("mutant_build", time.perf_counter() - clock))
    if not mutant.models_ok or mutant.gold_file is None:
        return reject("mutant_build_fails", mutant.first_error)
    checks = LocalChecks(builds=True, tests_total=mutant.tests_total, tests_failed=mutant.tests_failed)
    verdicts = score(ctx.gold, mutant.gold_file, spec)
    if verdicts.official.passed or verdicts.strict.passed:
        return reject("mutant_passes", f"official {verdicts.official.score} strict {verdicts.strict.score}")

    clock = time.perf_counter()
    repaired_text = apply_to_text(broken, parse_patch(fix_patch)[0])  # the fix, applied to the broken file
    fixed = build_variant(ctx, "repair", cand.file, repaired_text)
    timings.append(("repair_build", time.perf_counter() - clock))
    if not fixed.models_ok or fixed.gold_file is None:
        return reject("repair_build_fails", fixed.first_error)
    repaired = score(ctx.gold, fixed.gold_file, spec)
    if not (repaired.official.passed and repaired.strict.passed):
        return reject("repair_fails", repaired.official.reason or repaired.strict.reason)
    if sum(len(f.hunks) for f in parse_patch(fix_patch)) != 1:
        return reject("repair_not_minimal", "the true repair is more than one hunk")

    wrong: list[str] = []
    last = "no wrong repair offered"
    allowed_failures = set(fixed.failed_tests)
    repairs = cand.mutation.wrong_repairs
    order = range(min(MAX_WRONG_TRIES, len(repairs))) if wrong_order is None else wrong_order[:MAX_WRONG_TRIES]
    for index in order:
        text = repairs[index].apply(broken)
        clock = time.perf_counter()
        result = build_variant(ctx, f"wrong{index}", cand.file, text)
        timings.append((f"wrong{index}_build", time.perf_counter() - clock))
        if not result.models_ok or result.gold_file is None:
            last = f"wrong repair {index} does not build"
            continue
        if not set(result.failed_tests) <= allowed_failures:
            last = f"wrong repair {index} fails dbt tests"
            continue
        if score(ctx.gold, result.gold_file, spec).official.passed:
            last = f"wrong repair {index} passes the official check"
            continue
        wrong.append(make_patch(cand.file, broken, text))
        break
    if not wrong and not allow_weak:
        return reject("no_wrong_repair", last, local_checks=checks)
    safe_fs.rmtree(ctx.scratch)
    return ConfirmOutcome(
        cand.key, True, "", "", local_checks=checks, broken_patch=broken_patch, fix_patch=fix_patch,
        wrong_patches=tuple(wrong), weak=not wrong, timings=tuple(timings),
    )

"""`harvest tasks verify`: re-check kept tasks from their pins, independently of the mint.

Every build here is a full ``dbt seed`` + ``dbt build`` in a FRESH sandboxed workspace of the pin (no
warm child, no copy of the pin's built database, no screening engine), into a database file named
``VERIFY_DB_FILE``, another name than gold was built under. For each task:

- ``gold_matches``: the unmodified project's graded tables score 1 (official and strict) against gold:
  gold does not depend on the database's name, the clock or the build;
- ``broken_fails``: the broken project (the task's broken patch) builds and scores 0 (official and strict);
- ``repair_passes``: the true repair applied to the broken file builds and scores 1 (official and strict);
- ``wrong_repair``: the wrong repair builds, fails no dbt test the true repair passes, scores 0, and its
  graded output differs from the broken one under the official check (informative);
- ``claims``: every claim the task records for its statement holds on the fresh broken build;
- ``distinct``: no other verified task of the same pin has the same broken outputs or statement;
- ``stable_gold``: no graded column moves when its model is rebuilt under perturbation over the fresh build
  (``harvester.verify_gates``); and for a completion ``determined``: its stated facts hold on gold and the
  fresh build, and every wrong completion's fresh build contradicts one of them.

A completion task (``kind == "completion"``) is checked the same way with its own meaning: ``broken_fails``
is the project with the models' files removed, which must not build or score 0 (its table is absent), as
the record's ``local_checks.builds`` says;
``repair_passes`` the file written back; ``wrong_repair`` a wrong completion, which must build, fail no dbt
test the original passes and score 0 (there is no broken output to differ from); it states a contract,
not symptoms, so it has no ``claims`` check.

Builds of identical inputs are shared (a true repair restores the original file byte for byte, so its
build IS the unmodified project's build); nothing else is reused.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.home import harvest_home, pins_dir
from dbt_harvest.core.patching import PatchError, apply_to_text, parse_patch
from dbt_harvest.core.pin import Pin, pin_path, read_pin
from dbt_harvest.core.scorer import official, score
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.harvester.build import BuildResult, build_workspace
from dbt_harvest.harvester.discovery import discover
from dbt_harvest.harvester.gold import gold_path
from dbt_harvest.harvester.mint.stability import Stability
from dbt_harvest.harvester.sandbox import Limits
from dbt_harvest.harvester.verify_gates import determined, fresh_stability, stable_gold
from dbt_harvest.harvester.workspace import fresh_workspace, template

#: The database file every verification build uses: not gold's (``build.duckdb``).
VERIFY_DB_FILE = "verified.duckdb"
CHECKS = (
    "gold_matches",
    "broken_fails",
    "repair_passes",
    "wrong_repair",
    "claims",
    "distinct",
    "stable_gold",
    "determined",
)


class VerifyError(HarvestError):
    """A task cannot be verified at all (its pin, gold or file is missing): fix the store, then re-run."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class TaskVerdict:
    instance_id: str
    pin: str
    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, object]:
        return {
            "instance_id": self.instance_id,
            "pin": self.pin,
            "ok": self.ok,
            "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in self.checks},
        }


@dataclass
class _PinBuilds:
    """Fresh builds of one pin's variants, one per distinct text of the changed file."""

    pin: Pin
    scratch: Path
    sandboxed: bool
    limits: Limits
    built: dict[tuple[tuple[str, str], ...], BuildResult] = field(default_factory=dict)
    count: int = 0
    stability: dict[str, Stability] | None = None  # the fresh original build's perturbed rebuilds, once

    @property
    def db_file(self) -> str:
        """The database file every build here writes: another name than gold's, unless the project's SQL
        names its database."""
        return self.pin.db_file if self.pin.database_named else VERIFY_DB_FILE

    def stable_gold(self, record: TaskRecord, original: BuildResult, gold: Path) -> CheckResult:
        """The ``stable_gold`` check of ``record`` over ``original``, the pin's fresh unmodified build."""
        if self.stability is None:
            self.stability = fresh_stability(self.pin, original, self.db_file, self.scratch / "stability")
        ok, why = stable_gold(record, gold, self.stability)
        return CheckResult("stable_gold", ok, why)

    def build(self, file: str, text: str | None) -> BuildResult:
        """The pin with ``file`` holding ``text`` (None: the file removed), built fresh."""
        return self.build_files({file: text})

    def build_files(self, texts: dict[str, str | None]) -> BuildResult:
        """The pin with each file holding its text (None: removed), built fresh; identical inputs once."""
        key = tuple(
            sorted(
                (f, "missing" if t is None else hashlib.sha256(t.encode("utf-8")).hexdigest()) for f, t in texts.items()
            )
        )
        if key not in self.built:
            self.count += 1
            workspace = self.scratch / f"v{self.count:03d}"
            fresh_workspace(self.pin, workspace)
            for file, text in texts.items():
                target = workspace / file
                if target.is_symlink():
                    raise VerifyError(
                        f"{self.pin.id}: {file} is a symlink in the pin's tree; refusing to write through it"
                    )
                if text is None:
                    target.unlink(missing_ok=True)
                else:
                    target.write_text(text, encoding="utf-8")
            profile = discover(workspace, self.pin.project_dir).profile
            self.built[key] = build_workspace(
                workspace,
                self.pin.project_dir,
                profile,
                self.pin.profile_schema,
                self.pin.clock,
                sandboxed=self.sandboxed,
                limits=self.limits,
                log_path=self.scratch / f"v{self.count:03d}.log",
                db_file=self.db_file,
                exclude_tests=self.pin.excluded_tests,
                toolchain=self.pin.toolchain,
            )
        return self.built[key]


def _apply(text: str, patch: str, what: str) -> str:
    try:
        return apply_to_text(text, parse_patch(patch)[0])
    except (PatchError, IndexError) as exc:
        raise VerifyError(f"the task's {what} does not apply to the pin's file: {exc}") from None


def _signature(result: BuildResult, pin: Pin) -> str:
    gradable = {t.name for t in pin.gradable_tables}
    parts = sorted(f"{t.name}:{t.rows}:{t.fingerprint}" for t in result.tables if t.name in gradable)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _gold_matches(original: BuildResult, gold: Path, spec: GradingSpec) -> CheckResult:
    """The unmodified project's build scores 1 (official and strict) against gold."""
    if not original.models_ok or original.gold_file is None:
        return CheckResult("gold_matches", False, f"the unmodified project does not build: {original.first_error}")
    verdict = score(gold, original.gold_file, spec)
    return CheckResult(
        "gold_matches",
        verdict.official.passed and verdict.strict.passed,
        verdict.official.reason or verdict.strict.reason or "official 1, strict 1",
    )


def verify_task(record: TaskRecord, builds: _PinBuilds, gold: Path) -> tuple[TaskVerdict, str]:
    """Every check of one task (module docstring); also the broken build's output signature."""
    from dbt_harvest.harvester.mint.claims import check_claims

    pin = builds.pin
    if record.kind == "completion":
        return _verify_completion(record, builds, gold), ""
    original_text = (template(pin) / record.file).read_text(encoding="utf-8")
    broken_text = _apply(original_text, record.broken_patch, "broken patch")
    repaired_text = _apply(broken_text, record.fix_patch, "fix patch")
    checks: list[CheckResult] = []
    spec = record.grading

    original = builds.build(record.file, original_text)
    checks.append(_gold_matches(original, gold, spec))
    checks.append(builds.stable_gold(record, original, gold))

    broken = builds.build(record.file, broken_text)
    signature = ""
    if not broken.models_ok or broken.gold_file is None:
        checks.append(CheckResult("broken_fails", False, f"the broken project does not build: {broken.first_error}"))
    else:
        signature = _signature(broken, pin)
        verdict = score(gold, broken.gold_file, spec)
        checks.append(
            CheckResult(
                "broken_fails",
                not verdict.official.passed and not verdict.strict.passed,
                f"official {verdict.official.score}, strict {verdict.strict.score}",
            )
        )

    repair = builds.build(record.file, repaired_text)
    if repaired_text != original_text:
        detail = "the fix patch does not restore the pin's file"
        checks.append(CheckResult("repair_passes", False, detail))
    elif not repair.models_ok or repair.gold_file is None:
        checks.append(CheckResult("repair_passes", False, f"the repaired project does not build: {repair.first_error}"))
    else:
        verdict = score(gold, repair.gold_file, spec)
        checks.append(
            CheckResult(
                "repair_passes",
                verdict.official.passed and verdict.strict.passed,
                verdict.official.reason or verdict.strict.reason or "official 1, strict 1",
            )
        )

    checks.append(_wrong_repair(record, builds, gold, broken, repair, broken_text))

    if broken.gold_file is None or not broken.models_ok:
        checks.append(CheckResult("claims", False, "no broken build to check the claims on"))
    elif not record.claims:
        checks.append(CheckResult("claims", False, "the task records no claim for its statement"))
    else:
        results = check_claims(pin, record.claims, gold, broken.gold_file)
        false = [r for r in results if not r.holds]
        graded = set(spec.condition_tabs)
        stray = [c for c in record.claims if c.table not in graded]
        checks.append(
            CheckResult(
                "claims",
                not false and not stray,
                f"{len(results) - len(false)}/{len(results)} hold"
                + (
                    f"; false: {false[0].claim.kind} {false[0].claim.table}.{false[0].claim.column} ({false[0].detail})"
                    if false
                    else ""
                )
                + (f"; about a table not graded: {stray[0].table}" if stray else ""),
            )
        )
    return TaskVerdict(record.instance_id, record.pin, tuple(checks)), signature


def _created(patch: str, what: str) -> dict[str, str]:
    """The files a creating patch writes (a completion's fix or wrong completion), path -> text."""
    try:
        parsed = parse_patch(patch)
    except PatchError as exc:
        raise VerifyError(f"the task's {what} is not a patch: {exc}") from None
    if not all(p.created for p in parsed):
        raise VerifyError(f"the task's {what} does not create its files")
    return {p.path: apply_to_text("", p) for p in parsed}


def _verify_completion(record: TaskRecord, builds: _PinBuilds, gold: Path) -> TaskVerdict:
    spec = record.grading
    checks: list[CheckResult] = []
    tree = template(builds.pin)
    try:
        removed = parse_patch(record.broken_patch)
    except PatchError as exc:
        raise VerifyError(f"the task's broken patch is not a patch: {exc}") from None
    originals = {p.path: (tree / p.path).read_text(encoding="utf-8") for p in removed if (tree / p.path).is_file()}
    original = builds.build_files(dict(originals))
    checks.append(_gold_matches(original, gold, spec))
    checks.append(builds.stable_gold(record, original, gold))
    if len(originals) != len(removed) or not all(
        p.deleted and apply_to_text(originals[p.path], p) == "" for p in removed
    ):
        checks.append(CheckResult("broken_fails", False, "the broken patch does not remove the models' files"))
    else:
        missing = builds.build_files(dict.fromkeys(originals))
        built = missing.models_ok and missing.gold_file is not None
        if built != record.local_checks.builds:
            said = "builds" if record.local_checks.builds else "does not build"
            checks.append(
                CheckResult(
                    "broken_fails",
                    False,
                    f"the record says the project {said} without the files; "
                    f"a fresh build says otherwise ({missing.first_error[:80]})",
                )
            )
        elif not built:
            checks.append(
                CheckResult(
                    "broken_fails", True, f"without the files the project does not build: {missing.first_error[:120]}"
                )
            )
        else:
            assert missing.gold_file is not None  # built: the models built and the gold file was written
            verdict = score(gold, missing.gold_file, spec)
            checks.append(
                CheckResult(
                    "broken_fails",
                    not verdict.official.passed and not verdict.strict.passed,
                    f"without the files: official {verdict.official.score}, strict {verdict.strict.score}",
                )
            )
    if _created(record.fix_patch, "fix patch") != originals:
        checks.append(CheckResult("repair_passes", False, "the fix patch does not write the pin's files back"))
    elif not original.models_ok or original.gold_file is None:
        checks.append(
            CheckResult("repair_passes", False, f"the completed project does not build: {original.first_error}")
        )
    else:
        checks.append(
            CheckResult("repair_passes", checks[0].ok, "the fix writes the original files: " + checks[0].detail)
        )
    why = "the task has no wrong completion" + (" (kept weak)" if record.weak else "")
    ok = False
    for index, patch in enumerate(record.wrong_repair_patches):
        wrong = builds.build_files(dict(_created(patch, f"wrong completion {index}")))
        if not wrong.models_ok or wrong.gold_file is None:
            why = f"wrong completion {index} does not build: {wrong.first_error}"
        elif not set(wrong.failed_tests) <= set(original.failed_tests):
            why = f"wrong completion {index} fails dbt tests the original passes"
        elif official(gold, wrong.gold_file, spec).passed:
            why = f"wrong completion {index} scores 1"
        else:
            ok, why = True, f"wrong completion {index}: builds, passes the project's tests, scores 0"
            break
    checks.append(CheckResult("wrong_repair", ok, why))
    wrong_builds = [
        builds.build_files(dict(_created(p, f"wrong completion {i}")))
        for i, p in enumerate(record.wrong_repair_patches)
    ]
    ok, why = determined(record, gold, original, wrong_builds)
    checks.append(CheckResult("determined", ok, why))
    return TaskVerdict(record.instance_id, record.pin, tuple(checks))


def _wrong_repair(
    record: TaskRecord, builds: _PinBuilds, gold: Path, broken: BuildResult, repair: BuildResult, broken_text: str
) -> CheckResult:
    if not record.wrong_repair_patches:
        return CheckResult(
            "wrong_repair", False, "the task has no wrong repair" + (" (kept weak)" if record.weak else "")
        )
    why = "no wrong repair qualifies"
    for index, patch in enumerate(record.wrong_repair_patches):
        wrong = builds.build(record.file, _apply(broken_text, patch, f"wrong repair {index}"))
        if not wrong.models_ok or wrong.gold_file is None:
            why = f"wrong repair {index} does not build: {wrong.first_error}"
            continue
        if not set(wrong.failed_tests) <= set(repair.failed_tests):
            why = f"wrong repair {index} fails dbt tests the true repair passes"
            continue
        if official(gold, wrong.gold_file, record.grading).passed:
            why = f"wrong repair {index} scores 1"
            continue
        if broken.gold_file is not None and official(broken.gold_file, wrong.gold_file, record.grading).passed:
            why = f"wrong repair {index} is not informative: its graded output matches the broken build's"
            continue
        return CheckResult(
            "wrong_repair",
            True,
            f"wrong repair {index}: builds, passes the repair's tests, scores 0, differs from the broken output",
        )
    return CheckResult("wrong_repair", False, why)


def verify(
    records: Sequence[TaskRecord],
    *,
    sandboxed: bool = True,
    limits: Limits | None = None,
    on_result: Callable[[TaskVerdict], None] | None = None,
) -> list[TaskVerdict]:
    """Verify ``records`` (grouped by pin, one set of fresh builds per pin); see the module docstring."""
    verdicts: list[TaskVerdict] = []
    by_pin: dict[str, list[TaskRecord]] = {}
    for record in records:
        by_pin.setdefault(record.pin, []).append(record)
    root = harvest_home() / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    for pin_id, group in sorted(by_pin.items()):
        try:
            pin = read_pin(pin_path(pin_id, pins_dir()))
        except HarvestError as exc:
            raise VerifyError(f"cannot verify tasks of {pin_id}: {exc}") from None
        gold = gold_path(pin.gold_sha256)
        scratch = Path(tempfile.mkdtemp(prefix="verify-", dir=root))
        builds = _PinBuilds(pin, scratch, sandboxed, limits or Limits())
        seen_signatures: dict[str, str] = {}
        seen_statements: dict[str, str] = {}
        try:
            for record in sorted(group, key=lambda r: r.instance_id):
                verdict, signature = verify_task(record, builds, gold)
                digest = hashlib.sha256(" ".join(record.problem_statement.split()).encode()).hexdigest()
                twin = seen_signatures.get(signature) if signature else None
                same_words = seen_statements.get(digest)
                detail = (
                    f"the same broken outputs as {twin}"
                    if twin
                    else f"the same statement as {same_words}"
                    if same_words
                    else "no other task of the pin shares its broken outputs or statement"
                )
                verdict = TaskVerdict(
                    verdict.instance_id,
                    verdict.pin,
                    (*verdict.checks, CheckResult("distinct", not twin and not same_words, detail)),
                )
                if signature:
                    seen_signatures.setdefault(signature, record.instance_id)
                seen_statements.setdefault(digest, record.instance_id)
                verdicts.append(verdict)
                if on_result is not None:
                    on_result(verdict)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return verdicts


def summary(verdicts: Sequence[TaskVerdict]) -> dict[str, object]:
    """Per check: how many tasks pass it, out of how many."""
    return {
        "tasks": len(verdicts),
        "ok": sum(v.ok for v in verdicts),
        "checks": {
            name: {
                "ok": sum(c.ok for v in verdicts for c in v.checks if c.name == name),
                "of": sum(1 for v in verdicts for c in v.checks if c.name == name),
            }
            for name in CHECKS
        },
    }


__all__ = ["CHECKS", "CheckResult", "TaskVerdict", "VERIFY_DB_FILE", "VerifyError", "summary", "verify", "verify_task"]

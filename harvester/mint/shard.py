"""One unit of minting work: all candidates of one model of one pin, screened then confirmed.

A shard is a plain, picklable job (strings and numbers) so the local process pool and Ray run the
same function; it returns one report per candidate it decided, plus the task records it kept. The
driver, not the shard, writes them. Timings go in the reports only: a task record must come out
byte-identical whenever the same mutation is minted again (after a crash, on another machine).
"""

from __future__ import annotations

import multiprocessing.util
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path
from typing import Any

from dbt_harvest.core.home import harvest_home, pins_dir
from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.pin import Pin, pin_path, read_pin
from dbt_harvest.core.task_record import TaskRecord, task_id
from dbt_harvest.harvester.gold import gold_path
from dbt_harvest.harvester.mint.candidates import Candidate, DeadSite, model_candidates, model_file, why_not_mutable
from dbt_harvest.harvester.mint.confirm import MAX_WRONG_TRIES, BuildContext, Seen, confirm, statement_digest
from dbt_harvest.harvester.mint.domain import gold_values
from dbt_harvest.harvester.mint.engine import Engine
from dbt_harvest.harvester.mint.lineage import ModelNode, models
from dbt_harvest.harvester.mint.local_checks import suite
from dbt_harvest.harvester.mint.screen import screen
from dbt_harvest.harvester.mint.variants import VariantBuilder
from dbt_harvest.harvester.sandbox import Limits, safe_fs
from dbt_harvest.harvester.state import load_state
from dbt_harvest.harvester.workspace import template


@dataclass(frozen=True)
class ShardJob:
    pin_id: str
    model: str
    split: str
    split_group: str
    families: tuple[str, ...] | None
    max_per_model: int
    already_kept: int
    done_keys: frozenset[str]
    seed: int = 0
    sandboxed: bool = True
    allow_weak: bool = False
    writer: str | None = None
    wall_s: float = 600.0
    screen_only: bool = False
    incremental: bool = True
    family_order: tuple[str, ...] = ()  # the pin's families, rarest first
    only_keys: frozenset[str] | None = None  # candidates to try (None: all); an augmented pin's recovered ones
    # task ids to try (None: all): only candidates whose task would get one of these ids are screened and
    # confirmed (`harvest mint --only-locked`: re-mint a pin's locked tasks, e.g. after its gold was renamed)
    only_ids: frozenset[str] | None = None
    # broken-output signatures and statements of the pin's tasks kept before this shard (driver's index)
    known_signatures: frozenset[str] = frozenset()
    known_statements: frozenset[str] = frozenset()
    home: str = field(default_factory=lambda: str(harvest_home()))
    pins: str = field(default_factory=lambda: str(pins_dir()))
    # a time budget: past this epoch second the shard stops between candidates and returns what it
    # decided (``ShardResult.stopped``); a later run resumes it where it stopped (None: no budget)
    deadline: float | None = None
    # the candidates of this model that survived screening and were decided by confirmation in an
    # earlier, stopped run: (key, kept). The resumed run replays them in the confirmation order, so it
    # keeps exactly the tasks an uninterrupted run keeps
    confirmed_before: tuple[tuple[str, bool], ...] = ()
    # the digest of this model's candidates (``family_order.shard_key``), stored beside the shard's
    # completion marker so a later run with the same candidates and nothing pending skips the shard
    candidates_key: str = ""
    # "repair": mutate the model; "completion": decide the model's completion task; "completion-pairs":
    # derive the pin's two-model completions from its kept single ones (mint/completion.py; model is "")
    kind: str = "repair"
    # a pairs shard's input: the pin's kept single completions, as their JSON (the driver read them from the store)
    records: tuple[str, ...] = ()

    @property
    def shard_name(self) -> str:
        """The name of this shard's markers under ``mint/<pin>/shards`` (a model's kinds apart)."""
        if self.kind == "completion-pairs":
            return PAIRS_SHARD
        return self.model if self.kind == "repair" else f"{self.model}.completion"


#: screening verdicts that say only that DuckDB could not run the edit straight (its place in the compiled SQL
#: was not found, or the rewritten SQL failed): a bug that was not planted (a fix mined from history, undone)
#: goes on to the dbt builds of confirmation
UNSCREENABLE = frozenset({"untransplantable", "sql_error"})
#: wrong repairs confirmation builds at most for such a candidate, which screening could not rank (every
#: one a history candidate offers: ``history.candidate.MAX_SLIPS`` and its partial fixes)
UNRANKED_WRONG_TRIES = 24

#: the marker name of a pin's pairs shard
PAIRS_SHARD = "_pairs.completion"


@dataclass(frozen=True)
class CandidateReport:
    key: str
    pin: str
    model: str
    file: str
    operator: str
    family: str
    effect: str
    stage: str  # "screen" | "confirm"
    kept: bool
    reason: str
    detail: str
    task_id: str = ""
    silent: bool | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # of a kept task: dbt tests over the mutated lineage, claims checked, whether a wrong repair was found
    local_tests: int | None = None
    claims_checked: int = 0
    informative: bool | None = None
    signature: str = ""
    statement_digest: str = ""  # sha256 prefix of the statement (its text stays in the task record)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ShardResult:
    reports: tuple[CandidateReport, ...]
    tasks: tuple[TaskRecord, ...]
    # screening survivors left unconfirmed because the model reached its cap: (key, operator, family);
    # no report is written for them, so a later run with a higher cap still confirms them
    pending: tuple[tuple[str, str, str], ...] = ()
    # mutator sites that are dead code where DuckDB runs the model (not candidates; counted)
    dead: tuple[DeadSite, ...] = ()
    # the job's deadline passed before the shard was done: its reports are final, the rest is left for later
    stopped: bool = False


def _report(cand: Candidate, stage: str, kept: bool, reason: str, detail: str, **kw: Any) -> CandidateReport:
    m = cand.mutation
    return CandidateReport(
        cand.key, cand.pin, cand.model, cand.file, m.operator, m.family, m.effect, stage, kept, reason, detail, **kw
    )


Survivor = tuple[Candidate, Any, str, dict[str, float]]


def confirmation_order(
    survivors: list[Survivor], family_order: tuple[str, ...], kept_families: set[str]
) -> Iterator[Survivor]:
    """Screening survivors in the order they are confirmed: the pin's rarest family first.

    Confirmation is the expensive stage and ``max_per_model`` caps it, so the order decides which
    families a model yields. Each family, rarest first (``family_order``, computed over the whole pin
    by the driver), is tried until one of its survivors is kept; what is left then goes round-robin.
    ``kept_families`` is read lazily, so the caller's updates steer the order.
    """
    by_family: dict[str, list[Survivor]] = {}
    for item in survivors:
        by_family.setdefault(item[0].mutation.family, []).append(item)
    rank = {f: i for i, f in enumerate(family_order)}
    families = sorted(by_family, key=lambda f: (rank.get(f, len(rank)), len(by_family[f]), f))
    for family in families:
        queue = by_family[family]
        while queue and family not in kept_families:
            yield queue.pop(0)
    for row in zip_longest(*(by_family[f] for f in families)):
        yield from (item for item in row if item is not None)


_WARM: dict[tuple[str, ...], VariantBuilder] = {}


def warm_builder(pin: Pin, job: ShardJob, base_db: Path, limits: Limits) -> VariantBuilder:
    """This process's warm builder for ``pin``: one sandboxed dbt child serves every shard of the pin
    that this process confirms (a process holds one at a time; it is closed when the process ends)."""
    key = (pin.id, pin.gold_sha256, job.home, str(job.sandboxed), repr(limits))
    if key not in _WARM:
        close_warm_builders()
        home_tmp = Path(job.home) / "tmp"
        scratch = Path(tempfile.mkdtemp(prefix="mint-warm-", dir=home_tmp if home_tmp.is_dir() else None))
        _WARM[key] = VariantBuilder(pin, scratch, base_db=base_db, sandboxed=job.sandboxed, limits=limits)
    return _WARM[key]


def close_warm_builders() -> None:
    """End every warm child this process holds and remove its workspace."""
    while _WARM:
        _, builder = _WARM.popitem()
        try:
            builder.close()
        finally:
            safe_fs.rmtree(builder.scratch)


# multiprocessing runs these finalizers at a worker's exit (it skips atexit there), and at the
# main process's exit through its own atexit hook
multiprocessing.util.Finalize(None, close_warm_builders, exitpriority=100)


def _slug(pin: Pin) -> str:
    return pin.id.split("@", 1)[0]


def prospective_id(pin: Pin, cand: Candidate) -> str:
    """The instance id the candidate's task gets if it is kept (``task_id`` over the broken patch that
    confirmation records), known before anything is built."""
    return task_id(
        _slug(pin), pin.commit, cand.mutation.operator, cand.file, make_patch(cand.file, cand.original, cand.broken)
    )


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.time() >= deadline


def open_pin(job: ShardJob) -> tuple[Pin, Any, dict[str, ModelNode]]:
    """Point this worker at the job's home and pins, and load the job's pin: (pin, built state, models)."""
    import os

    os.environ["HARVEST_HOME"] = job.home
    os.environ["HARVEST_PINS"] = job.pins
    pin = read_pin(pin_path(job.pin_id, Path(job.pins)))
    state = load_state(pin.id)
    return pin, state, models(state.manifest)


def run_shard(job: ShardJob) -> ShardResult:
    """Screen every candidate of the model, then confirm survivors until ``max_per_model`` are kept.

    Under a deadline the shard stops between candidates: every report it returns is final, survivors it
    did not confirm get no report (so a later run screens and confirms them), and ``stopped`` is set. It
    stops only after deciding at least one candidate, so a budget shorter than a shard's screening still
    makes progress on every run (else a resumed shard could re-screen and stop forever).
    """
    if _past(job.deadline):
        return ShardResult((), (), stopped=True)
    if job.kind == "completion":
        from dbt_harvest.harvester.mint.completion import run_completion_shard

        return run_completion_shard(job)
    if job.kind == "completion-pairs":
        from dbt_harvest.harvester.mint.completion import run_pairs_shard

        return run_pairs_shard(job)
    pin, state, nodes = open_pin(job)
    node = nodes[job.model]
    if why_not_mutable(node, pin):
        return ShardResult((), ())
    gold = gold_path(pin.gold_sha256)
    tree = template(pin)
    catalog = next((n.relation.split(".")[0].strip('"') for n in nodes.values() if n.relation), "build")
    scratch = Path(
        tempfile.mkdtemp(prefix="mint-", dir=Path(job.home) / "tmp" if (Path(job.home) / "tmp").is_dir() else None)
    )
    engine = Engine(state.database, catalog, scratch / "engine")
    tests = suite(state.manifest, pin.known_failing_tests)
    reports: list[CandidateReport] = []
    tasks: list[TaskRecord] = []
    kept = job.already_kept
    limits = Limits(wall_s=job.wall_s)
    builder: VariantBuilder | None = None
    dead: list[DeadSite] = []
    seen = Seen(job.known_signatures, job.known_statements)
    before = dict(job.confirmed_before)  # decided by confirmation in a stopped run: replayed, not rebuilt
    kept -= sum(before.values())  # the count an uninterrupted run has before it confirms anything
    stopped = False
    try:
        survivors: list[Survivor] = []
        kept_families: set[str] = set()
        origin: dict[str, str] = {}
        if pin.is_history:  # the one candidate: the fix file back at the fix's parent
            from dbt_harvest.harvester.history.candidate import pin_candidates

            found, origin = pin_candidates(pin, node.unique_id, model_file(node, pin))
            cands: Iterable[Candidate] = found
        else:
            cands = model_candidates(pin, node, tree, job.families, job.seed, dead=dead, values=gold_values(gold))
        for cand in cands:
            if kept >= job.max_per_model:
                break
            if cand.key in before:
                survivors.append((cand, None, "", {}))
                continue
            if cand.key in job.done_keys or (job.only_keys is not None and cand.key not in job.only_keys):
                continue
            if job.only_ids is not None and prospective_id(pin, cand) not in job.only_ids:
                continue
            if reports and _past(job.deadline):  # a run that starts a shard decides at least one candidate
                stopped = True
                break
            outcome = screen(engine, pin, nodes, cand, gold, tests)
            timings = {"screen": round(outcome.seconds, 4)}
            weak_ok = job.allow_weak and outcome.reason == "no_wrong_repair"  # confirmed, then kept weak
            if not cand.planted and outcome.reason in UNSCREENABLE:
                # a real fix often edits Jinja the compiled SQL no longer shows: dbt builds decide it
                outcome = replace(outcome, ok=True, wrong_order=None)
            elif (not outcome.ok and not weak_ok) or outcome.grading is None:
                reports.append(_report(cand, "screen", False, outcome.reason, outcome.detail, timings=timings))
                continue
            if job.screen_only:
                reports.append(_report(cand, "screen", True, "", "survived screening", timings=timings))
                continue
            survivors.append((cand, outcome, "", timings))
        confirmed_keys: set[str] = set()
        for cand, outcome, _statement, timings in (
            () if stopped else confirmation_order(survivors, job.family_order, kept_families)
        ):
            if kept >= job.max_per_model:
                break
            confirmed_keys.add(cand.key)
            if cand.key in before:  # decided before the stop: it counts as it did then
                if before[cand.key]:
                    kept += 1
                    kept_families.add(cand.mutation.family)
                continue
            if reports and _past(job.deadline):  # a run that starts a shard decides at least one candidate
                stopped = True
                break
            if builder is None and job.incremental:
                builder = warm_builder(pin, job, state.database, limits)
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
            started = time.perf_counter()
            confirmed = confirm(
                ctx,
                cand,
                outcome.grading,
                allow_weak=job.allow_weak,
                wrong_order=outcome.wrong_order,
                nodes=nodes,
                tests=tests,
                writer=job.writer,
                seen=seen,
                wrong_tries=UNRANKED_WRONG_TRIES if outcome.wrong_order is None else MAX_WRONG_TRIES,
            )
            timings.update({k: round(v, 3) for k, v in confirmed.timings})
            timings["confirm"] = round(time.perf_counter() - started, 3)
            if not confirmed.ok or confirmed.local_checks is None or confirmed.grading is None:
                reports.append(_report(cand, "confirm", False, confirmed.reason, confirmed.detail, timings=timings))
                continue
            record = TaskRecord(
                instance_id=task_id(_slug(pin), pin.commit, cand.mutation.operator, cand.file, confirmed.broken_patch),
                pin=pin.id,
                repo=pin.repo,
                base_commit=pin.commit,
                project_dir=pin.project_dir,
                split=job.split,
                split_group=job.split_group,
                family=cand.mutation.family,
                operator=cand.mutation.operator,
                effect=confirmed.effect,
                file=cand.file,
                broken_patch=confirmed.broken_patch,
                fix_patch=confirmed.fix_patch,
                wrong_repair_patches=confirmed.wrong_patches,
                grading=confirmed.grading,
                problem_statement=confirmed.statement,
                local_checks=confirmed.local_checks,
                gold_sha256=pin.gold_sha256,
                license=pin.license,
                versions=dict(pin.versions),
                weak=confirmed.weak,
                wrong_repair_notes=confirmed.wrong_notes,
                claims=confirmed.claims,
                database=pin.database,
                broken_signature=confirmed.signature,
                **origin,
            )
            tasks.append(record)
            kept += 1
            kept_families.add(cand.mutation.family)
            seen = Seen(
                seen.signatures | {confirmed.signature}, seen.statements | {statement_digest(confirmed.statement)}
            )
            reports.append(
                _report(
                    cand,
                    "confirm",
                    True,
                    "",
                    "",
                    task_id=record.instance_id,
                    silent=confirmed.local_checks.silent,
                    timings=timings,
                    local_tests=record.local_tests,
                    claims_checked=len(record.claims),
                    informative=bool(record.wrong_repair_patches),
                    signature=confirmed.signature,
                    statement_digest=statement_digest(confirmed.statement),
                )
            )
    finally:
        if builder is not None:
            builder.forget()
        engine.close()
        safe_fs.rmtree(scratch)
    if stopped:
        return ShardResult(tuple(reports), tuple(tasks), (), tuple(dead), stopped=True)
    pending = tuple(
        (c.key, c.mutation.operator, c.mutation.family) for c, *_ in survivors if c.key not in confirmed_keys
    )
    return ShardResult(tuple(reports), tuple(tasks), pending, tuple(dead))

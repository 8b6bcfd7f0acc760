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
from typing import Any, Self

from dbt_harvest.core.home import harvest_home, mint_dir, pins_dir
from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.pin import Pin, pin_path, read_pin
from dbt_harvest.core.task_record import TaskRecord, task_id
from dbt_harvest.harvester.gold import gold_path
from dbt_harvest.harvester.mint.candidates import Candidate, DeadSite, model_candidates, model_file, why_not_mutable
from dbt_harvest.harvester.mint.confirm import (
    MAX_WRONG_TRIES,
    BuildContext,
    ConfirmOutcome,
    Seen,
    confirm,
    statement_digest,
)
from dbt_harvest.harvester.mint.domain import gold_values
from dbt_harvest.harvester.mint.engine import Engine
from dbt_harvest.harvester.mint.lineage import ModelNode, models
from dbt_harvest.harvester.mint.local_checks import Suite, suite
from dbt_harvest.harvester.mint.screen import ScreenOutcome, screen
from dbt_harvest.harvester.mint.stability import (
    Rebuilder,
    Stability,
    cache_key,
    cached_stability,
    lineage_sql,
    project_relations,
    store_stability,
    with_stability,
)
from dbt_harvest.harvester.mint.variants import VariantBuilder
from dbt_harvest.harvester.sandbox import Limits, safe_fs
from dbt_harvest.harvester.state import BuiltState, load_state
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
    # ids of tasks this shard decided against: one an earlier decision kept is withdrawn from the store
    withdrawn: tuple[str, ...] = ()


def _report(cand: Candidate, stage: str, kept: bool, reason: str, detail: str, **kw: Any) -> CandidateReport:
    m = cand.mutation
    return CandidateReport(
        cand.key, cand.pin, cand.model, cand.file, m.operator, m.family, m.effect, stage, kept, reason, detail, **kw
    )


#: a screening survivor waiting for confirmation: (candidate, its screening outcome, "" (unused), timings); the
#: outcome is None for a survivor a stopped run confirmed already (replayed, not rebuilt)
Survivor = tuple[Candidate, ScreenOutcome | None, str, dict[str, float]]


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
        scratch = shard_scratch(job, "mint-warm-")
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


def open_pin(job: ShardJob) -> tuple[Pin, BuiltState, dict[str, ModelNode]]:
    """Point this worker at the job's home and pins, and load the job's pin: (pin, built state, models)."""
    import os

    os.environ["HARVEST_HOME"] = job.home
    os.environ["HARVEST_PINS"] = job.pins
    pin = read_pin(pin_path(job.pin_id, Path(job.pins)))
    state = load_state(pin.id)
    nodes = models(state.manifest)
    return stable_pin(pin, state, nodes, job), state, nodes


def stable_pin(pin: Pin, state: BuiltState, nodes: dict[str, ModelNode], job: ShardJob) -> Pin:
    """``pin`` with the columns its models' perturbed rebuilds move never graded, and the tables they
    cannot check not graded (``harvester.mint.stability``): every gradable table is checked once per pin
    and its result kept in the pin's mint folder, so later shards read it."""
    folder = mint_dir(pin.id) / "stability"
    gradable = {t.name for t in pin.gradable_tables}
    relations = project_relations(state.manifest)
    results: list[Stability] = []
    rebuilder: Rebuilder | None = None
    try:
        for uid in sorted(nodes):
            node = nodes[uid]
            if node.table not in gradable or node.materialized == "ephemeral":
                continue
            key = cache_key(node, pin.gold_sha256, pin.clock)
            found = cached_stability(folder, key)
            if found is None:
                if rebuilder is None:
                    rebuilder = Rebuilder(state.database, catalog_of(nodes), shard_scratch(job, "stability-"))
                found = rebuilder.check(node, relations, pin.clock, lineage_sql(nodes, uid))
                store_stability(folder, key, found)
            results.append(found)
    finally:
        if rebuilder is not None:
            rebuilder.close()
    return with_stability(pin, results)


def shard_scratch(job: ShardJob, prefix: str) -> Path:
    """A fresh scratch folder for one shard, under the home's ``tmp/`` when it has one."""
    home_tmp = Path(job.home) / "tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=home_tmp if home_tmp.is_dir() else None))


def catalog_of(nodes: dict[str, ModelNode]) -> str:
    """The database name the project's relations are qualified with (``build`` when none says)."""
    return next((n.relation.split(".")[0].strip('"') for n in nodes.values() if n.relation), "build")


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
    run = _RepairShard.start(job, pin, state, nodes, node)
    try:
        run.screen_all(run.candidates())
        if not run.stopped:
            run.confirm_all()
    finally:
        run.close()
    return run.result()


@dataclass
class _RepairShard:
    """One repair shard at work: what it holds open (engine, scratch, warm builder) and what it decided."""

    job: ShardJob
    pin: Pin
    state: BuiltState
    nodes: dict[str, ModelNode]
    node: ModelNode
    tree: Path
    gold: Path
    scratch: Path
    engine: Engine
    tests: Suite
    kept: int  # tasks of the model kept so far, counted as an uninterrupted run counts them
    seen: Seen
    before: dict[str, bool]  # decided by confirmation in a stopped run: replayed, not rebuilt
    limits: Limits
    builder: VariantBuilder | None = None
    reports: list[CandidateReport] = field(default_factory=list)
    tasks: list[TaskRecord] = field(default_factory=list)
    dead: list[DeadSite] = field(default_factory=list)
    survivors: list[Survivor] = field(default_factory=list)
    kept_families: set[str] = field(default_factory=set)
    confirmed_keys: set[str] = field(default_factory=set)
    origin: dict[str, str] = field(default_factory=dict)  # a history task's provenance (its record's fields)
    stopped: bool = False

    @classmethod
    def start(cls, job: ShardJob, pin: Pin, state: BuiltState, nodes: dict[str, ModelNode], node: ModelNode) -> Self:
        """Start the shard: its workspace template, gold, scratch folder, screening engine and dbt tests."""
        gold = gold_path(pin.gold_sha256)
        tree = template(pin)
        scratch = shard_scratch(job, "mint-")
        engine = Engine(state.database, catalog_of(nodes), scratch / "engine")
        before = dict(job.confirmed_before)
        return cls(
            job,
            pin,
            state,
            nodes,
            node,
            tree,
            gold,
            scratch,
            engine,
            suite(state.manifest, pin.known_failing_tests),
            kept=job.already_kept - sum(before.values()),  # the count before it confirms anything
            seen=Seen(job.known_signatures, job.known_statements),
            before=before,
            limits=Limits(wall_s=job.wall_s),
        )

    def candidates(self) -> Iterable[Candidate]:
        """The model's candidates: a history pin's one (the fix file back at the fix's parent, its provenance
        kept in ``origin``), else the mutators' in their seeded order (lazily: the cap stops the enumeration)."""
        if self.pin.is_history:
            from dbt_harvest.harvester.history.candidate import pin_candidates

            found, self.origin = pin_candidates(self.pin, self.node.unique_id, model_file(self.node, self.pin))
            return found
        job = self.job
        values = gold_values(self.gold)
        return model_candidates(self.pin, self.node, self.tree, job.families, job.seed, dead=self.dead, values=values)

    def screen_all(self, cands: Iterable[Candidate]) -> None:
        """Screen candidates until the cap is reached or the deadline passes; survivors wait for confirmation."""
        for cand in cands:
            if self.kept >= self.job.max_per_model:
                break
            if cand.key in self.before:
                self.survivors.append((cand, None, "", {}))
                continue
            if self._left_out(cand):
                continue
            if self._deadline_passed():
                break
            self._screen(cand)

    def _left_out(self, cand: Candidate) -> bool:
        """Whether ``cand`` is not this run's to try: decided before, or outside ``only_keys``/``only_ids``."""
        job = self.job
        if cand.key in job.done_keys or (job.only_keys is not None and cand.key not in job.only_keys):
            return True
        return job.only_ids is not None and prospective_id(self.pin, cand) not in job.only_ids

    def _deadline_passed(self) -> bool:
        """Whether to stop here: the deadline passed and the run decided at least one candidate."""
        if self.reports and _past(self.job.deadline):
            self.stopped = True
        return self.stopped

    def _screen(self, cand: Candidate) -> None:
        """Screen one candidate: a report when it is out (or screening is all the run does), else a survivor."""
        outcome = screen(self.engine, self.pin, self.nodes, cand, self.gold, self.tests)
        timings = {"screen": round(outcome.seconds, 4)}
        weak_ok = self.job.allow_weak and outcome.reason == "no_wrong_repair"  # confirmed, then kept weak
        if not cand.planted and outcome.reason in UNSCREENABLE:
            # a real fix often edits Jinja the compiled SQL no longer shows: dbt builds decide it
            outcome = replace(outcome, ok=True, wrong_order=None)
        elif (not outcome.ok and not weak_ok) or outcome.grading is None:
            self.reports.append(_report(cand, "screen", False, outcome.reason, outcome.detail, timings=timings))
            return
        if self.job.screen_only:
            self.reports.append(_report(cand, "screen", True, "", "survived screening", timings=timings))
            return
        self.survivors.append((cand, outcome, "", timings))

    def confirm_all(self) -> None:
        """Confirm survivors, the pin's rarest family first, until the cap is reached or the deadline passes."""
        for cand, outcome, _statement, timings in confirmation_order(
            self.survivors, self.job.family_order, self.kept_families
        ):
            if self.kept >= self.job.max_per_model:
                break
            self.confirmed_keys.add(cand.key)
            if cand.key in self.before:  # decided before the stop: it counts as it did then
                if self.before[cand.key]:
                    self._count_kept(cand)
                continue
            if self._deadline_passed():
                break
            assert outcome is not None  # only a replayed survivor has no screening outcome
            self._confirm(cand, outcome, timings)

    def _confirm(self, cand: Candidate, outcome: ScreenOutcome, timings: dict[str, float]) -> None:
        """Build one survivor's variants (``confirm``): its rejection, or its task kept."""
        job = self.job
        if self.builder is None and job.incremental:
            self.builder = warm_builder(self.pin, job, self.state.database, self.limits)
        ctx = BuildContext(
            self.pin,
            self.gold,
            self.scratch / cand.key,
            job.sandboxed,
            self.limits,
            base_db=self.state.database if job.incremental else None,
            select=(f"{self.node.name}+",),
            builder=self.builder,
        )
        started = time.perf_counter()
        confirmed = confirm(
            ctx,
            cand,
            outcome.grading,
            allow_weak=job.allow_weak,
            wrong_order=outcome.wrong_order,
            nodes=self.nodes,
            tests=self.tests,
            writer=job.writer,
            seen=self.seen,
            wrong_tries=UNRANKED_WRONG_TRIES if outcome.wrong_order is None else MAX_WRONG_TRIES,
        )
        timings.update({k: round(v, 3) for k, v in confirmed.timings})
        timings["confirm"] = round(time.perf_counter() - started, 3)
        if not confirmed.ok or confirmed.local_checks is None or confirmed.grading is None:
            self.reports.append(_report(cand, "confirm", False, confirmed.reason, confirmed.detail, timings=timings))
            return
        self._keep(cand, confirmed, timings)

    def _keep(self, cand: Candidate, confirmed: ConfirmOutcome, timings: dict[str, float]) -> None:
        """Keep a confirmed candidate's task: its record, its report, and its bug among those seen."""
        record = _task_record(self.job, self.pin, cand, confirmed, self.origin)
        self.tasks.append(record)
        self._count_kept(cand)
        digest = statement_digest(confirmed.statement)
        self.seen = Seen(self.seen.signatures | {confirmed.signature}, self.seen.statements | {digest})
        self.reports.append(_kept_report(cand, record, confirmed, timings))

    def _count_kept(self, cand: Candidate) -> None:
        """One more task of the model kept, in the candidate's family (which steers the confirmation order)."""
        self.kept += 1
        self.kept_families.add(cand.mutation.family)

    def close(self) -> None:
        """Hand the warm builder back, close the engine and remove the scratch folder."""
        if self.builder is not None:
            self.builder.forget()
        self.engine.close()
        safe_fs.rmtree(self.scratch)

    def result(self) -> ShardResult:
        """What the shard decided; survivors it did not confirm are pending (none when it was stopped)."""
        if self.stopped:
            return ShardResult(tuple(self.reports), tuple(self.tasks), (), tuple(self.dead), stopped=True)
        pending = tuple(
            (c.key, c.mutation.operator, c.mutation.family)
            for c, *_ in self.survivors
            if c.key not in self.confirmed_keys
        )
        return ShardResult(tuple(self.reports), tuple(self.tasks), pending, tuple(self.dead))


def _task_record(
    job: ShardJob, pin: Pin, cand: Candidate, confirmed: ConfirmOutcome, origin: dict[str, str]
) -> TaskRecord:
    """The task record of a confirmed repair candidate (``origin``: a history task's provenance fields)."""
    assert confirmed.local_checks is not None and confirmed.grading is not None  # a kept outcome has both
    return TaskRecord(
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
        source=origin.get("source", "mutation"),
        fix_commit=origin.get("fix_commit", ""),
        fix_date=origin.get("fix_date", ""),
        fix_subject=origin.get("fix_subject", ""),
        data_origin="synthesized" if pin.synthesis_sha256 else "",
        dialect=pin.dialect if pin.port_sha256 else "",
    )


def _kept_report(
    cand: Candidate, record: TaskRecord, confirmed: ConfirmOutcome, timings: dict[str, float]
) -> CandidateReport:
    """The report of a kept repair task: its id, how it shows, and its quality figures."""
    assert confirmed.local_checks is not None  # a kept outcome has its local checks
    return _report(
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

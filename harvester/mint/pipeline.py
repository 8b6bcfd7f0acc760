"""The mint driver: the order of the stages in one place, resumable per candidate.

For each pin (which must have a reserved split): load the built state, materialize the workspace
template, plan one shard per mutable model, skip candidates that already have a report, run the
shards on an executor, and write each report and task record atomically as results arrive.

Crash safety: a shard's results land as several files (its task records, then its reports, then the
pin's index of kept bugs, then a completion marker listing every report key of that model). Planning
trusts only reports named in a marker, so a run killed half-way through writing a shard's files redoes
that shard from the same starting point as the interrupted run, and the re-run keeps exactly the tasks
an uninterrupted run keeps. Just before the marker goes the digest of the shard's candidates
(``<model>.key``): a later run skips a finished shard whose candidates are the same and that left nothing
pending at the cap (:mod:`harvester.mint.family_order`).

A time budget (``MintOptions.deadline``, `harvest mint --budget-s`) stops shards between candidates. A
stopped shard's decided reports are written and vouched for by a ``<model>.part`` marker (no ``.done``);
the next run resumes it: screened-out and confirmed candidates are not redone, and the confirmed ones
are replayed in the confirmation order so the resumed shard keeps the tasks an unstopped one keeps.

One task per distinct bug: shards run in parallel, so the driver keeps, per pin, an index of the kept
tasks' broken-output signatures and statement digests (``shards/kept-bugs.index``); a task whose broken outputs or
statement equal a kept one's is dropped here (its report says ``duplicate`` / ``duplicate_statement``),
and new shards start from the index so they skip such candidates before building their repairs.
Which of two duplicates survives must not depend on which shard finishes first, so results are applied
per pin in plan order (:func:`in_plan_order`): ``--jobs N`` and Ray keep exactly the tasks ``--jobs 1``
keeps. A shard that stopped at the cap with survivors pending and lost a kept task to that check is under
the cap again; the same invocation runs it again (the next round of :func:`mint`) until no shard is left,
so one ``harvest mint`` converges where it used to take a second run.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from dbt_harvest.core import atomic, home
from dbt_harvest.core.errors import GoldError, HarvestError, PinError
from dbt_harvest.core.pin import Pin
from dbt_harvest.core.task_record import TaskRecord, local_tests_bucket
from dbt_harvest.harvester.mint.candidates import model_file, why_not_mutable
from dbt_harvest.harvester.mint.executors import run_local, run_ray
from dbt_harvest.harvester.mint.family_order import planned_orders, shard_key
from dbt_harvest.harvester.mint.lineage import ModelNode, models
from dbt_harvest.harvester.mint.shard import CandidateReport, ShardJob, ShardResult
from dbt_harvest.harvester.mint.tally import MintTally
from dbt_harvest.harvester.state import load_state
from dbt_harvest.harvester.workspace import template


class MintError(HarvestError):
    """A pin cannot be minted (no split reserved, no built state, …)."""


#: Tasks kept per model file when neither ``--max-per-model`` nor the task lock names another cap.
DEFAULT_MAX_PER_MODEL = 3


@dataclass(frozen=True)
class MintOptions:
    families: tuple[str, ...] | None = None
    max_per_model: int = DEFAULT_MAX_PER_MODEL
    jobs: int = 1
    executor: str = "local"
    address: str | None = None
    sandboxed: bool = True
    allow_weak: bool = False
    writer: str | None = None
    seed: int = 0
    screen_only: bool = False
    incremental: bool = True  # confirm by rebuilding the mutated model's descendants on the pin's state
    only_keys: frozenset[str] | None = None  # try only these candidate keys (augmented pins: the recovered ones)
    only_models: frozenset[str] | None = None  # plan shards only for these models (None: every mutable one)
    only_ids: frozenset[str] | None = (
        None  # try only candidates whose task would get one of these ids (`--only-locked`)
    )
    deadline: float | None = None  # epoch second after which shards stop between candidates (`--budget-s`)
    kinds: tuple[str, ...] = ("repair",)  # which tasks to mint: "repair", "completion" (`--kinds`)
    # per-pin caps that override ``max_per_model`` (the caps the task lock records for pins minted deeper)
    caps: tuple[tuple[str, int], ...] = ()

    def cap_of(self, pin_id: str) -> int:
        """The per-model cap of ``pin_id``'s repair shards: its own in ``caps``, else ``max_per_model``."""
        return dict(self.caps).get(pin_id, self.max_per_model)


def reports_dir(pin_id: str) -> Path:
    return home.mint_dir(pin_id)


def _marker_path(pin_id: str, model: str) -> Path:
    return reports_dir(pin_id) / "shards" / f"{model}.done"


def _part_path(pin_id: str, model: str) -> Path:
    return reports_dir(pin_id) / "shards" / f"{model}.part"


def _pending_path(pin_id: str, model: str) -> Path:
    return reports_dir(pin_id) / "shards" / f"{model}.pending"


def _dead_path(pin_id: str, model: str) -> Path:
    return reports_dir(pin_id) / "shards" / f"{model}.dead"


def _key_path(pin_id: str, model: str) -> Path:
    return reports_dir(pin_id) / "shards" / f"{model}.key"


def _index_path(pin_id: str) -> Path:
    return reports_dir(pin_id) / "shards" / "kept-bugs.index"


def load_index(pin_id: str) -> dict[str, dict[str, str]]:
    """The pin's kept bugs: ``{"signatures": {signature: task id}, "statements": {digest: task id}}``."""
    try:
        data = json.loads(_index_path(pin_id).read_text(encoding="utf-8"))
        return {"signatures": dict(data.get("signatures", {})), "statements": dict(data.get("statements", {}))}
    except (OSError, ValueError, TypeError, AttributeError):
        return {"signatures": {}, "statements": {}}


def _side_rows(pin_id: str, suffix: str) -> list[dict]:
    folder = reports_dir(pin_id) / "shards"
    out: list[dict] = []
    for path in sorted(folder.glob(f"*.{suffix}")) if folder.is_dir() else []:
        try:
            out.extend(row for row in json.loads(path.read_text(encoding="utf-8")) if isinstance(row, dict))
        except (OSError, ValueError, TypeError):
            continue  # informational only: a bad file costs a line of the yield report, nothing else
    return out


def dead_sites(pin_id: str) -> list[dict]:
    """Mutator sites of the pin's models that are dead where DuckDB runs them (counted, not candidates)."""
    return _side_rows(pin_id, "dead")


def pending(pin_id: str) -> list[dict]:
    """Screening survivors of the pin's last runs that were left unconfirmed at the per-model cap."""
    return _side_rows(pin_id, "pending")


def completed_keys(pin_id: str, model: str) -> frozenset[str]:
    """The report keys of ``model`` that a finished shard (``.done``) or one stopped by a time budget
    (``.part``) vouched for, together: a finished shard run again (other families, a higher cap) and
    stopped by a budget vouches in ``.part`` for what it decided beyond the old ``.done``. A marker that
    does not read vouches for nothing (empty when no shard got that far)."""
    keys: set[str] = set()
    for path in (_marker_path(pin_id, model), _part_path(pin_id, model)):
        try:
            keys.update(str(key) for key in json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            continue
    return frozenset(keys)


def shard_finished(pin_id: str, model: str) -> bool:
    """Whether a mint run finished ``model``'s shard (its completion marker exists), whatever it kept."""
    return _marker_path(pin_id, model).is_file()


def load_reports(pin_id: str) -> list[dict]:
    folder = reports_dir(pin_id)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except json.JSONDecodeError:
            continue  # an unreadable report is redone (reports are written atomically, so this is rare)
    return out


@dataclass(frozen=True)
class MintTarget:
    """Where minting reads each pin's reserved split and where kept tasks go.

    The corpus (split ledger, task store, sealed test store) lives in a layer above the harvester, so
    the mint receives both as functions instead of importing them: ``split_of(pin_id)`` returns the
    pin's (split, split group) or None when none is reserved; ``store(record)`` writes one kept task
    where its split says and returns the path; ``stored(split, pin_id)`` reads back the pin's kept tasks
    (the two-model completions are derived from its single ones; None: a target that keeps no store to read,
    so no pairs are derived).
    """

    split_of: Callable[[str], tuple[str, str] | None]
    store: Callable[[TaskRecord], Path]
    stored: Callable[[str, str], list[TaskRecord]] | None = None
    #: ``withdraw(split, pin_id, instance_id)``: remove a task a later decision no longer keeps (a re-mint
    #: under stricter gates); None: a target that keeps no store
    withdraw: Callable[[str, str, str], bool] | None = None


def _split_of(pin: Pin, target: MintTarget) -> tuple[str, str]:
    """The pin's reserved split and split group; refuse a pin that has none."""
    found = target.split_of(pin.id)
    if found is None:
        raise MintError(
            f"{pin.id} has no split: reserve splits first (`harvest split assign`) — minting before "
            "the reservation would let test repositories leak into training"
        )
    return found


def _require_current_names(pin: Pin, nodes: dict[str, ModelNode]) -> None:
    """Refuse a pin whose table records name its models otherwise than this version's capture does
    (a pin captured before models outside ``main`` were gathered there): nothing of it could be graded."""
    expected = {n.table.lower() for n in nodes.values() if n.materialized != "ephemeral"}
    stale = sorted(t.name for t in pin.tables if t.name.lower() not in expected)
    if stale:
        raise PinError(
            f"{pin.id}: its table records use names this version no longer captures ({stale[0]}"
            f"{f' and {len(stale) - 1} more' if len(stale) > 1 else ''}); "
            f"run `harvest add --rebuild {pin.spec}` (for a local copy: `harvest add --rebuild "
            f"<path>@{pin.commit[:12]}` with the --origin/--name it was pinned with)"
        )


def plan(pins: Sequence[Pin], options: MintOptions, target: MintTarget) -> list[ShardJob]:
    """One shard job per mutable model still under the cap whose shard is not done on the same candidates.
    A pin with none left costs no family plan; otherwise it comes from the pin's cache
    (:mod:`harvester.mint.family_order`)."""
    jobs: list[ShardJob] = []
    for pin in pins:
        split, group = _split_of(pin, target)
        state = load_state(pin.id)
        nodes = models(state.manifest)
        _require_current_names(pin, nodes)
        tree = template(pin)  # materialize once, before workers share it
        reports = load_reports(pin.id)
        index = load_index(pin.id)
        only_keys, only_models = restriction(pin, options)
        if "repair" not in options.kinds:  # with repairs too, completions come in a later round (mint())
            if not pin.is_history:  # a history pin's one task is its fix's repair
                jobs.extend(_completion_jobs(pin, nodes, state.manifest, tree, options, split, group))
            continue
        todo: list[tuple[str, str, frozenset[str], list[dict], int, frozenset[str]]] = []
        for uid, node in sorted(nodes.items()):
            if why_not_mutable(node, pin) or (only_models is not None and uid not in only_models):
                continue
            if pin.is_history and model_file(node, pin) not in pin.fix_files:
                continue  # a history pin mints its fix's model only
            vouched = completed_keys(pin.id, uid)
            finished = [r for r in reports if r.get("model") == uid and r.get("key") in vouched]
            done = frozenset(r["key"] for r in finished)
            kept = sum(1 for r in finished if r["kept"])
            key = shard_key(pin, uid, node, tree, options.families, options.seed, only_keys, options.only_ids)
            if kept >= options.cap_of(pin.id) or _nothing_left(pin.id, uid, key, done):
                continue
            todo.append((uid, key, vouched, finished, kept, done))
        if not todo:
            continue  # every shard is done: no family plan, no shard (a no-op re-run costs seconds)
        orders = {} if pin.is_history else planned_orders(pin, nodes, tree, options.families)
        for uid, key, vouched, finished, kept, done in todo:
            resumed = not shard_finished(pin.id, uid) and bool(vouched)  # a shard a time budget stopped
            before = tuple(sorted((r["key"], bool(r["kept"])) for r in finished if r.get("stage") == "confirm"))
            jobs.append(
                ShardJob(
                    pin_id=pin.id,
                    model=uid,
                    split=split,
                    split_group=group,
                    families=options.families,
                    max_per_model=options.cap_of(pin.id),
                    already_kept=kept,
                    done_keys=done,
                    seed=options.seed,
                    sandboxed=options.sandboxed,
                    allow_weak=options.allow_weak,
                    writer=options.writer,
                    screen_only=options.screen_only,
                    incremental=options.incremental,
                    family_order=orders.get(uid, ()),
                    only_keys=only_keys,
                    only_ids=options.only_ids,
                    known_signatures=frozenset(index["signatures"]),
                    known_statements=frozenset(index["statements"]),
                    deadline=options.deadline,
                    confirmed_before=before if resumed else (),
                    candidates_key=key,
                )
            )
    return jobs


def _completion_key(
    pin: Pin, uid: str, nodes: dict[str, ModelNode], manifest: dict, tree: Path, options: MintOptions
) -> tuple[str, str] | None:
    """(digest of what a completion shard of ``uid`` reads, the id its task would get), or None when the model
    has no completion shard: an augmented pin's (its models' contracts are the base pin's), or a model that
    cannot be mutated (a package's, an ephemeral one). The digest covers the model's file, its manifest
    node (description, columns, compiled SQL), its contract (tests and what it reads included), the
    families and seed its wrong completions come from, and the versions of the mint and its gates."""
    import hashlib

    from dbt_harvest.core.patching import make_patch
    from dbt_harvest.core.task_record import COMPLETE_OPERATOR, GENERATOR_VERSION, task_id
    from dbt_harvest.harvester.mint.candidates import model_file
    from dbt_harvest.harvester.mint.completion import GATES_VERSION
    from dbt_harvest.harvester.mint.contract import contract_of
    from dbt_harvest.harvester.mint.stability import STABILITY_VERSION

    node = nodes[uid]
    file = model_file(node, pin)
    if pin.recovers or why_not_mutable(node, pin) or file is None or not (tree / file).is_file():
        return None
    original = (tree / file).read_text(encoding="utf-8")
    prospective = task_id(
        pin.id.split("@", 1)[0], pin.commit, COMPLETE_OPERATOR, file, make_patch(file, original, None)
    )
    if options.only_ids is not None and prospective not in options.only_ids:
        return None
    contract = contract_of(manifest, nodes, uid, file, pin.known_failing_tests)
    digest = hashlib.sha256(
        json.dumps(
            [
                GENERATOR_VERSION,
                GATES_VERSION,
                STABILITY_VERSION,
                file,
                original,
                repr(node),
                repr(contract),
                options.families,
                options.seed,
            ],
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()[:16]
    return digest, prospective


def _completion_jobs(
    pin: Pin, nodes: dict[str, ModelNode], manifest: dict, tree: Path, options: MintOptions, split: str, group: str
) -> list[ShardJob]:
    """One completion shard per mutable model whose shard did not finish on the same inputs."""
    jobs: list[ShardJob] = []
    for uid in sorted(nodes):
        if options.only_models is not None and uid not in options.only_models:
            continue
        found = _completion_key(pin, uid, nodes, manifest, tree, options)
        if found is None:
            continue
        name = f"{uid}.completion"
        vouched = completed_keys(pin.id, name)
        if (
            shard_finished(pin.id, name)
            and _key_matches(pin.id, name, found[0])
            and _markers_read(pin.id, name, vouched)
        ):
            continue
        jobs.append(
            ShardJob(
                pin_id=pin.id,
                model=uid,
                split=split,
                split_group=group,
                families=options.families,
                max_per_model=1,
                already_kept=0,
                done_keys=frozenset(),
                seed=options.seed,
                sandboxed=options.sandboxed,
                allow_weak=options.allow_weak,
                writer=options.writer,
                incremental=options.incremental,
                deadline=options.deadline,
                candidates_key=found[0],
                kind="completion",
            )
        )
    return jobs


def _key_matches(pin_id: str, name: str, key: str) -> bool:
    try:
        return _key_path(pin_id, name).read_text(encoding="utf-8") == key
    except OSError:
        return False


def _markers_read(pin_id: str, name: str, vouched: frozenset[str]) -> bool:
    """Every report a finished shard's marker names reads (a crash mid-write redoes the shard)."""
    folder = reports_dir(pin_id)
    for key in vouched:
        try:
            json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
    return True


def restriction(pin: Pin, options: MintOptions) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """The candidate keys and models a mint of ``pin`` tries (None: all): an augmented pin's own
    (``Pin.recovers``, the candidates its rows were derived for), whatever the run's options, so a plain
    ``harvest mint --all`` mints it exactly as ``--augment`` did; any other pin's come from the options."""
    if pin.recovers:
        return frozenset(k for _, k in pin.recovers), frozenset(m for m, _ in pin.recovers)
    return options.only_keys, options.only_models


def _nothing_left(pin_id: str, model: str, key: str, readable: frozenset[str]) -> bool:
    """Whether ``model``'s shard finished on the same candidates (``key``) with no survivor left at the
    cap: every candidate it has is decided, so a run would only enumerate them again. A marker that does
    not read, or names a report that does not (``readable``: the keys of the reports that loaded), is a
    shard cut half-way: it is redone."""
    try:
        marked = frozenset(json.loads(_marker_path(pin_id, model).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return False
    if marked != readable or _pending_path(pin_id, model).is_file():
        return False
    try:
        return _key_path(pin_id, model).read_text(encoding="utf-8") == key
    except OSError:
        return False


def unfinished(pins: Sequence[Pin], options: MintOptions) -> list[tuple[str, str]]:
    """(pin id, model) of every model shard a run with ``options`` would still start: not finished and
    under the cap. What :func:`plan` would plan, without materializing templates or running mutators.

    A finished shard counts as left when it is under the cap with survivors pending: it stopped at the cap,
    then the driver dropped one of its kept tasks as a duplicate of another shard's (``distinct_bugs``), and
    the next run confirms the pending survivors (``_nothing_left``). Such a pin is not complete yet.
    """
    left: list[tuple[str, str]] = []
    for pin in pins:
        only_models = restriction(pin, options)[1]
        try:
            state = load_state(pin.id)
        except GoldError:
            if not pin.recovers:
                raise
            left.extend((pin.id, model) for model in sorted(only_models or ()))  # an augmented pin not built here yet
            continue
        nodes = models(state.manifest)
        if "completion" in options.kinds and not pin.recovers and not pin.is_history:
            from dbt_harvest.harvester.mint.shard import PAIRS_SHARD

            left.extend(
                (pin.id, f"{uid}.completion")
                for uid, node in sorted(nodes.items())
                if not why_not_mutable(node, pin)
                and not shard_finished(pin.id, f"{uid}.completion")
                and (options.only_models is None or uid in options.only_models)
            )
            if not shard_finished(pin.id, PAIRS_SHARD):
                left.append((pin.id, PAIRS_SHARD))
        if "repair" not in options.kinds:
            continue
        for uid, node in sorted(nodes.items()):
            if why_not_mutable(node, pin) or (only_models is not None and uid not in only_models):
                continue
            if pin.is_history and model_file(node, pin) not in pin.fix_files:
                continue
            if shard_finished(pin.id, uid) and not _pending_path(pin.id, uid).is_file():
                continue
            vouched = completed_keys(pin.id, uid)
            kept = sum(1 for key in vouched if _kept(pin.id, key))
            if kept < options.cap_of(pin.id):
                left.append((pin.id, uid))
    return left


def _kept(pin_id: str, key: str) -> bool:
    try:
        return bool(json.loads((reports_dir(pin_id) / f"{key}.json").read_text(encoding="utf-8")).get("kept"))
    except (OSError, ValueError, AttributeError):
        return False


def in_plan_order(
    jobs: Sequence[ShardJob], results: Iterable[tuple[ShardJob, ShardResult]]
) -> Iterator[tuple[ShardJob, ShardResult]]:
    """``results`` (in any order: a pool or Ray yields them as shards finish) re-ordered so that each pin's
    results come in the order of ``jobs``; a result waits until every earlier job of its pin has come.
    Duplicates are decided per pin against an index that grows as results are applied, so this order is
    what makes the kept tasks independent of ``--jobs`` and of timing. Pins do not wait for each other."""
    position = {id(job): i for i, job in enumerate(jobs)}
    queues: dict[str, deque[int]] = {}
    for i, job in enumerate(jobs):
        queues.setdefault(job.pin_id, deque()).append(i)
    held: dict[int, tuple[ShardJob, ShardResult]] = {}
    for job, result in results:
        held[position[id(job)]] = (job, result)
        queue = queues[job.pin_id]
        while queue and queue[0] in held:
            yield held.pop(queue.popleft())


def mint(
    pins: Sequence[Pin],
    options: MintOptions,
    target: MintTarget,
    on_result: Callable[[ShardJob, list[CandidateReport]], None] | None = None,
    jobs: Sequence[ShardJob] | None = None,
    on_round: Callable[[int], None] | None = None,
    tally: MintTally | None = None,
) -> list[CandidateReport]:
    """Mint every pin; returns the reports written by this run. ``jobs``: the caller's :func:`plan` of
    the same pins and options (planned here when not given). ``tally`` (progress) counts each round's
    shards before they run and each shard's result as it is applied, before ``on_result`` sees it.

    After the planned shards, the pins are planned again: what is left then is a shard the duplicate
    check put back under the cap (module docstring), and it runs in a further round (``on_round`` gets the
    number of its shards). Rounds end when nothing is left or when the time budget stopped a shard; a
    shard planned again from a state it already ran from (it decided nothing new) is not run again, so
    the rounds end. With completions, each pin's completion shards run once its repair shards are done
    (they try the mutants in the order the repair mint judged them, so the order of the rounds, not timing,
    decides what they keep), and the last round is each pin's pairs shard (two-model completions derived
    from the single ones kept by then)."""
    jobs = list(plan(pins, options, target) if jobs is None else jobs)
    written: list[CandidateReport] = []
    ran: set[tuple[str, str, frozenset[str]]] = set()
    later: list[Callable[[], list[ShardJob]]] = []
    if "completion" in options.kinds:
        if "repair" in options.kinds:
            later.append(lambda: plan(pins, replace(options, kinds=("completion",)), target))
        later.append(lambda: plan_pairs(pins, options, target))
    while True:
        while not jobs and later:
            jobs = [job for job in later.pop(0)() if (job.pin_id, job.shard_name, job.done_keys) not in ran]
            if jobs and on_round:
                on_round(len(jobs))
        if not jobs:
            break
        ran.update((job.pin_id, job.shard_name, job.done_keys) for job in jobs)
        if tally is not None:
            tally.plan(jobs)
        decided, stopped, dropped = _run_round(jobs, options, target, on_result, tally)
        written.extend(decided)
        if stopped:
            break
        again = [pin for pin in pins if pin.id in dropped]  # only there can a finished shard be under the cap
        jobs = [
            job
            for job in (plan(again, options, target) if again else [])
            if (job.pin_id, job.shard_name, job.done_keys) not in ran
        ]
        if jobs and on_round:
            on_round(len(jobs))
    return written


def _pairs_job(pin: Pin, options: MintOptions, target: MintTarget) -> ShardJob | None:
    """The pin's pairs shard, carrying its kept single completions, or None when it has nothing to do (an
    augmented pin, a target without a store to read, or a shard that finished on the same singles)."""
    from dbt_harvest.harvester.mint.completion import pairs_key, singles
    from dbt_harvest.harvester.mint.shard import PAIRS_SHARD

    if pin.recovers or pin.is_history or target.stored is None:
        return None
    split, group = _split_of(pin, target)
    kept = singles(target.stored(split, pin.id))
    if options.only_ids is not None:
        kept = [t for t in kept if t.instance_id in options.only_ids]
    key = pairs_key(kept)
    if (
        shard_finished(pin.id, PAIRS_SHARD)
        and _key_matches(pin.id, PAIRS_SHARD, key)
        and _markers_read(pin.id, PAIRS_SHARD, completed_keys(pin.id, PAIRS_SHARD))
    ):
        return None
    return ShardJob(
        pin_id=pin.id,
        model="",
        split=split,
        split_group=group,
        families=options.families,
        max_per_model=1,
        already_kept=0,
        done_keys=frozenset(),
        seed=options.seed,
        sandboxed=options.sandboxed,
        deadline=options.deadline,
        candidates_key=key,
        kind="completion-pairs",
        records=tuple(t.to_json() for t in kept),
        only_ids=options.only_ids,  # a restricted run derives some pairs only: it withdraws none
    )


def plan_pairs(pins: Sequence[Pin], options: MintOptions, target: MintTarget) -> list[ShardJob]:
    """Each pin's pairs shard that is still to run (after every single completion shard of the pin)."""
    return [job for pin in pins if (job := _pairs_job(pin, options, target)) is not None]


def _run_round(
    jobs: Sequence[ShardJob],
    options: MintOptions,
    target: MintTarget,
    on_result: Callable[[ShardJob, list[CandidateReport]], None] | None,
    tally: MintTally | None = None,
) -> tuple[list[CandidateReport], bool, set[str]]:
    """Run ``jobs`` and apply their results in plan order: the reports written, whether any shard was
    stopped by the time budget, and the pins where the duplicate check dropped a kept task."""
    runner = run_ray(jobs, options.address) if options.executor == "ray" else run_local(jobs, options.jobs)
    written: list[CandidateReport] = []
    stopped = False
    dropped: set[str] = set()
    indexes: dict[str, dict[str, dict[str, str]]] = {}
    for job, result in in_plan_order(jobs, runner):
        index = indexes.setdefault(job.pin_id, load_index(job.pin_id))
        reports, tasks = distinct_bugs(result, index)
        if len(tasks) < len(result.tasks):
            dropped.add(job.pin_id)
        _withdraw(job, result, tasks, target)
        for record in tasks:
            target.store(record)
        for report in reports:  # the report after its task: a report means its task is already stored
            atomic.write_text(
                reports_dir(report.pin) / f"{report.key}.json", json.dumps(report.to_dict(), sort_keys=True)
            )
            written.append(report)
        keys = sorted(job.done_keys | {r.key for r in result.reports})
        if result.stopped:  # the budget ran out: vouch for what it decided; the shard is not finished
            stopped = True
            atomic.write_text(_index_path(job.pin_id), json.dumps(index, sort_keys=True))
            if result.reports:
                atomic.write_text(_part_path(job.pin_id, job.shard_name), json.dumps(keys))
            if tally is not None:
                tally.add(job, reports, stopped=True)
            if on_result:
                on_result(job, list(reports))
            continue
        pending_file = _pending_path(job.pin_id, job.shard_name)
        if result.pending:
            atomic.write_text(
                pending_file,
                json.dumps(
                    [{"key": k, "operator": op, "family": fam} for k, op, fam in result.pending], sort_keys=True
                ),
            )
        else:
            pending_file.unlink(missing_ok=True)
        atomic.write_text(
            _dead_path(job.pin_id, job.shard_name),
            json.dumps(
                [{"operator": d.operator, "family": d.family, "why": d.why} for d in result.dead], sort_keys=True
            ),
        )
        atomic.write_text(_index_path(job.pin_id), json.dumps(index, sort_keys=True))
        if job.candidates_key:
            atomic.write_text(_key_path(job.pin_id, job.shard_name), job.candidates_key)
        else:
            _key_path(job.pin_id, job.shard_name).unlink(missing_ok=True)
        atomic.write_text(_marker_path(job.pin_id, job.shard_name), json.dumps(keys))  # the marker last (docstring)
        _part_path(job.pin_id, job.shard_name).unlink(missing_ok=True)
        if tally is not None:
            tally.add(job, reports)
        if on_result:
            on_result(job, list(reports))
    return written, stopped, dropped


def _withdraw(job: ShardJob, result: ShardResult, kept: list[TaskRecord], target: MintTarget) -> None:
    """Remove from the store what this decision no longer keeps: the tasks the shard withdrew, and after a
    pairs shard (it derives every two-model completion of the pin) each stored one it did not derive."""
    if target.withdraw is None or result.stopped:
        return
    gone = set(result.withdrawn) - {t.instance_id for t in kept}
    if job.kind == "completion-pairs" and job.only_ids is None and target.stored is not None:
        from dbt_harvest.core.patching import parse_patch

        derived = {t.instance_id for t in kept}
        gone |= {
            t.instance_id
            for t in target.stored(job.split, job.pin_id)
            if t.kind == "completion" and len(parse_patch(t.broken_patch)) > 1 and t.instance_id not in derived
        }
    for instance_id in sorted(gone):
        target.withdraw(job.split, job.pin_id, instance_id)


def distinct_bugs(
    result: ShardResult, index: dict[str, dict[str, str]]
) -> tuple[list[CandidateReport], list[TaskRecord]]:
    """The shard's reports and tasks with duplicates of the pin's kept tasks dropped; ``index`` grows.

    A kept task whose broken-output signature or statement digest the index maps to another task is
    turned into a rejection (``duplicate`` / ``duplicate_statement``) and its record is not stored.
    """
    from dataclasses import replace as _replace

    records = {t.instance_id: t for t in result.tasks}
    reports: list[CandidateReport] = []
    kept_ids: set[str] = set()
    for report in result.reports:
        if not report.kept or not report.task_id:
            reports.append(report)
            continue
        reason = ""
        other = index["signatures"].get(report.signature) if report.signature else None
        if other and other != report.task_id:
            reason = "duplicate"
        else:
            other = index["statements"].get(report.statement_digest) if report.statement_digest else None
            if other and other != report.task_id:
                reason = "duplicate_statement"
        if reason:
            reports.append(
                _replace(
                    report,
                    kept=False,
                    reason=reason,
                    task_id="",
                    detail=f"the same {'broken outputs' if reason == 'duplicate' else 'statement'} as {other}",
                )
            )
            continue
        if report.signature:
            index["signatures"][report.signature] = report.task_id
        if report.statement_digest:
            index["statements"][report.statement_digest] = report.task_id
        kept_ids.add(report.task_id)
        reports.append(report)
    return reports, [records[i] for i in records if i in kept_ids]


def _of_kind(report: dict, kind: str | None) -> bool:
    """Whether a candidate report belongs to ``kind`` (None: every kind); a completion shard's report is
    of family ``completion``."""
    return kind is None or (report.get("family") == "completion") == (kind == "completion")


class _Row(TypedDict):
    """One operator's or family's line of the yield report."""

    candidates: int
    dead_sites: dict[str, int]
    screened_out: dict[str, int]
    confirm_rejected: dict[str, int]
    survived_screen: int
    kept: int
    not_confirmed_cap: int


#: the yield report's quality counts, in the order it lists them (then ``local_tests`` and the rate)
_QUALITY_COUNTS = (
    "kept",
    "informative_wrong_repair",
    "weak",
    "claims_checked",
    "statement_false",
    "duplicates_dropped",
    "duplicate_statements_dropped",
    "local_tests_zero",
    "dead_sites",
)


@dataclass
class _Yield:
    """The running counts behind :func:`yield_report`, fed one report, pending survivor or dead site at a time."""

    per_op: dict[str, _Row] = field(default_factory=dict)
    per_family: dict[str, _Row] = field(default_factory=dict)
    per_model: dict[str, int] = field(default_factory=dict)
    per_pin: dict[str, int] = field(default_factory=dict)
    per_repo: dict[str, int] = field(default_factory=dict)
    silent: int = 0
    loud: int = 0
    quality: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_QUALITY_COUNTS, 0))
    local_tests: dict[str, int] = field(default_factory=dict)

    def rows(self, operator: str, family: str) -> tuple[_Row, _Row]:
        """The operator's and the family's rows (created empty on first use)."""
        return self.per_op.setdefault(operator, _row()), self.per_family.setdefault(family, _row())

    def candidate(self, r: dict[str, Any]) -> None:
        """Count one candidate report: its rows' outcome, the quality reasons, and its task when kept."""
        for row in self.rows(r["operator"], r["family"]):
            row["candidates"] += 1
            if r["stage"] == "screen" and not r["kept"]:
                _bump(row["screened_out"], r["reason"])
            else:
                row["survived_screen"] += 1
                if r["kept"]:
                    row["kept"] += 1
                elif r["stage"] == "confirm":
                    _bump(row["confirm_rejected"], r["reason"])
        reason = r.get("reason", "")
        self.quality["statement_false"] += reason == "statement_false"
        self.quality["duplicates_dropped"] += reason == "duplicate"
        self.quality["duplicate_statements_dropped"] += reason == "duplicate_statement"
        if r["kept"] and r.get("task_id"):
            self.kept_task(r)

    def kept_task(self, r: dict[str, Any]) -> None:
        """Count a kept task: per model, pin and repository, how it shows, and its quality figures."""
        _bump(self.per_model, r["model"])
        _bump(self.per_pin, r["pin"])
        _bump(self.per_repo, r["pin"].split("@", 1)[0].replace("__", "/", 1))
        # silent or loud says how a planted bug shows itself; a missing model is neither
        if r.get("family") != "completion":
            self.silent += bool(r.get("silent"))
            self.loud += r.get("silent") is False
        self.quality["kept"] += 1
        self.quality["informative_wrong_repair"] += bool(r.get("informative"))
        self.quality["weak"] += r.get("informative") is False
        self.quality["claims_checked"] += int(r.get("claims_checked") or 0)
        self.quality["local_tests_zero"] += r.get("local_tests") == 0
        if r.get("local_tests") is not None:
            _bump(self.local_tests, local_tests_bucket(int(r["local_tests"])))

    def pending(self, r: dict[str, Any]) -> None:
        """Count a screening survivor left unconfirmed at the per-model cap."""
        for row in self.rows(r.get("operator", "?"), r.get("family", "?")):
            row["candidates"] += 1
            row["survived_screen"] += 1
            row["not_confirmed_cap"] += 1

    def dead(self, r: dict[str, Any]) -> None:
        """Count a dead mutator site (not a candidate) under its reason."""
        self.quality["dead_sites"] += 1
        for row in self.rows(r.get("operator", "?"), r.get("family", "?")):
            _bump(row["dead_sites"], r.get("why", "?"))

    def to_dict(self) -> dict[str, Any]:
        """The report :func:`yield_report` returns."""
        kept = self.quality["kept"]
        rate = round(self.quality["informative_wrong_repair"] / kept, 4) if kept else None
        return {
            "operators": self.per_op,
            "families": self.per_family,
            "tasks_per_model": self.per_model,
            "tasks_per_pin": self.per_pin,
            "tasks_per_repository": self.per_repo,
            "silent": self.silent,
            "loud": self.loud,
            "quality": {**self.quality, "local_tests": self.local_tests, "informative_rate": rate},
        }


def _bump(counts: dict[str, int], key: str) -> None:
    """One more of ``key`` in ``counts``."""
    counts[key] = counts.get(key, 0) + 1


def yield_report(pin_ids: Sequence[str], kind: str | None = None) -> dict[str, Any]:
    """The quality report of the pins' minting, per family and per operator: dead sites (not
    candidates), candidates, each rejection reason by stage, survivors left at the per-model cap, kept;
    and over the kept tasks: how many have an informative wrong repair, how many statement claims were
    checked on built tables, duplicates dropped, tasks whose mutated lineage no dbt test covers
    (``local_tests: 0``), tasks per model, pin and repository. ``kind``: only that kind's reports (a
    completion shard reports once per model, as family ``completion``)."""
    counted = _Yield()
    for pin_id in pin_ids:
        for r in load_reports(pin_id):
            if _of_kind(r, kind):
                counted.candidate(r)
        for r in pending(pin_id) if kind != "completion" else ():
            counted.pending(r)
        for r in dead_sites(pin_id) if kind != "completion" else ():
            counted.dead(r)
    return counted.to_dict()


def _row() -> _Row:
    """An operator's or family's row with nothing counted yet."""
    return {
        "candidates": 0,
        "dead_sites": {},
        "screened_out": {},
        "confirm_rejected": {},
        "survived_screen": 0,
        "kept": 0,
        "not_confirmed_cap": 0,
    }

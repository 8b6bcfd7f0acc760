"""Grade an edited task: build the task's project with an agent's edits, score it against gold.

``grade(task, edits, mode)`` is the one path for everything that grades edits of a task outside the
mint: the GRPO reward (``build_and_score``, the function train.reward's harvester backend calls), the
eval environment's ``validate`` and ``submit`` (``grade(..., tests=True)``) and so the audit.
``edits`` maps repo-relative paths to full new texts; the answer (``verdict.Graded``) is the official and
strict verdicts of the task's broken project with those edits, graded by ``core.scorer`` against the
pin's gold. A build failure or a timeout is a 0 with its reason, never an exception (gold-side
problems still raise).

Three strategies, fastest first (each per task, per process, prepared once and reused):

- ``fast``: every changed file is a plain SQL model edited outside Jinja → the compiled SQL of the
  edited model and of its descendants is re-run in the locked-down screening engine (``fast.py``);
  milliseconds per rollout; with ``tests`` the project's dbt tests run there too;
- ``dbt``: otherwise, a real sandboxed dbt build of only the affected models (``--select m+`` without
  seeds) on a copy of the pin's built state, in a workspace restored per rollout from a prepared snapshot
  (broken patch applied, profile written, dbt's partial-parse state primed once) — the incremental path
  of the mint's confirmation; seconds per rollout;
- ``naive``: a fresh workspace and a full ``dbt seed`` + ``dbt build`` per rollout (what the environment
  falls back to, since it reports every dbt test of the project; edits to macros, YAML or new files also
  take this path). Given a ``warm.WarmBuilds`` (the environment holds one), the same build runs in a warm
  sandboxed child on a workspace reset to the pristine tree, instead of a cold child per build.

In the first two the relations that the rollout rebuilds are dropped from the copy of the built state
first: they hold the right answer, and an edit such as ``select * from {{ this }}`` must not read it.
Every byte a rollout may have written (workspace files, dbt's target/, the database) is restored before
the next one, so one rollout cannot influence another's reward.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.home import harvest_home, pins_dir, tmp_dir
from dbt_harvest.core.patching import PatchError, parse_patch
from dbt_harvest.core.pin import Pin, pin_path, read_pin
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.harvester.build import BuildResult, build_workspace
from dbt_harvest.harvester.gold import gold_path
from dbt_harvest.harvester.grading.fast import (
    DataTest,
    FastScorer,
    Unsupported,
    build_children,
    clock_views,
    closure,
    compiled_after_edit,
    data_tests,
    drop_relations,
)
from dbt_harvest.harvester.grading.verdict import Graded, grade_build
from dbt_harvest.harvester.grading.warm import WarmBuilds
from dbt_harvest.harvester.mint.candidates import model_file
from dbt_harvest.harvester.mint.lineage import ModelNode, models
from dbt_harvest.harvester.sandbox import DbtStep, Limits, run_steps, safe_fs, write_profile
from dbt_harvest.harvester.state import load_state
from dbt_harvest.harvester.task_tree import TreeSource, broken_tree

MODES = ("fast", "dbt", "naive")
#: wall-time bound of one sandboxed reward build (the reward pool's own per-rollout timeout also applies)
REWARD_LIMITS = Limits(wall_s=300.0)
#: What DuckDB may touch in a reward build: only what the database needs (no folder writable).
REWARD_DUCKDB_SCOPE = "database"
_PARTIAL_PARSE = "partial_parse.msgpack"


class RewardBuildError(HarvestError):
    """A task cannot be prepared for rewards (its pin, built state or broken patch is unusable)."""


@dataclass
class TaskContext:
    """Everything one task's rollouts share in this process, made on first use."""

    task: TaskRecord
    pin: Pin
    nodes: dict[str, ModelNode]
    by_file: dict[str, str]  # repo-relative model file -> unique id (root project only)
    task_model: str
    database: Path  # the pin's verified built state
    gold: Path
    root: Path  # private scratch of this task
    pristine: Path  # the broken workspace, profile written, dbt parse state primed (never built in)
    originals: dict[str, str]  # repo-relative model file -> text at the pinned commit
    profile: str
    catalog: str
    tests: list[DataTest] | str = ""  # the project's dbt tests, or why the fast path cannot run them
    children: dict[str, int] = field(default_factory=dict)  # node -> models/seeds/snapshots built from it
    outside: frozenset[str] = frozenset()  # models with a non-model child dbt would rebuild (a snapshot)
    bases: dict[tuple[str, ...], Path] = field(default_factory=dict)
    scorers: dict[tuple[str, ...], FastScorer] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    primed: bool = False
    missing: tuple[str, ...] = ()  # model files the broken patch removes (a completion task's)

    def close(self) -> None:
        for scorer in self.scorers.values():
            scorer.close()
        self.scorers.clear()
        safe_fs.rmtree(self.root)


_CONTEXTS: dict[tuple[str, str], TaskContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def _checked_edits(edits: Mapping[str, str]) -> dict[str, str]:
    clean: dict[str, str] = {}
    for path, text in edits.items():
        posix = PurePosixPath(path)
        if not path or posix.is_absolute() or ".." in posix.parts or "\x00" in path:
            raise Unsupported(f"edit path {path!r} leaves the project")
        if not isinstance(text, str):
            raise Unsupported(f"edit of {path!r} is not text")
        if any(part.startswith(".harvest") for part in posix.parts) or posix.suffix in {".duckdb", ".msgpack"}:
            raise Unsupported(f"edit path {path!r} is the harvester's own or a database, not project code")
        clean[str(posix)] = text
    return clean


def _context(task: TaskRecord) -> TaskContext:
    key = (str(harvest_home()), task.instance_id)
    with _CONTEXTS_LOCK:
        found = _CONTEXTS.get(key)
        if found is None:
            found = _prepare(task)
            _CONTEXTS[key] = found
        return found


def _prepare(task: TaskRecord) -> TaskContext:
    from dbt_harvest.harvester.discovery import discover

    pin = read_pin(pin_path(task.pin, pins_dir()))
    if pin.gold_sha256 != task.gold_sha256:
        raise RewardBuildError(
            f"{task.instance_id}: the task's gold {task.gold_sha256[:12]} is not its pin's "
            f"({pin.gold_sha256[:12]}); re-mint the task"
        )
    state = load_state(pin.id)
    nodes = models(state.manifest)
    # repo-relative model files, as the mint names ``task.file`` (a ``local: ../`` package's models too)
    by_file = {file: uid for uid, node in nodes.items() if (file := model_file(node, pin)) is not None}
    if task.file not in by_file:
        raise RewardBuildError(f"{task.instance_id}: {task.file} is not a model of {pin.id}")
    source = TreeSource(pin)
    original = source.template()
    originals = {path: (original / path).read_text(encoding="utf-8") for path in by_file if (original / path).is_file()}
    root = Path(tempfile.mkdtemp(prefix="reward-", dir=tmp_dir()))
    pristine = root / "pristine"
    try:
        broken_tree(source, task.broken_patch, pristine)
    except PatchError as exc:
        safe_fs.rmtree(root)
        raise RewardBuildError(f"{task.instance_id}: broken_patch does not apply to the pin ({exc})") from None
    profile = discover(pristine, pin.project_dir).profile
    write_profile(
        pristine,
        pin.project_dir,
        profile,
        pin.profile_schema,
        db_file=pin.db_file,
        exclude_tests=pin.excluded_tests,
        toolchain=pin.toolchain,
    )
    catalog = next((n.relation.split(".")[0].strip('"') for n in nodes.values() if n.relation), "build")
    try:
        tests: list[DataTest] | str = data_tests(state.manifest, pin.known_failing_tests)
    except Unsupported as exc:
        tests = str(exc)
    outside = frozenset(
        parent
        for node in dict(state.manifest.get("nodes") or {}).values()
        if node.get("resource_type") == "snapshot"
        for parent in (node.get("depends_on") or {}).get("nodes") or ()
    )
    return TaskContext(
        task=task,
        pin=pin,
        nodes=nodes,
        by_file=by_file,
        task_model=by_file[task.file],
        database=state.database,
        gold=gold_path(pin.gold_sha256),
        root=root,
        pristine=pristine,
        originals=originals,
        profile=profile,
        catalog=catalog,
        tests=tests,
        children=build_children(state.manifest),
        outside=outside,
        missing=tuple(p.path for p in parse_patch(task.broken_patch) if p.deleted and p.path in by_file),
    )


def _final_texts(ctx: TaskContext, edits: Mapping[str, str]) -> tuple[dict[str, str | None], bool]:
    """Model file -> final text for every model file that differs from the pin (None: the file is missing,
    a completion task nobody completed), and whether only known model files changed (a macro, YAML or new
    file needs a full build)."""
    finals: dict[str, str | None] = {}
    for path in (ctx.task.file, *ctx.missing):  # a completion task's removed models are None until written
        finals[path] = (ctx.pristine / path).read_text(encoding="utf-8") if (ctx.pristine / path).is_file() else None
    only_models = True
    for path, text in edits.items():
        if path in ctx.originals:
            finals[path] = text
        else:
            current = ctx.pristine / path
            if not (current.is_file() and current.read_text(encoding="utf-8") == text):
                only_models = False
    changed = {path: text for path, text in finals.items() if text != ctx.originals[path]}
    return changed, only_models


def _roots(ctx: TaskContext, changed: Mapping[str, str | None]) -> tuple[str, ...]:
    """The models a rollout rebuilds (and their descendants): the task's model, every changed model, and every
    model a completion task removed (graded, so rebuilt even when written back exactly as the pin has it: a
    two-model completion's upstream model is no descendant of the task's model)."""
    return tuple(sorted({ctx.task_model, *(ctx.by_file[path] for path in (*changed, *ctx.missing))}))


def _base(ctx: TaskContext, roots: tuple[str, ...]) -> Path:
    """The pin's built state without the relations ``roots`` and their descendants rebuild (cached)."""
    if roots not in ctx.bases:
        order = closure(ctx.nodes, roots)
        ctx.bases[roots] = drop_relations(
            ctx.database, ctx.root / f"base-{len(ctx.bases)}.duckdb", [ctx.nodes[uid] for uid in order]
        )
    return ctx.bases[roots]


def _fast(ctx: TaskContext, edits: Mapping[str, str], tests: bool = False, capture_to: Path | None = None) -> Graded:
    if ctx.pin.toolchain is not None:
        # the fast path runs compiled SQL in this process's DuckDB; the pin builds under its toolchain's
        raise Unsupported(f"the pin builds under {ctx.pin.toolchain.label}: its own dbt and DuckDB decide")
    changed, only_models = _final_texts(ctx, edits)
    if not only_models:
        raise Unsupported("a file other than a known model changed")
    if any(text is None for text in changed.values()):
        raise Unsupported("a model file is missing: dbt decides what its absence breaks")
    if tests and isinstance(ctx.tests, str):
        raise Unsupported(ctx.tests)
    compiled = {
        ctx.by_file[path]: compiled_after_edit(ctx.nodes[ctx.by_file[path]], ctx.originals[path], text)
        for path, text in changed.items()
        if text is not None
    }
    roots = _roots(ctx, changed)
    order = closure(ctx.nodes, roots)
    if any(uid in ctx.outside for uid in order):
        raise Unsupported("a snapshot is built from a model this edit rebuilds")
    if reading := clock_views(ctx.nodes, order):
        raise Unsupported(f"{reading[0]} is a view that reads the clock: read from the built state it gives today")
    scorer = ctx.scorers.get(roots)
    if scorer is None:
        scorer = FastScorer(
            _base(ctx, roots),
            ctx.catalog,
            ctx.root / f"engine-{len(ctx.scorers)}",
            ctx.nodes,
            order,
            ctx.pin.clock,
            ctx.gold,
        )
        ctx.scorers[roots] = scorer
    if not scorer.covers(ctx.task.grading):
        raise Unsupported("a graded table is not rebuilt by this rollout")
    run_tests = ctx.tests if tests and not isinstance(ctx.tests, str) else []
    found = scorer.score(compiled, ctx.task.grading, run_tests, ctx.children, capture_to)
    if found.blocking_failures:
        raise Unsupported(f"{found.blocking_failures[0]} fails, and dbt build would skip what is built from its model")
    return replace(found, tests_total=len(run_tests), blocking_failures=())


def _prime(ctx: TaskContext) -> None:
    """Run ``dbt parse`` once on the broken project, sandboxed, and keep its partial-parse state in the
    pristine snapshot, so each rollout re-parses only the files it changed."""
    if ctx.primed:
        return
    ctx.primed = True
    work = ctx.root / "prime"
    safe_fs.rmtree(work)
    shutil.copytree(ctx.pristine, work, symlinks=True)
    run = run_steps(
        work,
        ctx.pin.project_dir,
        [DbtStep(("parse",))],
        clock=ctx.pin.clock,
        limits=REWARD_LIMITS,
        log_path=ctx.root / "prime.log",
        duckdb_scope=REWARD_DUCKDB_SCOPE,
    )
    state = f"{ctx.pin.project_dir}/target/{_PARTIAL_PARSE}"
    if run.ok and safe_fs.is_file(work, state):
        # read beneath the workspace the child wrote, never through a link it planted
        safe_fs.copy_out(work, state, ctx.pristine / state, max_bytes=REWARD_LIMITS.workspace_bytes)
    safe_fs.rmtree(work)


def _restore(ctx: TaskContext, edits: Mapping[str, str]) -> Path:
    """The rollout's workspace: a fresh copy of the pristine snapshot with the edits written."""
    work = ctx.root / "rollout"
    safe_fs.rmtree(work)
    shutil.copytree(ctx.pristine, work, symlinks=True)
    _write_edits(work, edits)
    return work


def _write_edits(work: Path, edits: Mapping[str, str]) -> None:
    """Write a rollout's files beneath ``work``, never through a link (safe_fs)."""
    for path, text in edits.items():
        try:
            safe_fs.write_text(work, path, text)
        except safe_fs.UnsafePathError:
            raise Unsupported(f"edit path {path!r} goes through a link") from None


def _build_and_grade(
    ctx: TaskContext,
    work: Path,
    select: tuple[str, ...],
    seed: bool,
    path: str,
    limits: Limits,
    capture_to: Path | None,
) -> Graded:
    result = build_workspace(
        work,
        ctx.pin.project_dir,
        ctx.profile,
        ctx.pin.profile_schema,
        ctx.pin.clock,
        limits=limits,
        log_path=ctx.root / "rollout.log",
        select=select,
        seed=seed,
        duckdb_scope=REWARD_DUCKDB_SCOPE,
        exclude_tests=ctx.pin.excluded_tests,
        db_file=ctx.pin.db_file,
        toolchain=ctx.pin.toolchain,
    )
    return _graded(ctx, result, path, capture_to)


def _graded(ctx: TaskContext, result: BuildResult, path: str, capture_to: Path | None) -> Graded:
    if result.run.timed_out:
        return Graded.not_built(
            f"timeout: {result.first_error}",
            result.first_error,
            tests_total=result.tests_total,
            failed_tests=tuple(sorted(result.failed_tests)),
            path=path,
        )
    built = result.gold_file if result.models_ok else None
    if built is not None and capture_to is not None:  # the host's own copy of the captured tables
        built = Path(shutil.move(str(built), str(capture_to)))
    return grade_build(
        ctx.gold,
        built,
        ctx.task.grading,
        built_ok=result.models_ok,
        first_error=result.first_error,
        tests_total=result.tests_total,
        failed_tests=result.failed_tests,
        capture=built if capture_to is not None else None,
        path=path,
    )


def _dbt(ctx: TaskContext, edits: Mapping[str, str], limits: Limits, capture_to: Path | None) -> Graded:
    changed, only_models = _final_texts(ctx, edits)
    if not only_models:
        return _naive(ctx, edits, limits, capture_to)
    _prime(ctx)
    roots = _roots(ctx, changed)
    base = _base(ctx, roots)
    work = _restore(ctx, edits)
    shutil.copyfile(base, work / ctx.pin.db_file)
    return _build_and_grade(
        ctx,
        work,
        tuple(f"{ctx.nodes[uid].name}+" for uid in roots),
        seed=False,
        path="dbt",
        limits=limits,
        capture_to=capture_to,
    )


def _naive(ctx: TaskContext, edits: Mapping[str, str], limits: Limits, capture_to: Path | None) -> Graded:
    work = ctx.root / "rollout"
    safe_fs.rmtree(work)
    broken_tree(TreeSource(ctx.pin), ctx.task.broken_patch, work)
    _write_edits(work, edits)
    return _build_and_grade(ctx, work, (), seed=True, path="naive", limits=limits, capture_to=capture_to)


def _warm(
    ctx: TaskContext, edits: Mapping[str, str], limits: Limits, capture_to: Path | None, warm: WarmBuilds
) -> Graded:
    """The naive strategy's build (a full seed + build from nothing) in ``warm``'s child."""
    if not ctx.primed:  # once per task, as _prime (a failed parse leaves full parses to each build)
        ctx.primed = True
        if not warm.reuse_parse_state(ctx.pin, ctx.pristine, limits):
            warm.prime(ctx.pin, ctx.pristine, limits)
    try:
        result = warm.build(ctx.pin, ctx.pristine, edits, limits)
    except safe_fs.UnsafePathError:
        raise Unsupported("an edit path goes through a link") from None
    return _graded(ctx, result, "warm", capture_to)


def grade(
    task: TaskRecord,
    edits: Mapping[str, str],
    mode: str = "fast",
    *,
    fallback: str | None = "dbt",
    tests: bool = False,
    capture_to: Path | None = None,
    limits: Limits | None = None,
    warm: WarmBuilds | None = None,
) -> Graded:
    """THE way to grade an edited task: ``task``'s broken project with ``edits`` (repo-relative path -> full
    new text) applied, built by the strategy ``mode`` names and scored against the pin's gold.

    ``mode``: ``fast`` (compiled SQL in the locked engine), ``dbt`` (a sandboxed build of the affected
    models on the pin's state) or ``naive`` (a fresh sandboxed seed + build). When ``fast`` cannot answer
    (``Unsupported``: a macro, YAML or new file changed, Jinja written, unit tests in the project, a
    failing test dbt would skip models after) the ``fallback`` strategy answers; ``fallback=None`` raises
    ``Unsupported`` instead (for a caller with a build path of its own). ``tests``: the fast path also
    runs every dbt test of the project (the dbt paths always report theirs). ``capture_to``: the graded
    tables are written there for the scorer's explainer. ``warm``: the ``naive`` builds run in that warm
    sandboxed child (``harvester.grading.warm``; same verdicts, without a cold start). A failed or refused
    build is a 0 with its reason, never an exception; a task whose pin or built state is unusable raises
    RewardBuildError.
    """
    if mode not in MODES or (fallback is not None and fallback not in MODES[1:]):
        raise ValueError(f"unknown grading mode {mode!r}/{fallback!r}; use one of {', '.join(MODES)}")
    started = time.perf_counter()
    try:
        clean = _checked_edits(edits)
    except Unsupported as exc:
        if mode == "fast" and fallback is None:
            raise
        return Graded.not_built(f"build failed: {exc}", path="refused")
    ctx = _context(task)
    limits = limits or REWARD_LIMITS
    with ctx.lock:
        try:
            if mode == "fast":
                try:
                    graded = _fast(ctx, clean, tests=tests, capture_to=capture_to)
                except Unsupported:
                    if fallback is None:
                        raise
                    mode = fallback
            if mode == "dbt":
                graded = _dbt(ctx, clean, limits, capture_to)
            elif mode == "naive" and warm is not None:
                graded = _warm(ctx, clean, limits, capture_to, warm)
            elif mode == "naive":
                graded = _naive(ctx, clean, limits, capture_to)
        except Unsupported as exc:
            if fallback is None:
                raise
            graded = Graded.not_built(f"build failed: {exc}", path="refused")
    return replace(graded, seconds=time.perf_counter() - started)


def build_and_score(task: TaskRecord, edits: Mapping[str, str]) -> Graded:
    """train.reward.BuildAndScore: the fast path where it applies, a sandboxed incremental build otherwise."""
    return grade(task, edits, "fast")


def build_and_score_dbt(task: TaskRecord, edits: Mapping[str, str]) -> Graded:
    """Always a real sandboxed dbt build of the affected models (never the fast path)."""
    return grade(task, edits, "dbt")


def release(task: TaskRecord | None = None) -> None:
    """Drop the prepared state of one task (or of all tasks) in this process."""
    with _CONTEXTS_LOCK:
        for key in [k for k in _CONTEXTS if task is None or k[1] == task.instance_id]:
            _CONTEXTS.pop(key).close()


atexit.register(release)

__all__ = [
    "MODES",
    "Graded",
    "RewardBuildError",
    "Unsupported",
    "build_and_score",
    "build_and_score_dbt",
    "grade",
    "release",
]

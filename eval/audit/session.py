"""One audit of one split, from a request to a written report: what `harvest audit` and `harvest experiment`
both run.

The order is the audit's contract: the frozen recipe is verified (and the arm not audited before) without
reading anything sealed; the driver is prepared (model loaded, endpoint reached) before the first episode
and before any unseal, so a driver that cannot play costs the recipe nothing; the test split is unsealed
for the recipe's arm (or resumed with the token its run folder recorded); the episodes run; the report is
written; a test audit's result goes to the committed results ledger.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbt_harvest.eval.audit.sealed import SealedAuditError

if TYPE_CHECKING:
    from dbt_harvest.core.task_record import TaskRecord
    from dbt_harvest.eval.audit.rundir import RunDir


@dataclass(frozen=True)
class AuditRequest:
    split: str  # train, dev or test
    driver: str  # oracle, noop, wrong, openai or hf
    run_dir: Path
    base_url: str = ""
    model: str = ""
    adapter: str | None = None
    revision: str | None = None  # hf: the model repository's revision (None: a local folder or the default)
    recipe: Path | None = None  # test split only: the frozen run folder
    arm: str = "recipe"  # test split only: recipe (its adapter) or base (no adapter)
    workers: int = 2
    max_turns: int = 30
    repeat_limit: int = 3
    max_new_tokens: int = 512
    benchmark: str = "corpus"  # corpus (our splits) or spider2-dbt (a local checkout's instances, eval/spider2)
    spider2: Path | None = None  # spider2-dbt: the checkout
    gold_aliases: tuple[tuple[str, str], ...] = ()  # spider2-dbt: instance id -> gold file shipped under another name
    allow_unavailable: bool = False  # spider2-dbt sealed: play even when instances cannot be (they count 0)
    spider2_results: Path | None = None  # spider2-dbt: also keep each graded database in Spider2's results layout
    kinds: tuple[
        str, ...
    ] = ()  # corpus train/dev only: audit just the tasks of these kinds (repair, completion); (): all


class _Quiet:
    """A progress reporter that shows nothing (``run_split`` without the CLI's)."""

    def note(self, text: str) -> None:
        """Show nothing."""

    def advance(self, n: int = 1, detail: str = "") -> None:
        """Count nothing."""


@contextlib.contextmanager
def _no_progress(label: str, total: int, unit: str) -> Iterator[_Quiet]:
    """The default ``progress``: a reporter that shows nothing."""
    yield _Quiet()


class AuditCounter:
    """An audit's tasks done and official passes, on its progress reporter (``bar``): the verdicts a
    resumed run folder already holds count at once, each new one as its episode ends (with its verdict
    line when ``note`` renders one). Piped, the reporter's lines read ``audit: 12/40 tasks, 5 passed``."""

    def __init__(self, bar: Any, note: Callable[[str], str] | None) -> None:
        self.bar, self.note, self.passed = bar, note, 0

    def kept(self, verdicts: list[dict[str, Any]]) -> None:
        """Count the verdicts kept from an earlier run of the folder (no verdict lines for them)."""
        if verdicts:
            self.passed += sum(verdict.get("official") == 1 for verdict in verdicts)
            self.bar.advance(len(verdicts), detail=f"{self.passed} passed")

    def played(self, verdict: dict[str, Any]) -> None:
        """Count one new verdict, after its line."""
        self.passed += verdict.get("official") == 1
        if self.note is not None:
            self.bar.note(self.note(f"{verdict['instance_id']}: rung {verdict['rung']} official {verdict['official']}"))
        self.bar.advance(1, detail=f"{self.passed} passed")


def driver_options(request: AuditRequest, frozen: Any) -> dict[str, Any]:
    """The driver's options for the request (a frozen recipe's hf driver plays the recipe's model or base)."""
    if request.driver == "openai":
        return {"base_url": request.base_url, "model": request.model, "max_tokens": request.max_new_tokens}
    if request.driver == "hf":
        options: dict[str, Any] = {
            "model": request.model,
            "adapter": request.adapter,
            "max_new_tokens": request.max_new_tokens,
            "revision": request.revision,
        }
        if frozen is not None:
            from dbt_harvest.eval.audit.sealed import recipe_driver_options

            options.update(recipe_driver_options(frozen, request.model, request.adapter, request.arm))
        return options
    return {}


def audited_kinds(request: AuditRequest) -> tuple[str, ...]:
    """The request's kind filter, sorted; () when it keeps every kind (naming them all is no filter). Only
    the corpus's train and dev splits take one: the sealed test split is audited once per recipe over all its
    tasks, and spider2-dbt's instances have no kinds."""
    from dbt_harvest.core.task_record import KINDS

    kinds = tuple(sorted(set(request.kinds)))
    if not kinds:
        return ()
    if request.benchmark != "corpus" or request.split == "test":
        raise SealedAuditError(
            "a kind filter applies to the corpus's train and dev splits only: the sealed test "
            "split and spider2-dbt are audited over all their tasks"
        )
    if unknown := sorted(set(kinds) - set(KINDS)):
        raise SealedAuditError(f"kind {', '.join(unknown)} is not one of {', '.join(KINDS)}")
    return () if set(kinds) == set(KINDS) else kinds


def run_split(
    request: AuditRequest,
    *,
    progress: Callable[..., Any] = _no_progress,
    note: Callable[[str], str] | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Audit ``request.split`` with ``request.driver`` into ``request.run_dir`` (resumed when it exists);
    -> the report (``eval.audit.report``). ``progress(label, total=, unit=)`` is a context manager with
    ``note``/``advance`` (the CLI's bar); ``note`` renders each episode's verdict line for it (None: no
    lines, the count only); ``say`` gets the one-line start message."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.eval.audit.rundir import RunDir
    from dbt_harvest.eval.audit.runner import AuditOptions
    from dbt_harvest.eval.drivers import make_driver
    from dbt_harvest.eval.env.episode import EpisodeLimits

    home, pins = harvest_home(), pins_dir()
    kinds = audited_kinds(request)
    if request.benchmark == "spider2-dbt":
        from dbt_harvest.eval.spider2.audit import run_spider2

        return run_spider2(
            request, pins, play=lambda *args, **kw: _play(*args, **kw, progress=progress, note=note, say=say)
        )
    frozen = None
    if request.split == "test":
        from dbt_harvest.eval.audit.sealed import check_recipe

        if request.recipe is None:
            raise SealedAuditError("the test split is sealed: audit it with a frozen recipe (harvest train freeze)")
        frozen = check_recipe(request.recipe, pins, request.arm)  # verified, not yet audited; nothing sealed read
    agent = make_driver(request.driver, **driver_options(request, frozen))
    agent.prepare()  # load the model / reach the endpoint before any episode and before the unseal
    run = RunDir(request.run_dir)
    sealed, tasks = _tasks(request, run, home, pins, kinds)
    if not tasks:
        what = f"{' or '.join(kinds)} tasks" if kinds else "tasks"
        raise SealedAuditError(f"the {request.split} split has no {what} in {home}")
    options = AuditOptions(
        workers=request.workers,
        kinds=kinds,
        limits=EpisodeLimits(max_turns=request.max_turns, repeat_limit=request.repeat_limit),
    )
    report = _play(
        run, request, request.split, tasks, agent, options, pins, sealed, progress=progress, note=note, say=say
    )
    if sealed is not None:
        from dbt_harvest.eval.audit.sealed import record_result

        record_result(pins, sealed, report)
    return report


def _tasks(
    request: AuditRequest, run: RunDir, home: Path, pins: Path, kinds: tuple[str, ...]
) -> tuple[dict[str, Any] | None, list[TaskRecord]]:
    """The sealed record and the tasks to audit: the test split unsealed for the recipe's arm (or resumed
    with the record its run folder holds); train or dev loaded, kept to ``kinds`` when it names some."""
    if request.split != "test":
        from dbt_harvest.corpora.store import load_tasks

        tasks = load_tasks(request.split, home, pins, purpose="eval")
        return None, [t for t in tasks if t.kind in kinds] if kinds else tasks
    from dbt_harvest.eval.audit.sealed import resume_tasks, unseal_tasks

    if run.run_file.exists() and run.read_run().get("sealed"):
        sealed = run.read_run()["sealed"]
        if str(sealed.get("arm") or "recipe") != request.arm:
            raise SealedAuditError(
                f"{request.run_dir} holds the {sealed.get('arm') or 'recipe'} arm's audit, "
                f"not the {request.arm} arm's; pass that arm or another run folder"
            )
        return sealed, resume_tasks(sealed, home, pins)
    assert request.recipe is not None
    return unseal_tasks(request.recipe, home, pins, request.arm)


def _play(
    run: Any,
    request: AuditRequest,
    split: str,
    tasks: list[Any],
    agent: Any,
    options: Any,
    pins: Path,
    sealed: dict[str, Any] | None,
    *,
    progress: Callable[..., Any],
    note: Callable[[str], str] | None,
    say: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Play every pending episode of the run folder and write its report; -> the report."""
    from dbt_harvest.eval.audit.report import write_report
    from dbt_harvest.eval.audit.runner import run_audit

    if say is not None:
        kinds = audited_kinds(request)
        only = f" ({' and '.join(kinds)} only)" if kinds else ""
        say(f"audit of {len(tasks)} {split} task(s){only} with driver {request.driver} -> {request.run_dir}")
    with progress("audit", total=len(tasks), unit="tasks") as bar:
        counter = AuditCounter(bar, note)
        run_audit(
            run, split, tasks, agent, options, pins=pins, sealed=sealed, progress=counter.played, kept=counter.kept
        )
    return write_report(run)

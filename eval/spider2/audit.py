"""`harvest audit --benchmark spider2-dbt`: a driver over one part of Spider 2.0-DBT, in our environment.

The same order as our own audits (``eval/audit/session.py``): a sealed audit's frozen recipe is verified
first (nothing recorded yet), the driver is prepared (model loaded, endpoint reached), then the sealed
start is recorded (``eval/spider2/sealed.py``), the episodes run, the report is written, and a sealed
result goes to the ledger. N is every instance of the part: one that cannot be played (no database, no
gold in the checkout) is in the run's task list, its episode fails to start and counts 0 with the reason,
so the score is k/N over the whole part, never over what was submitted (the official ``evaluate.py``
divides by the submitted). A sealed audit refuses to start while instances cannot be played, unless
``allow_unavailable`` says they may count 0. With ``spider2_results`` the graded database of every
submission is also kept in Spider2's results layout (``<dir>/<id>/<database>`` and
``results_metadata.jsonl``), so `harvest score --spider2` and the official evaluate.py can score exactly
what the audit graded.

Which instances form a part: the committed split (``eval/spider2/split.py``) when the checkout is the
benchmark (it holds an instance the split names), every instance of the part counting even when absent
from the checkout; otherwise (an export of our own train or dev tasks) every instance is a development
instance and there is no sealed part.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbt_harvest.eval.env.errors import EnvError
from dbt_harvest.eval.spider2.checkout import Checkout, Spider2Instance
from dbt_harvest.eval.spider2.split import DEV, PARTS, SEALED, Spider2Split

SPLIT_LABEL = "spider2-dbt/{part}"


class Spider2AuditError(EnvError):
    """A Spider2 audit cannot run as asked (an unknown part, instances that cannot be played, no instances)."""


def part_instances(checkout: Checkout, split: Spider2Split, part: str) -> list[Spider2Instance]:
    """The instances of ``part`` (see the module docstring); pure."""
    if part not in PARTS:
        raise Spider2AuditError(f"unknown Spider2 part {part!r}; one of {', '.join(PARTS)}")
    found = checkout.by_id()
    if not split.is_benchmark(set(found)):  # not the benchmark: an export of our own (never of our test split)
        return sorted(found.values(), key=lambda i: i.instance_id) if part == DEV else []
    names = split.dev if part == DEV else split.sealed
    return [
        found.get(iid)
        or Spider2Instance(
            iid, "", None, checkout.folder / "examples" / iid, problems=("not in this checkout's metadata",)
        )
        for iid in sorted(names)
    ]


def read_parts(checkout_dir: Path, aliases: dict[str, str]) -> tuple[Checkout, Spider2Split]:
    """The checkout (with the packages its last `harvest spider2 import` resolved) and the committed split."""
    from dbt_harvest.eval.spider2.checkout import checkout_folder, read_checkout
    from dbt_harvest.eval.spider2.imported import recorded_packages
    from dbt_harvest.eval.spider2.split import committed

    packages = recorded_packages(checkout_folder(checkout_dir).resolve())
    return read_checkout(checkout_dir, aliases, dict(packages)), committed()


def run_spider2(request: Any, pins: Path, *, play: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Audit one part of the checkout ``request.spider2`` (an ``eval.audit.session.AuditRequest``); ``play`` is
    the session's episode loop and report writer. -> the report."""
    from dbt_harvest.eval.audit.rundir import RunDir, task_set_sha256
    from dbt_harvest.eval.audit.runner import AuditOptions
    from dbt_harvest.eval.audit.session import driver_options
    from dbt_harvest.eval.drivers import make_driver
    from dbt_harvest.eval.env.episode import EpisodeLimits
    from dbt_harvest.eval.spider2 import sealed as ledger
    from dbt_harvest.eval.spider2.tasks import Spider2Tasks

    part = request.split
    if part not in PARTS:
        raise Spider2AuditError(
            f"Spider2 has a dev and a sealed part, not {part!r}: pass --split dev or --split sealed"
        )
    if request.spider2 is None:
        raise Spider2AuditError("no Spider2 checkout: pass --spider2 DIR (or run `harvest spider2 import DIR` once)")
    if part == SEALED and request.recipe is None:
        raise Spider2AuditError("the sealed Spider2 part is audited once per frozen recipe: pass --recipe runs/<run>")
    checkout, split = read_parts(request.spider2, dict(request.gold_aliases))
    instances = part_instances(checkout, split, part)
    if not instances:
        raise Spider2AuditError(
            f"{checkout.folder} has no {part} instances (an export of our own tasks has no sealed part)"
        )
    unavailable = [i for i in instances if not i.playable]
    if part == SEALED and unavailable and not request.allow_unavailable:
        raise Spider2AuditError(
            f"{len(unavailable)} of the {len(instances)} sealed instances cannot be played ({unavailable[0].instance_id}: "
            f"{unavailable[0].problems[0]}); a sealed audit happens once: complete the checkout, or pass "
            "--allow-unavailable to count them 0"
        )
    run = RunDir(request.run_dir)
    recorded = run.read_run() if run.run_file.exists() else {}
    sealed = recorded.get("sealed") if part == SEALED else None
    frozen = None
    if part == SEALED:
        assert request.recipe is not None
        if sealed:
            if sealed.get("arm") != request.arm:
                raise Spider2AuditError(
                    f"{request.run_dir} holds the {sealed.get('arm')} arm's sealed audit, not the "
                    f"{request.arm} arm's; pass that arm or another run folder"
                )
            ledger.resumable(pins, sealed)
            frozen = ledger.check_recipe(request.recipe, pins, request.arm, resuming=sealed)
        else:
            frozen = ledger.check_recipe(request.recipe, pins, request.arm)
    source = Spider2Tasks(
        instances,
        {i.instance_id: part for i in instances},
        clock=str(recorded.get("clock") or ""),
        results=request.spider2_results,
    )
    tasks = source.tasks
    agent = make_driver(request.driver, **driver_options(request, frozen))
    agent.prepare()  # before the sealed start: a driver that cannot play costs the recipe nothing
    if part == SEALED and not sealed:
        assert frozen is not None
        sealed = ledger.start(pins, frozen, request.arm, task_set_sha256(tasks))
    options = AuditOptions(
        workers=request.workers,
        benchmark=source,
        limits=EpisodeLimits(max_turns=request.max_turns, repeat_limit=request.repeat_limit),
    )
    report = play(run, request, SPLIT_LABEL.format(part=part), tasks, agent, options, pins, sealed)
    source.write_results_metadata()
    if sealed:
        ledger.record_result(pins, sealed, report)
    return report

"""`harvest mint`: turn pinned projects into verified tasks, repairs and completions (two-stage, resumable)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup

if TYPE_CHECKING:
    from dbt_harvest.core.pin import Pin
    from dbt_harvest.harvester.mint.pipeline import MintOptions, MintTarget
    from dbt_harvest.harvester.mint.shard import CandidateReport, ShardJob


@click.command("mint")
@click.argument("pin_ids", nargs=-1)
@click.option("--all", "all_pins", is_flag=True, help="Mint every pin under pins/.")
@click.option(
    "--split",
    "splits",
    multiple=True,
    type=click.Choice(["train", "dev", "test"]),
    help="With --all: only the pins reserved to this split (repeatable).",
)
@click.option(
    "--kinds",
    default="repair",
    show_default=True,
    help="Comma-separated task kinds: repair (undo one planted edit), completion (write a documented model "
    "whose file was removed, from its contract). Completion shards reuse the repair mint's screening "
    "where it ran, so mint repairs first or both together.",
)
@click.option("--families", help="Comma-separated operator families (filter,null,join,grain,time,values).")
@click.option(
    "--max-per-model",
    type=click.IntRange(1),
    default=None,
    help="At most this many tasks per dbt model file (survivors beyond it stay pending for a later run; "
    "repairs). Default: the cap pins/_tasks.lock records for each pin, else 3. With --write-lock the cap is "
    "recorded for these pins, so a rebuild mints them as deep.",
)
@click.option("--jobs", type=click.IntRange(1), default=1, show_default=True, help="Local worker processes.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--address", help="Ray cluster address (host:port); default starts a local instance.")
@click.option("--allow-weak", is_flag=True, help="Keep tasks without a confirmed wrong repair, flagged weak.")
@click.option("--writer", help="OpenAI-compatible base URL of a model that writes problem statements.")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the candidate order (which survivors fill the per-model cap); same seed, same tasks.",
)
@click.option("--no-sandbox", is_flag=True, help="Confirm without bubblewrap (trusted projects only).")
@click.option(
    "--budget-s",
    type=click.FloatRange(min=1),
    default=None,
    help="Wall-time budget in seconds, counted from the first shard: shards stop between candidates when it runs out, keeping "
    "everything decided; the next run resumes them and keeps the same tasks an unstopped run keeps.",
)
@click.option(
    "--verify-lock",
    is_flag=True,
    help="After minting, compare the tasks of these pins with pins/_tasks.lock; exit 1 on any difference.",
)
@click.option(
    "--write-lock",
    is_flag=True,
    help="After minting, rewrite the lock entries of these pins (all with --all) from the store; "
    "other pins' locked entries are kept.",
)
@click.option(
    "--rebuild-sealed",
    is_flag=True,
    help="This home's sealed store is empty (a fresh machine rebuilding the corpus): mint the test split "
    "into it and re-seal pins/_sealed.json as tasks land (refused for a non-empty store that "
    "disagrees with its seal). Check the result with --verify-lock.",
)
@click.option(
    "--only-locked",
    is_flag=True,
    help="Try only the candidates whose tasks pins/_tasks.lock lists for these pins (train and dev; the "
    "test split is locked as hashes only): re-mints a pin's locked tasks at a fraction of a full mint, "
    "e.g. after `harvest add --rebuild --rename-gold`. Check with --verify-lock; not a full rebuild.",
)
@click.option(
    "--rename-gold",
    is_flag=True,
    help="Augmented pins this run builds from their base name their gold by content even where an older "
    "byte name would reproduce (the move `harvest add --rebuild --rename-gold` makes for a base pin).",
)
@click.option(
    "--augment",
    is_flag=True,
    help="Distinguishing data: for candidates the seeds cannot tell from the original (equivalent/"
    "invisible; null, time, filter-value, join and grain families), add the fewest seed rows that can, as an augmented pin "
    "(kept only if the project still builds and passes its dbt tests), and mint them there.",
)
@json_option
@fails_cleanly
def command(
    pin_ids: tuple[str, ...],
    all_pins: bool,
    splits: tuple[str, ...],
    kinds: str,
    families: str | None,
    max_per_model: int | None,
    jobs: int,
    executor: str,
    address: str | None,
    allow_weak: bool,
    writer: str | None,
    seed: int,
    no_sandbox: bool,
    budget_s: float | None,
    rebuild_sealed: bool,
    augment: bool,
    rename_gold: bool,
    only_locked: bool,
    verify_lock: bool,
    write_lock: bool,
    as_json: bool,
) -> None:
    """Mint tasks from PIN_IDS (or --all): screen in DuckDB, confirm with sandboxed dbt builds."""
    from dbt_harvest.cli.corpus import lock_step, locked_caps
    from dbt_harvest.harvester.mint.pipeline import DEFAULT_MAX_PER_MODEL, MintOptions, unfinished, yield_report

    chosen_kinds, chosen_families = _checked_choices(
        pin_ids, all_pins, splits, kinds, families, verify_lock, write_lock, only_locked, augment
    )
    pins = _chosen_pins(pin_ids, all_pins, splits)
    options = MintOptions(
        families=chosen_families,
        max_per_model=max_per_model or DEFAULT_MAX_PER_MODEL,
        caps=() if max_per_model else locked_caps(),
        jobs=jobs,
        executor=executor,
        address=address,
        sandboxed=not no_sandbox,
        allow_weak=allow_weak,
        writer=writer,
        seed=seed,
        only_ids=_locked_ids(pins) if only_locked else None,
        kinds=chosen_kinds,
    )
    plain = _build_augmented(pins, sandboxed=not no_sandbox, augment=augment, rename_gold=rename_gold)
    counts, options = _run_mint(plain, options, budget_s=budget_s, rebuild_sealed=rebuild_sealed)
    recovered = _recover(pins, options, rebuild_sealed=rebuild_sealed, rename_gold=rename_gold) if augment else None
    report = yield_report([p.id for p in pins])
    left_jobs = unfinished(pins, options) if (verify_lock or write_lock or budget_s) else []
    left = sorted({pin_id for pin_id, _ in left_jobs})
    caps = {p.id: options.cap_of(p.id) for p in pins}
    lock = lock_step([p.id for p in pins], verify=verify_lock, write=write_lock, partial=left, caps=caps)
    if as_json:
        echo_json(
            {
                "this_run": counts,
                **report,
                **({"augmentation": recovered} if recovered is not None else {}),
                **({"lock": lock} if lock else {}),
                **({"unfinished": {"model_shards": len(left_jobs), "pins": left}} if budget_s else {}),
            }
        )
    else:
        if left_jobs and budget_s:
            click.echo(
                f"the budget ran out with {len(left_jobs)} model shard(s) left on {len(left)} pin(s); "
                "run the same command again to resume them"
            )
        _print_summary(report, counts, recovered, lock)
    if lock and not lock.get("same", True):
        raise SystemExit(1)


def _checked_choices(
    pin_ids: tuple[str, ...],
    all_pins: bool,
    splits: tuple[str, ...],
    kinds: str,
    families: str | None,
    verify_lock: bool,
    write_lock: bool,
    only_locked: bool,
    augment: bool,
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The kinds and families asked for; options that do not go together are refused (a usage error)."""
    if not pin_ids and not all_pins:
        raise click.UsageError("name at least one PIN_ID or pass --all")
    if verify_lock and write_lock:
        raise click.UsageError("give --verify-lock or --write-lock, not both")
    chosen_kinds = _chosen_kinds(kinds, augment)
    chosen_families = _chosen_families(families)
    if only_locked and augment:
        raise click.UsageError("--only-locked re-mints locked tasks; it does not combine with --augment")
    if splits and not all_pins:
        raise click.UsageError("--split chooses among --all's pins; give --all with it")
    return chosen_kinds, chosen_families


def _chosen_kinds(kinds: str, augment: bool) -> tuple[str, ...]:
    """The task kinds ``--kinds`` names, in its order without repeats; refused when unknown or empty."""
    from dbt_harvest.core.task_record import KINDS

    chosen = tuple(dict.fromkeys(k.strip() for k in kinds.split(",") if k.strip()))
    if not chosen or set(chosen) - set(KINDS):
        raise click.UsageError(f"--kinds {kinds!r}: give one or more of {', '.join(KINDS)}")
    if augment and "repair" not in chosen:
        raise click.UsageError("--augment recovers repair candidates; add repair to --kinds")
    return chosen


def _chosen_families(families: str | None) -> tuple[str, ...] | None:
    """The operator families ``--families`` names (None: every family); refused when one is unknown."""
    from dbt_harvest.mutators import FAMILIES

    chosen = tuple(f.strip() for f in families.split(",")) if families else None
    if chosen and set(chosen) - set(FAMILIES):
        raise click.UsageError(f"unknown families {sorted(set(chosen) - set(FAMILIES))}; known: {', '.join(FAMILIES)}")
    return chosen


def _chosen_pins(pin_ids: tuple[str, ...], all_pins: bool, splits: tuple[str, ...]) -> list[Pin]:
    """The pins to mint: every pin with ``--all`` (only those reserved to ``splits`` when given), else those named."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import list_pins, pin_path, read_pin

    pins = list_pins(pins_dir()) if all_pins else [read_pin(pin_path(p, pins_dir())) for p in pin_ids]
    if splits:
        from dbt_harvest.corpora.ledger import split_of

        pins = [p for p in pins if split_of(p.id, pins_dir()) in splits]
    return pins


def _target(rebuild_sealed: bool) -> MintTarget:
    """The corpus of this home and pins as the mint writes to it."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.store import mint_target

    return mint_target(harvest_home(), pins_dir(), rebuild_sealed=rebuild_sealed)


def _run_mint(
    plain: list[Pin], options: MintOptions, *, budget_s: float | None, rebuild_sealed: bool
) -> tuple[dict[str, int], MintOptions]:
    """Plan and mint ``plain`` with progress on stderr (pins done, and per kind its shards finished and its
    candidates screened out, rejected at confirm and kept); this run's counts, and the options as run (with
    the budget's deadline)."""
    import dataclasses
    import time

    from dbt_harvest.cli._progress import progress
    from dbt_harvest.harvester.mint.pipeline import mint, plan
    from dbt_harvest.harvester.mint.tally import MintTally

    shards = plan(plain, options, _target(rebuild_sealed))
    if budget_s is not None:  # the budget counts from the first shard (planning a large corpus takes a while)
        options = dataclasses.replace(options, deadline=time.time() + budget_s)
        shards = [dataclasses.replace(job, deadline=options.deadline) for job in shards]
    tally = MintTally(pins=len(plain), history_pins=frozenset(p.id for p in plain if p.is_history))
    # progress goes to stderr in every mode (a bar on a terminal, one line per interval when piped)
    with progress("mint", total=len(shards), unit="model shards") as bar:
        mint(
            plain,
            options,
            _target(rebuild_sealed),
            on_result=lambda job, reports: bar.advance(1, detail=tally.line()),  # the tally counted it first
            jobs=shards,
            on_round=bar.grow,
            tally=tally,
        )
    return tally.this_run(), options


def _recover(pins: list[Pin], options: MintOptions, *, rebuild_sealed: bool, rename_gold: bool) -> dict[str, Any]:
    """``--augment``: derive distinguishing seed rows for the base pins' invisible candidates and mint them
    (progress: the shards finished and their candidates' counts); the augmentation's report."""
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.harvester.augment.run import AugmentOptions, recover
    from dbt_harvest.harvester.mint.tally import MintTally

    tally = MintTally()
    with progress("augment", total=None, unit="model shards") as bar:

        def on_result(job: ShardJob, reports: list[CandidateReport]) -> None:
            tally.add(job, reports)
            bar.advance(1, detail=tally.line())

        return recover(
            [p for p in pins if not p.augmentation_sha256],
            options,
            _target(rebuild_sealed),
            AugmentOptions(sandboxed=options.sandboxed, rename_gold=rename_gold),
            on_result=on_result,
        ).to_dict()


def _print_summary(
    report: dict[str, Any], counts: dict[str, int], recovered: dict[str, Any] | None, lock: dict[str, Any]
) -> None:
    """The human summary: the yield table and lines, the augmentation's, and the lock's verdict."""
    _print_report(report, counts)
    if recovered is not None:
        _print_augmentation(recovered)
    if lock:
        click.echo(lock["summary"])
        for key in ("missing", "extra", "changed"):
            for item in lock.get(key, [])[:20]:
                click.echo(f"  {key}: {item}")


def _locked_ids(pins: list[Pin]) -> frozenset[str]:
    """The instance ids pins/_tasks.lock lists for ``pins``; refused for a test pin (its tasks are locked as
    hashes only, so it is minted in full) and where there is no lock."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.corpora.ledger import split_of
    from dbt_harvest.corpora.tasklock import read_lock

    lock = read_lock(pins_dir())
    if lock is None:
        raise click.UsageError(f"--only-locked needs {pins_dir()}/_tasks.lock; there is none")
    sealed = sorted(p.id for p in pins if split_of(p.id, pins_dir()) == "test")
    if sealed:
        raise click.UsageError(
            f"--only-locked: {sealed[0]} is a test pin, whose tasks the lock lists as hashes only; "
            "mint the test pins in full (with --rebuild-sealed in a fresh home)"
        )
    chosen = {p.id for p in pins}
    return frozenset(t.instance_id for t in lock.tasks if t.pin in chosen and t.instance_id)


def _print_report(report: dict[str, Any], counts: dict[str, int]) -> None:
    """The yield table per family and the run's lines: this run's counts, tasks kept, their quality."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        "family",
        "dead sites",
        "candidates",
        "screened out",
        "survived screen",
        "kept",
        "left at the cap",
        "top rejection",
    )
    for family, row in sorted(report["families"].items()):
        reasons = {**row["screened_out"], **row["confirm_rejected"]}
        top = max(reasons.items(), key=lambda kv: kv[1]) if reasons else ("-", 0)
        table.add_row(
            markup(family),
            str(sum(row["dead_sites"].values())),
            str(row["candidates"]),
            str(sum(row["screened_out"].values())),
            str(row["survived_screen"]),
            str(row["kept"]),
            str(row["not_confirmed_cap"]),
            markup(f"{top[0]} ({top[1]})"),
        )
    console.print(table)
    q = report["quality"]
    rate = "-" if q["informative_rate"] is None else f"{100 * q['informative_rate']:.0f}%"
    console.print(f"this run: {_run_line(counts)}", markup=False)
    console.print(
        f"tasks kept in total: {sum(report['tasks_per_pin'].values())} "
        f"(silent {report['silent']}, loud {report['loud']})",
        markup=False,
    )
    console.print(
        f"informative wrong repair: {q['informative_wrong_repair']}/{q['kept']} ({rate}); statement claims "
        f"checked: {q['claims_checked']} (statements rejected as false: {q['statement_false']}); duplicates "
        f"dropped: {q['duplicates_dropped']} bugs, {q['duplicate_statements_dropped']} statements; "
        f"local_tests: 0 on {q['local_tests_zero']} tasks; per repository: {report['tasks_per_repository']}",
        markup=False,
    )


def _build_augmented(pins: list[Pin], sandboxed: bool, augment: bool, rename_gold: bool = False) -> list[Pin]:
    """The pins the plain mint takes. A committed augmented pin this home has not built (a corpus rebuilt
    in a fresh home) is built first from its base and its seed patch when the patch is here; its patch is
    derived data that is not committed, so without it the pin waits for ``--augment`` (which derives the
    patch again and mints it) and is left out of the plain mint. A pin whose gold is renamed by its build
    (:func:`harvester.augment.run.rebuild_augmented`) is taken as rewritten."""
    if not any(p.augmentation_sha256 for p in pins):
        return list(pins)  # nothing to build: the augment driver is not even imported
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.harvester.augment.run import AugmentOptions, built_here, rebuild_augmented
    from dbt_harvest.harvester.workspace import augmentation_path

    unbuilt = [p for p in pins if p.augmentation_sha256 and not built_here(p)]
    todo = [p for p in unbuilt if augmentation_path(p.augmentation_sha256).is_file()]
    waiting = {p.id for p in unbuilt} - {p.id for p in todo}
    built: dict[str, Pin] = {}
    if todo:
        with progress("augmented pins", total=len(todo), unit="built") as bar:
            for pin in todo:
                built[pin.id] = rebuild_augmented(pin, AugmentOptions(sandboxed=sandboxed, rename_gold=rename_gold))
                bar.advance(1, detail=pin.id)
    if waiting and not augment:
        click.echo(
            f"{len(waiting)} augmented pin(s) not built here wait for `--augment`, which derives their seed "
            f"patches again: {', '.join(sorted(waiting))}",
            err=True,
        )
    return [built.get(p.id, p) for p in pins if p.id not in waiting]


def _print_augmentation(recovered: dict[str, Any]) -> None:
    """The augmentation's yield: per family, invisible candidates, proposals, on a kept augmentation, recovered."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        "family",
        "equivalent/invisible",
        "no informative wrong repair",
        "rows derived",
        "on kept augmentation",
        "recovered tasks",
    )
    for family, row in sorted(recovered["families"].items()):
        table.add_row(
            markup(family),
            str(row["invisible"]),
            str(row.get("no_wrong_repair", 0)),
            str(row["proposed"]),
            str(row["augmented"]),
            str(row["recovered"]),
        )
    console.print(table)
    for aug in recovered["augmentations"]:
        what = f"pin {aug['pin']}" if aug["pin"] else f"discarded ({aug['discarded']}: {aug['detail']})"
        console.print(
            f"augmentation of {aug['base']}: {aug['rows']} seed rows for {len(aug['keys'])} candidates -> "
            f"{what} ({aug['seconds']:.0f}s)",
            markup=False,
        )
    kept = len(recovered["kept_tasks"])
    per = f", {recovered['seconds'] / kept:.0f}s per recovered task" if kept else ""
    console.print(f"augmentation: {kept} tasks recovered in {recovered['seconds']:.0f}s{per}", markup=False)


def _run_line(counts: dict[str, int]) -> str:
    """``40 candidates, 31 screened out, 3 rejected at confirm, 6 kept``: this run's counts in words."""
    from dbt_harvest.harvester.mint.tally import counts_line

    return counts_line(counts)

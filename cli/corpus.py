"""`harvest corpus`: the committed corpus as a whole: offline checks of pins/, the task lock, the report."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from dbt_harvest.core.pin import Pin
    from dbt_harvest.core.task_record import TaskRecord
    from dbt_harvest.train.corpus_feed import TaskFeed


@click.group("corpus", context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """The committed corpus: check pins/ offline, write or verify the task lock, report the yield."""


@command.command("check")
@json_option
@fails_cleanly
def check(as_json: bool) -> None:
    """Offline checks of pins/: digests, no machine paths, ledger, disjoint groups, licenses, lock (exit 1 on any)."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.corpora.checks import check_pins_folder

    problems = check_pins_folder(pins_dir())
    if as_json:
        echo_json({"pins": str(pins_dir()), "problems": problems})
    else:
        for line in problems:
            say(line)
        click.echo(f"{len(problems)} problem(s) in {pins_dir()}", err=bool(problems))
    if problems:
        sys.exit(1)


@command.command("lock")
@click.option("--verify", is_flag=True, help="Compare the store with pins/_tasks.lock instead of writing it.")
@click.option(
    "--pin",
    "only",
    multiple=True,
    metavar="PIN_ID",
    help="Only these pins (repeatable): their entries are rewritten from this home (or verified), every "
    "other pin's locked entries are kept as they are. Default: every pin.",
)
@click.option(
    "--max-per-model",
    type=click.IntRange(1),
    default=None,
    help="The cap the mint ran with (a pin with model shards left under it is recorded as partial; the cap is "
    "recorded for the pins when it is not the default 3). Default: each pin's locked cap, else 3.",
)
@json_option
@fails_cleanly
def lock(verify: bool, only: tuple[str, ...], max_per_model: int | None, as_json: bool) -> None:
    """Write pins/_tasks.lock from the tasks minted under HARVEST_HOME (or --verify them against it), without minting."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import list_pins, pin_path, read_pin
    from dbt_harvest.harvester.mint.pipeline import DEFAULT_MAX_PER_MODEL

    pins = [read_pin(pin_path(p, pins_dir())) for p in only] if only else list_pins(pins_dir())
    locked = dict(locked_caps())
    caps = {p.id: max_per_model or locked.get(p.id, DEFAULT_MAX_PER_MODEL) for p in pins}
    result = lock_step([p.id for p in pins], verify=verify, write=not verify, partial=unfinished(pins, caps), caps=caps)
    if as_json:
        echo_json(result)
    else:
        click.echo(result["summary"])
        for key in ("missing", "extra", "changed"):
            for item in result.get(key, [])[:20]:
                click.echo(f"  {key}: {item}")
    if not result.get("same", True):
        sys.exit(1)


@command.command("report")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Folder for corpus_report.md, .json and .png.",
)
@click.option(
    "--timings",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="JSON {pin id: {add_s, mint_s}} from the rebuild driver (build and mint wall time per pin).",
)
@click.option(
    "--carry",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="A previous corpus_report.json: pins this HARVEST_HOME never minted keep its rows (a grown corpus).",
)
@click.option(
    "--kind",
    type=click.Choice(["repair", "completion"]),
    default="repair",
    show_default=True,
    help="Which tasks to report: repairs (candidates are mutants) or completions (candidates are the "
    "models decided; rejections say why a model has no completion task).",
)
@json_option
@fails_cleanly
def report(out: Path, timings: Path | None, carry: Path | None, kind: str, as_json: bool) -> None:
    """Per repository and family: candidates, kept, rejections, silent/loud, informative; table + PNG."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.corpora.report import markdown, report_from_disk, write_report

    built = report_from_disk(pins_dir(), timings, carry, kind)
    paths = write_report(built, out)
    if as_json:
        echo_json({**built.to_dict(), "written": {k: str(v) for k, v in paths.items()}})
    else:
        click.echo(markdown(built), nl=False)
        click.echo(f"wrote {', '.join(str(p) for p in paths.values())}")


@command.command("splits")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write splits.md, splits.json and splits.png here (e.g. docs/corpus).",
)
@click.option("--check", "check_targets", is_flag=True, help="Exit 1 when a split misses a target it must meet.")
@json_option
@fails_cleanly
def splits(out: Path | None, check_targets: bool, as_json: bool) -> None:
    """Tasks per split, kind, repository and owner from the committed lock, the largest shares, the
    targets the evaluation needs (sealed test: 300 tasks, 12 repositories, 15% per repository, 40% per
    owner, both kinds; dev: 150, 8, 50% per owner; train: 500), and the sealed split's minimum detectable
    effect. Reads pins/ only: nothing is unsealed."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.corpora.errors import CorporaError
    from dbt_harvest.corpora.split_table import TARGETS, chart, markdown, split_table
    from dbt_harvest.corpora.tasklock import read_lock
    from dbt_harvest.eval.audit.power import minimum_detectable_effect

    lock = read_lock(pins_dir())
    if lock is None:
        raise CorporaError(f"{pins_dir()} holds no task lock; write one with `harvest corpus lock`")
    table = split_table(lock, pins_dir())
    n = table.total("test")
    mde = {f"{rate:.1f}": minimum_detectable_effect(n, rate) if n else None for rate in (0.1, 0.3, 0.5)}
    data = table.to_dict(mde)
    if out is not None:
        from dbt_harvest.core import atomic

        atomic.write_text(out / "splits.md", markdown(table, mde))
        atomic.write_text(out / "splits.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
        chart(table, mde, out / "splits.png")
    if as_json:
        echo_json(data)
    else:
        for split, row in data["splits"].items():
            repo, owner = row["largest_repository"], row["largest_owner"]
            say(
                f"{split}: {row['tasks']} tasks from {row['repositories']} repositories and {row['owners']} owners; "
                f"largest {repo['name'] or '-'} {repo['share']:.0%}, owner {owner['name'] or '-'} {owner['share']:.0%}"
            )
        for target in TARGETS:
            short = data["shortfalls"][target.split]
            say(f"{target.split} targets: " + ("met" if not short else "NOT met: " + "; ".join(short)))
        at = mde["0.3"]
        say(f"sealed MDE at base rate 0.3: {100 * at:.1f} points" if at is not None else "sealed MDE: none")
    if check_targets and any(data["shortfalls"].values()):
        sys.exit(1)


def unfinished(pins: Sequence[Pin], caps: Mapping[str, int] | None = None) -> list[str]:
    """Pins with model shards still to mint under their cap (``caps``, else the default): their mint was
    stopped by a time budget."""
    from dbt_harvest.harvester.mint.pipeline import MintOptions
    from dbt_harvest.harvester.mint.pipeline import unfinished as shards_left

    options = MintOptions(caps=tuple(sorted((caps or {}).items())))
    return sorted({pin_id for pin_id, _ in shards_left(pins, options)})


def locked_caps() -> tuple[tuple[str, int], ...]:
    """The per-model caps pins/_tasks.lock records (none without a lock)."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.corpora.tasklock import read_lock

    lock = read_lock(pins_dir())
    return lock.caps if lock is not None else ()


def lock_step(
    pin_ids: list[str], *, verify: bool, write: bool, partial: list[str], caps: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """Write or verify pins/_tasks.lock; {} when neither was asked. ``partial``: the pins with model
    shards still to do (a mint stopped by a time budget), recorded as such in the lock; ``caps``: the
    per-model caps these pins were minted under, recorded with them where not the default."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.tasklock import TaskLockError, compare, lock_from_home, read_lock, updated_lock, write_lock
    from dbt_harvest.harvester.mint.pipeline import DEFAULT_MAX_PER_MODEL

    if not (verify or write):
        return {}
    if write:
        deeper = {p: c for p, c in (caps or {}).items() if c != DEFAULT_MAX_PER_MODEL}
        lock = updated_lock(read_lock(pins_dir()), harvest_home(), pins_dir(), pin_ids, partial, deeper)
        path = write_lock(lock, pins_dir())
        counts = {s: lock.count(s) for s in ("train", "dev", "test")}
        return {
            "written": str(path),
            "counts": counts,
            "partial": list(lock.partial),
            "summary": f"wrote {path}: {counts['train']} train, {counts['dev']} dev, {counts['test']} test "
            f"(hashes only); {len(lock.partial)} pin(s) partial",
        }
    locked = read_lock(pins_dir())
    if locked is None:
        raise TaskLockError(f"{pins_dir()} has no _tasks.lock; write one with `harvest corpus lock` first")
    rebuilt = lock_from_home(harvest_home(), pins_dir(), pin_ids, partial=partial, locked_golds=dict(locked.golds))
    diff = compare(locked, rebuilt, pin_ids)
    summary = diff.summary()
    if partial:  # a partial rebuild: say which pins' locked tasks were not reached
        summary += (
            f"; {len(partial)} pin(s) not finished here, their locked tasks not yet reached: "
            f"{', '.join(sorted(partial)[:3])}{', ...' if len(partial) > 3 else ''}"
        )
    return {
        "same": diff.same,
        "summary": summary,
        "missing": list(diff.missing),
        "extra": list(diff.extra),
        "changed": list(diff.changed),
        "renamed": list(diff.renamed),
        "restated": list(diff.restated),
        "golds_renamed": [{"pin": p, "locked": a, "rebuilt": b} for p, a, b in diff.golds],
        "unfinished": sorted(partial),
    }


@command.command("feed")
@click.option("--pin", "only", multiple=True, metavar="PIN_ID", help="Only the train tasks of these pins (repeatable).")
@click.option(
    "--max-length",
    type=click.IntRange(64),
    default=4096,
    show_default=True,
    help="The token budget rows are measured against ([train] max_length).",
)
@click.option(
    "--max-file-chars",
    type=click.IntRange(256),
    default=16000,
    show_default=True,
    help="The prompt's file budget ([data] max_file_chars).",
)
@click.option(
    "--tokenizer",
    "tokenizer_path",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="A local tokenizer folder (default: the tokenizer the tiny CPU model trains locally).",
)
@click.option("--no-rewards", is_flag=True, help="Render and measure rows only; skip the reward builds.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write corpus_feed.json and corpus_feed.md here (e.g. docs/corpus).",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Measure every task again, forgetting the results a stopped run of the same settings kept.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Measure again the tasks whose kept result failed a stage (after their cause was fixed); the others "
    "are taken as kept.",
)
@json_option
@fails_cleanly
def feed(
    only: tuple[str, ...],
    max_length: int,
    max_file_chars: int,
    tokenizer_path: Path | None,
    no_rewards: bool,
    out: Path | None,
    fresh: bool,
    retry_failed: bool,
    as_json: bool,
) -> None:
    """Every train task through the stages after the dataset: SFT rows render (single-turn and agentic) and
    fit the token budget, the GRPO reward of the true repair is 1 and of the unrepaired project 0. Exit 1 when
    any task fails a stage (each is listed with why). Each finished task is kept under HARVEST_HOME/feed/ as it
    finishes: a stopped run, started again with the same settings, measures only the tasks it had not."""
    from dbt_harvest.core.home import harvest_home
    from dbt_harvest.train import feed_log
    from dbt_harvest.train.corpus_feed import AGENTIC_VARIANTS, markdown

    tasks = _train_tasks(only)
    tokenizer, name = _feed_tokenizer(tokenizer_path)
    log = feed_log.log_path(
        harvest_home(),
        feed_log.settings_key(
            max_file_chars=max_file_chars, tokenizer=name, rewards=not no_rewards, variants=AGENTIC_VARIANTS
        ),
    )
    if fresh:
        feed_log.restart(log)
    settings = FeedSettings(max_length, max_file_chars, not no_rewards, retry_failed)
    report = _measure_feed(tasks, tokenizer, name, settings, log, _lock_coverage(only, tasks))
    if out is not None:
        _write_feed(out, report)
    if as_json:
        echo_json(report)
    else:
        click.echo(markdown(report), nl=False)
    if report["failed"]:
        sys.exit(1)


@dataclass(frozen=True)
class FeedSettings:
    """The budgets a feed run measures against, and whether it runs the reward builds."""

    max_length: int
    max_file_chars: int
    rewards: bool
    retry_failed: bool = False  # kept results that failed a stage are measured again


@dataclass(frozen=True)
class FeedTally:
    """What the feed found so far: tasks through every stage or failed, and the reward verdicts."""

    ok: int = 0
    failed: int = 0
    rewarded: int = 0  # tasks whose reward builds ran
    fixed_scores_1: int = 0
    unrepaired_scores_0: int = 0

    def plus(self, result: TaskFeed) -> FeedTally:
        """This tally with one more task's result counted."""
        rewarded = result.fixed >= 0
        return FeedTally(
            ok=self.ok + (not result.failure),
            failed=self.failed + bool(result.failure),
            rewarded=self.rewarded + rewarded,
            fixed_scores_1=self.fixed_scores_1 + (rewarded and result.fixed == 1),
            unrepaired_scores_0=self.unrepaired_scores_0 + (rewarded and result.unrepaired == 0),
        )

    def line(self) -> str:
        """``4 ok, 1 failed; rewarded 1/0: 4/5 true repairs score 1, 5/5 unrepaired score 0``."""
        text = f"{self.ok} ok, {self.failed} failed"
        if self.rewarded:
            text += (
                f"; rewarded 1/0: {self.fixed_scores_1}/{self.rewarded} true repairs score 1, "
                f"{self.unrepaired_scores_0}/{self.rewarded} unrepaired score 0"
            )
        return text


def _train_tasks(only: tuple[str, ...]) -> list[TaskRecord]:
    """The train tasks of HARVEST_HOME, or of the pins ``only`` names (TrainDataError when they have none)."""
    from dbt_harvest.train.errors import TrainDataError
    from dbt_harvest.train.sft_data import load_train_tasks

    tasks = load_train_tasks("")
    if only:
        tasks = [t for t in tasks if t.pin in set(only)]
        if not tasks:
            raise TrainDataError(f"no train task of {', '.join(only)} in HARVEST_HOME")
    return tasks


def _feed_tokenizer(tokenizer_path: Path | None) -> tuple[Any, str]:
    """(tokenizer, how the report names it): a local tokenizer folder, or train.tiny's BPE trained here."""
    if tokenizer_path is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path), local_files_only=True)
        return tokenizer, f"the tokenizer in a local folder {tokenizer_path.name!r}"  # no machine path in a report
    from dbt_harvest.train.tiny import TinySpec, train_tokenizer

    tokenizer = train_tokenizer(TinySpec().vocab_size)
    return tokenizer, f"train.tiny's locally trained byte-level BPE ({TinySpec().vocab_size} tokens)"


def _lock_coverage(only: tuple[str, ...], tasks: Sequence[TaskRecord]) -> dict[str, Any] | None:
    """What of pins/_tasks.lock's train tasks (of the pins ``only`` names, when it names some) ``tasks`` cover
    (``train.corpus_feed.lock_coverage``); None when the pins folder has no lock."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.corpora.tasklock import read_lock
    from dbt_harvest.train.corpus_feed import lock_coverage

    lock = read_lock(pins_dir())
    return lock_coverage(lock, tasks, list(only) or None) if lock is not None else None


def _measure_feed(
    tasks: list[TaskRecord],
    tokenizer: Any,
    name: str,
    settings: FeedSettings,
    log: Path,
    lock: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the feed over ``tasks`` with counted progress on stderr, logging each finished task to ``log``
    (a run stopped before takes the results it kept there); the report as a dict."""
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.train import feed_log
    from dbt_harvest.train.corpus_feed import feed as run_feed
    from dbt_harvest.train.project import PinnedProjectSource

    finished = feed_log.load(log, tasks)
    if settings.retry_failed:
        finished = {iid: result for iid, result in finished.items() if not result.failure}
    tally = FeedTally()
    with progress("corpus feed", len(tasks), "tasks") as bar:
        if finished:
            bar.note(f"resuming: {len(finished)} of {len(tasks)} tasks were measured by an earlier run")
            for result in finished.values():
                tally = tally.plus(result)
            bar.advance(len(finished), detail=tally.line())

        def done(record: TaskRecord, result: TaskFeed) -> None:
            nonlocal tally
            feed_log.append(log, record, result)
            if result.failure:
                bar.note(f"{result.instance_id}: {result.failure}")
            tally = tally.plus(result)
            bar.advance(detail=tally.line())

        return run_feed(
            tasks,
            PinnedProjectSource(pins_dir()),
            tokenizer,
            name,
            max_length=settings.max_length,
            max_file_chars=settings.max_file_chars,
            rewards=settings.rewards,
            on_task=done,
            finished=finished,
            lock=lock,
        ).to_dict()


def _write_feed(out: Path, report: dict[str, Any]) -> None:
    """corpus_feed.json and corpus_feed.md in ``out`` (created if need be)."""
    import json

    from dbt_harvest.core import atomic
    from dbt_harvest.train.corpus_feed import markdown

    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "corpus_feed.json", json.dumps(report, indent=1, sort_keys=True) + "\n")
    atomic.write_text(out / "corpus_feed.md", markdown(report))

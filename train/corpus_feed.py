"""Does the corpus feed training? Every train task through the stages after the dataset, measured.

The corpus is only worth its tasks if each one trains and rewards: its SFT rows render from the same
tree the agent works in (``harvester.task_tree``), they fit a token budget or say why not, and the GRPO
reward of the task's true repair is 1 while the unrepaired project's is 0. ``feed`` runs exactly those
paths on every train task of the store (``harvest corpus feed``), one task at a time, and returns a
report: counts, prompt sizes in characters and in tokens of a tokenizer trained locally (``train.tiny``,
the one the CPU runs use; ``--tokenizer`` names a real one), the rows a ``max_length`` cuts and why, the
reward verdicts with the path that reached them (compiled SQL in the locked engine, or the sandboxed dbt
fallback), and every task that failed a stage with its one-line reason. The dev split's oracle/noop audits
and a tiny SFT over all train tasks are the CLI's own commands (docs/corpus/README.md).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.train.budget import RowLength, cut, measure, percentiles
from dbt_harvest.train.configs import DataSection
from dbt_harvest.train.investigation import investigation_length, length_summary, plan
from dbt_harvest.train.position_probe import RULES, RowFacts, probe
from dbt_harvest.train.project import ProjectSource, corrected_files

if TYPE_CHECKING:
    from dbt_harvest.corpora.tasklock import TaskLock


@dataclass(frozen=True)
class TaskFeed:
    """What one train task gave at each stage."""

    instance_id: str
    pin: str
    project_dir: str
    kind: str = "repair"  # the task's kind (repair, completion, history: ``kind_of``): the report counts each
    files_in_tree: int = 0
    files_shown: int = 0
    files_left_out: tuple[str, ...] = ()  # files of the reported tables' lineage that the char budget left out
    shown: tuple[str, ...] = ()  # the paths the single-turn prompt shows, in its order
    file: str = ""  # the broken file (for the position probe; never shown as such)
    investigation_lengths: tuple[int, ...] = ()  # inspecting steps before the fix, per agentic variant
    single_turn: RowLength | None = None
    agentic: RowLength | None = None
    fixed: int = -1  # official verdict of the true repair (through the completion parser), -1: not run
    fixed_path: str = ""
    unrepaired: int = -1  # official verdict of the broken project as it is
    unrepaired_path: str = ""
    reward_seconds: float = 0.0
    failure: str = ""  # the first stage that failed, and why
    #: why the single-turn row was left out for the char budget (its prompt cannot show the broken file
    #: within max_file_chars): a training decision, counted apart, not a failure; agentic rows and rewards
    #: still run
    single_turn_left_out: str = ""
    # what the position probe's content rules read (train.position_probe.RowFacts): the shown files' lengths,
    # each shown model's ref-distance from the reported tables, the reported tables' models in the order the
    # statement names them
    sizes: dict[str, int] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)
    named: tuple[str, ...] = ()

    @property
    def layout(self) -> str:
        return "project at the root" if self.project_dir in ("", ".") else f"built from {self.project_dir}/"

    def to_record(self) -> dict[str, Any]:
        """Every field as plain JSON data (what the feed log keeps; ``from_record`` reads it back equal)."""
        return asdict(self)

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> TaskFeed:
        """The result ``to_record`` wrote; ValueError/TypeError/KeyError on anything else."""
        values = dict(data)
        for name in ("single_turn", "agentic"):
            values[name] = RowLength(**values[name]) if values.get(name) is not None else None
        for name in ("files_left_out", "shown", "investigation_lengths", "named"):
            values[name] = tuple(values.get(name, ()))
        return cls(**values)


@dataclass(frozen=True)
class FeedReport:
    """Every task's feed and the totals the docs quote."""

    tasks: tuple[TaskFeed, ...]
    max_length: int
    max_file_chars: int
    tokenizer: str
    seconds: float
    cuts: dict[str, list[str]] = field(default_factory=dict)
    resumed: int = 0  # tasks whose results an earlier, stopped run of the same settings had kept (feed_log)
    #: what of pins/_tasks.lock's train tasks the run covered (``lock_coverage``), when it was checked against it
    lock: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        done = [t for t in self.tasks if not t.failure]
        rewarded = [t for t in self.tasks if t.fixed >= 0]

        def sizes(kind: str) -> dict[str, Any]:
            rows = [getattr(t, kind) for t in self.tasks if getattr(t, kind) is not None]
            return {
                "rows": len(rows),
                "chars": percentiles([r.chars for r in rows]),
                "tokens": percentiles([r.total_tokens for r in rows]),
                "over_max_length": len(self.cuts.get(kind, [])),
            }

        return {
            "train_tasks": len(self.tasks),
            "pins": len({t.pin for t in self.tasks}),
            "layouts": dict(Counter(t.layout for t in self.tasks)),
            "rendered": sum(
                (t.single_turn is not None or bool(t.single_turn_left_out)) and t.agentic is not None
                for t in self.tasks
            ),
            "single_turn_left_out": {
                t.instance_id: t.single_turn_left_out for t in self.tasks if t.single_turn_left_out
            },
            "max_length": self.max_length,
            "max_file_chars": self.max_file_chars,
            "tokenizer": self.tokenizer,
            "single_turn": sizes("single_turn"),
            "agentic": sizes("agentic"),
            "rows_cut": self.cuts,
            "lineage_files_left_out_by_chars": sum(len(t.files_left_out) for t in self.tasks),
            "tasks_with_lineage_files_left_out": sum(bool(t.files_left_out) for t in self.tasks),
            "position_probe": probe(
                [(t.instance_id, t.shown, t.file) for t in self.tasks if t.shown],
                {t.instance_id: RowFacts(t.sizes, t.depth, t.named) for t in self.tasks if t.shown and t.depth},
            ).to_dict(),
            "investigation_lengths": length_summary([n for t in self.tasks for n in t.investigation_lengths]),
            "reward": {
                "tasks": len(rewarded),
                "fixed_scores_1": sum(t.fixed == 1 for t in rewarded),
                "unrepaired_scores_0": sum(t.unrepaired == 0 for t in rewarded),
                "fixed_paths": dict(Counter(t.fixed_path for t in rewarded)),
                "unrepaired_paths": dict(Counter(t.unrepaired_path for t in rewarded)),
                "fell_back_to_dbt": sum(t.fixed_path != "fast" or t.unrepaired_path != "fast" for t in rewarded),
                "seconds": round(sum(t.reward_seconds for t in rewarded), 1),
            },
            "per_kind": per_kind(self.tasks),
            "lock": dict(self.lock) if self.lock is not None else None,
            "failed": {t.instance_id: t.failure for t in self.tasks if t.failure},
            "ok": len(done),
            "resumed": self.resumed,
            "seconds": round(self.seconds, 1),
            "per_task": [_task_dict(t) for t in self.tasks],
        }


def lock_coverage(lock: TaskLock, tasks: Sequence[TaskRecord], pin_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """How ``tasks`` (the records fed) compare with the lock's train tasks (of ``pin_ids`` when given), by the
    lock's own comparison (``corpora.tasklock.compare``: a record that reproduces its locked one under a renamed
    gold or a restated closing counts as locked): fed as locked, fed with another record than the lock's,
    locked but not fed, fed but not locked."""
    from dbt_harvest.corpora.tasklock import compare, lock_of

    train = replace(lock, tasks=tuple(t for t in lock.tasks if t.split == "train"))
    diff = compare(train, lock_of(tasks, lock.ledger_head, locked_golds=dict(lock.golds)), pin_ids)

    def ids(keys: Sequence[str]) -> list[str]:
        return sorted(key.split(":", 1)[1] for key in keys)

    locked = sum(not pin_ids or t.pin in pin_ids for t in train.tasks)
    return {
        "locked_train": locked,
        "fed_as_locked": locked - len(diff.missing) - len(diff.changed),
        "fed_otherwise": ids(diff.changed),
        "not_fed": ids(diff.missing),
        "not_locked": ids(diff.extra),
    }


#: what the report counts per task kind
KIND_COUNTS = (
    "tasks",
    "single_turn_rows",
    "single_turn_left_out",
    "agentic_rows",
    "rewarded",
    "fixed_scores_1",
    "unrepaired_scores_0",
    "failed",
)


def per_kind(tasks: Sequence[TaskFeed]) -> dict[str, dict[str, int]]:
    """Per task kind: tasks, rows rendered (single-turn, agentic), single-turn rows left out for the char
    budget, tasks rewarded, true answers scoring 1, unrepaired projects scoring 0, tasks failing a stage."""
    kinds: dict[str, dict[str, int]] = {}
    for t in tasks:
        row = kinds.setdefault(t.kind, dict.fromkeys(KIND_COUNTS, 0))
        row["tasks"] += 1
        row["single_turn_rows"] += t.single_turn is not None
        row["single_turn_left_out"] += bool(t.single_turn_left_out)
        row["agentic_rows"] += t.agentic is not None
        row["rewarded"] += t.fixed >= 0
        row["fixed_scores_1"] += t.fixed == 1
        row["unrepaired_scores_0"] += t.fixed >= 0 and t.unrepaired == 0
        row["failed"] += bool(t.failure)
    return dict(sorted(kinds.items()))


def _task_dict(task: TaskFeed) -> dict[str, Any]:
    return {
        "instance_id": task.instance_id,
        "pin": task.pin,
        "kind": task.kind,
        "project_dir": task.project_dir,
        "files_in_tree": task.files_in_tree,
        "files_shown": task.files_shown,
        "files_left_out": list(task.files_left_out),
        "investigation_lengths": list(task.investigation_lengths),
        "single_turn_chars": task.single_turn.chars if task.single_turn else None,
        "single_turn_tokens": task.single_turn.total_tokens if task.single_turn else None,
        "agentic_chars": task.agentic.chars if task.agentic else None,
        "agentic_tokens": task.agentic.total_tokens if task.agentic else None,
        "fixed": task.fixed,
        "fixed_path": task.fixed_path,
        "unrepaired": task.unrepaired,
        "unrepaired_path": task.unrepaired_path,
        "reward_seconds": round(task.reward_seconds, 2),
        "failure": task.failure,
        "single_turn_left_out": task.single_turn_left_out,
    }


#: Agentic investigations rendered per task by the report: the training default (``[data] variants``).
AGENTIC_VARIANTS = DataSection().variants


def feed_task(task: TaskRecord, project: ProjectSource, tokenizer: Any, max_file_chars: int, rewards: bool) -> TaskFeed:
    """One task through rendering and (with ``rewards``) the reward of its fix and of the broken project."""
    from dbt_harvest.harvester.grading.edited import build_and_score, release
    from dbt_harvest.train.completion import missing_files, parse_completion, render_files
    from dbt_harvest.train.errors import PromptCoverageError
    from dbt_harvest.train.lineage import symptom_view
    from dbt_harvest.train.project import relevant_files
    from dbt_harvest.train.sft_data import agentic_rows, single_turn_rows

    base = TaskFeed(task.instance_id, task.pin, task.project_dir, kind=kind_of(task), file=task.file)
    try:
        broken = project.broken_files(task)
        try:
            shown = relevant_files(task, broken, max_file_chars)
        except PromptCoverageError:  # the single-turn row is left out below, with the same reason
            shown = {}
        view = symptom_view(broken, task.grading.condition_tabs, max_file_chars)
        left_out: list[tuple[str, str]] = []
        single = single_turn_rows([task], project, max_file_chars, left_out)
        agentic = agentic_rows([task], project, max_file_chars, variants=AGENTIC_VARIANTS)
        single_length = measure(single, tokenizer)[0] if single else None
        (agentic_length,) = measure(agentic[:1], tokenizer)
        investigations = tuple(investigation_length(plan(task, broken, v)) for v in range(AGENTIC_VARIANTS))
    except Exception as exc:
        return replace(base, failure=f"render: {_one_line(exc)}")
    rendered = replace(
        base,
        files_in_tree=len(broken),
        files_shown=len(shown),
        files_left_out=view.skipped,
        shown=tuple(shown),
        sizes={path: len(text) for path, text in shown.items()},
        depth={path: d for path, d in view.depth.items() if path in shown},
        named=named_models(task, broken),
        single_turn=single_length,
        agentic=agentic_length,
        investigation_lengths=investigations,
        single_turn_left_out=left_out[0][1] if left_out else "",
    )
    if not rewards:
        return rendered
    started = time.perf_counter()
    try:
        edits = parse_completion(render_files(corrected_files(task, broken)), broken, creatable=missing_files(task))
        fixed = build_and_score(task, edits)
        unrepaired = build_and_score(task, {})
    except Exception as exc:
        return replace(rendered, reward_seconds=time.perf_counter() - started, failure=f"reward: {_one_line(exc)}")
    finally:
        release(task)
    failure = ""
    if fixed.official != 1:
        failure = f"reward: the true repair scores {fixed.official} ({fixed.reason or fixed.first_error})"
    elif unrepaired.official != 0:
        failure = "reward: the unrepaired project scores 1"
    return replace(
        rendered,
        fixed=fixed.official,
        fixed_path=fixed.path,
        unrepaired=unrepaired.official,
        unrepaired_path=unrepaired.path,
        reward_seconds=time.perf_counter() - started,
        failure=failure,
    )


def kind_of(task: TaskRecord) -> str:
    """The kind the report counts a task under: ``history`` for a repair that undoes a real fix, else its kind."""
    return "history" if task.source == "history" else task.kind


def named_models(task: TaskRecord, files: Mapping[str, str]) -> tuple[str, ...]:
    """The models of the task's graded tables, in the order its statement first names them (tables it does
    not name last, in grading order)."""
    from dbt_harvest.train.lineage import models_by_name

    by_name = models_by_name(files)
    statement = task.problem_statement
    tables = [t.split(".")[-1] for t in task.grading.condition_tabs]
    order = sorted(tables, key=lambda t: statement.find(t) if t in statement else len(statement) + 1)
    return tuple(path for table in order for path in by_name.get(table, ())[:1])


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]


def feed(
    tasks: Sequence[TaskRecord],
    project: ProjectSource,
    tokenizer: Any,
    tokenizer_name: str,
    *,
    max_length: int,
    max_file_chars: int,
    rewards: bool = True,
    on_task: Callable[[TaskRecord, TaskFeed], None] | None = None,
    finished: Mapping[str, TaskFeed] | None = None,
    lock: Mapping[str, Any] | None = None,
) -> FeedReport:
    """Every task of ``tasks`` (train records: the firewall refuses any other) through ``feed_task``.

    ``finished``: results an earlier run of the same settings kept (``feed_log``), taken as they are;
    ``on_task`` is called with each task run now and its result (the CLI logs it there); ``lock``: what of the
    lock the tasks cover (``lock_coverage``), which the report carries."""
    from dbt_harvest.corpora.firewall import require_train

    require_train(list(tasks))
    started = time.perf_counter()
    finished = finished or {}
    results = []
    for task in tasks:
        if task.instance_id in finished:  # the kind is the record's (unchanged), whatever the log wrote then
            results.append(replace(finished[task.instance_id], kind=kind_of(task)))
            continue
        result = feed_task(task, project, tokenizer, max_file_chars, rewards)
        results.append(result)
        if on_task is not None:
            on_task(task, result)
    cuts: dict[str, list[str]] = {}
    for kind in ("single_turn", "agentic"):
        measured = [(t, getattr(t, kind)) for t in results if getattr(t, kind) is not None]
        rows = [{"instance_id": t.instance_id, **({"messages": []} if kind == "agentic" else {})} for t, _ in measured]
        _, dropped = cut(rows, [length for _, length in measured], max_length)
        cuts[kind] = [c.line() for c in dropped]
    resumed = sum(t.instance_id in finished for t in tasks)
    return FeedReport(
        tuple(results), max_length, max_file_chars, tokenizer_name, time.perf_counter() - started, cuts, resumed, lock
    )


def markdown(report: dict[str, Any]) -> str:
    """The report's totals as the Markdown docs/corpus/ keeps."""
    reward = report["reward"]
    lines = [
        "# Does the corpus feed training?",
        "",
        "Written by `harvest corpus feed --out docs/corpus` over the train split of the corpus's HARVEST_HOME "
        "(train/corpus_feed.py).",
        "",
        f"- train tasks: {report['train_tasks']} from {report['pins']} pins "
        f"({', '.join(f'{v} {k}' for k, v in sorted(report['layouts'].items()))})",
        f"- SFT rows rendered (single-turn and agentic): {report['rendered']}/{report['train_tasks']}; single-turn "
        f"rows left out because max_file_chars cannot show the broken file: {len(report['single_turn_left_out'])}",
        f"- tokenizer: {report['tokenizer']}; budget: max_length {report['max_length']} tokens, "
        f"max_file_chars {report['max_file_chars']}",
    ]
    for kind in ("single_turn", "agentic"):
        sizes = report[kind]
        lines.append(
            f"- {kind.replace('_', '-')} rows: chars {_pcts(sizes['chars'])}; tokens {_pcts(sizes['tokens'])}; "
            f"{sizes['over_max_length']} over max_length"
        )
    lines.append(
        f"- files of the reported tables' lineage left out by max_file_chars: "
        f"{report['lineage_files_left_out_by_chars']} (in {report['tasks_with_lineage_files_left_out']} tasks)"
    )
    probed = report["position_probe"]
    lines.append(
        f"- position probe (does the broken model's place among the prompt's model files give it away?): "
        f"best rule {probed['rule'] or '-'} is right on {probed['accuracy']:.1%} of {probed['held_out']} held-out "
        f"rows; chance {probed['chance']:.1%}"
    )
    rates = probed.get("rules") or {}
    if rates:
        lines.append(
            "  - every rule (held-out hit rate): "
            + ", ".join(f"{rule} {rates[rule]:.1%}" for rule in RULES if rule in rates)
            + f" (position: {probed.get('position_rule') or '-'}, fitted on the other half)"
        )
    inv = report["investigation_lengths"]
    lines.append(
        f"- agentic investigations ({inv['episodes']}): inspecting steps before the fix min {inv['min']}, "
        f"median {inv['median']}, max {inv['max']}; histogram {inv['histogram']}"
    )
    if reward["tasks"]:
        lines += [
            f"- GRPO reward, true repair through the completion parser: {reward['fixed_scores_1']}/{reward['tasks']} score 1 "
            f"(paths {_counts(reward['fixed_paths'])})",
            f"- GRPO reward, the unrepaired project built as it is: {reward['unrepaired_scores_0']}/{reward['tasks']} "
            f"score 0 (paths {_counts(reward['unrepaired_paths'])})",
            f"- tasks where a reward fell back from compiled SQL to a sandboxed dbt build: {reward['fell_back_to_dbt']}; "
            f"reward seconds in all: {reward['seconds']}",
        ]
    lines += _kind_lines(report.get("per_kind", {}))
    lines += _lock_lines(report.get("lock"))
    resumed = f" ({report['resumed']} tasks' results kept by an earlier, stopped run)" if report.get("resumed") else ""
    lines.append(f"- failed a stage: {len(report['failed'])}; wall time {report['seconds']} s{resumed}")
    for instance_id, why in sorted(report["failed"].items()):
        lines.append(f"  - `{instance_id}`: {why}")
    for instance_id, why in sorted(report["single_turn_left_out"].items())[:50]:
        lines.append(f"  - single-turn left out `{instance_id}`: {why.removeprefix(f'{instance_id}: ')}")
    for kind, items in report["rows_cut"].items():
        for item in items[:50]:
            lines.append(f"  - {kind} row cut: {item}")
    return "\n".join(lines) + "\n"


def _kind_lines(kinds: dict[str, dict[str, int]]) -> list[str]:
    if not kinds:
        return []
    lines = [
        "",
        "| kind | tasks | single-turn rows | single-turn left out | agentic rows | rewarded | true answer 1 | "
        "unrepaired 0 | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, n in kinds.items():
        lines.append(
            f"| {kind} | {n['tasks']} | {n['single_turn_rows']} | {n['single_turn_left_out']} | {n['agentic_rows']} | "
            f"{n['rewarded']} | {n['fixed_scores_1']} | {n['unrepaired_scores_0']} | {n['failed']} |"
        )
    return [*lines, ""]


def _lock_lines(lock: dict[str, Any] | None) -> list[str]:
    if lock is None:
        return ["- pins/_tasks.lock: none (the run was not checked against a lock)"]
    lines = [
        f"- pins/_tasks.lock: {lock['fed_as_locked']} of its {lock['locked_train']} train tasks fed as locked; "
        f"{len(lock['fed_otherwise'])} fed with another record than the lock's, {len(lock['not_fed'])} not fed, "
        f"{len(lock['not_locked'])} fed but not locked"
    ]
    for label in ("fed_otherwise", "not_fed", "not_locked"):
        lines += [f"  - {label.replace('_', ' ')}: `{i}`" for i in lock[label][:50]]
    return lines


def _pcts(values: dict[str, int]) -> str:
    return " / ".join(f"{k} {v:,}" for k, v in values.items()) or "-"


def _counts(values: dict[str, int]) -> str:
    return ", ".join(f"{k or 'none'} {v}" for k, v in sorted(values.items())) or "-"

"""`harvest audit`: run a driver over a split in the tool environment, and `harvest audit report RUN_DIR`.

The dev and train splits are read from HARVEST_HOME; the test split only with ``--recipe`` naming a run
folder frozen by `harvest train freeze` (unsealed once per recipe, recorded in pins/); the recipe's own
model plays it (``--driver hf`` is then the default). The driver is prepared (model loaded, endpoint
reached) before the first episode and before any unseal, so a driver that cannot play fails in one line
and costs the recipe nothing. A run folder is resumable: run the same command with the same ``--run-dir``
and only the episodes without a verdict are played.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, markup, parse_aliases, shown

if TYPE_CHECKING:
    from dbt_harvest.eval.audit.session import AuditRequest


def _print_summary(report: dict[str, Any], run_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    n = report["n"]
    only = f" ({' and '.join(report['kinds'])} only)" if report.get("kinds") else ""
    console.print(
        f"[bold]{markup(report['split'])}[/bold]{markup(only)} / {markup(report['driver'].get('name'))}: official [bold]{report['official']}/{n}[/bold], "
        f"strict {report['strict']}/{n}; missing {len(report['missing'])}, crashed {len(report['crashed'])}"
    )
    table = Table("rung", "meaning", "episodes")
    for rung, count in report["ladder"].items():
        table.add_row(markup(rung), markup(report["ladder_labels"][rung]), str(count))
    console.print(table)
    console.print(markup(f"report: {run_dir / 'report.md'}  chart: {run_dir / 'ladder.png'}"))


@click.group("audit", invoke_without_command=True)
@click.option(
    "--benchmark",
    type=click.Choice(["corpus", "spider2-dbt"]),
    default="corpus",
    show_default=True,
    help="corpus: our own splits (train, dev, test). spider2-dbt: the instances of a local Spider 2.0-DBT "
    "checkout (--spider2), in its predeclared parts (dev, sealed).",
)
@click.option(
    "--split",
    type=click.Choice(["train", "dev", "test", "sealed"]),
    default="dev",
    show_default=True,
    help="Which split to audit: train, dev or test of the corpus; dev or sealed of spider2-dbt.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(["repair", "completion"]),
    help="train and dev only: audit just the tasks of this kind (repeatable; default: every kind). The "
    "run folder records it, and resuming it with another --kind is refused.",
)
@click.option(
    "--spider2",
    "spider2",
    default=None,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    envvar="SPIDER2_DIR",
    help="spider2-dbt: the checkout (its spider2-dbt folder with the DuckDB files "
    "unpacked; default: $SPIDER2_DIR, else the one `harvest spider2 import` recorded).",
)
@click.option(
    "--gold-alias",
    "gold_alias",
    multiple=True,
    metavar="ID=FILE",
    help="spider2-dbt: grade an instance against a gold file shipped under another name than its metadata "
    "says (evaluate.py scores such an instance 0). Repeatable.",
)
@click.option(
    "--allow-unavailable",
    is_flag=True,
    help="spider2-dbt sealed: start even though some instances cannot be played (they count 0).",
)
@click.option(
    "--results-dir",
    "results_dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="spider2-dbt: also keep each submission's graded database here in Spider2's results layout "
    "(with results_metadata.jsonl), for `harvest score --spider2` or the official evaluate.py.",
)
@click.option(
    "--driver",
    type=click.Choice(["oracle", "noop", "wrong", "openai", "hf"]),
    help="Who plays the episodes. Controls that check the environment, no model needed: oracle applies "
    "each task's true fix (must score N/N), noop submits the broken project unchanged and wrong applies "
    "the task's confirmed wrong repair (both must score 0/N). Models: openai talks to an "
    "OpenAI-compatible endpoint (--base-url, --model), hf loads a local transformers model (--model, "
    "--adapter). With --recipe the default is hf: the recipe's base model and adapter.",
)
@click.option("--base-url", default="", help="openai: the endpoint, e.g. http://127.0.0.1:8000/v1.")
@click.option(
    "--model",
    default="",
    help="Depends on --driver. openai: the model name the endpoint serves (e.g. qwen3-4b); hf: a local "
    "model folder or Hub id to load (with --recipe: defaults to the recipe's base). Ignored by "
    "oracle, noop and wrong.",
)
@click.option(
    "--adapter",
    default=None,
    type=click.Path(file_okay=False),
    help="hf: a peft adapter folder (with --recipe: the recipe's adapter, which is the only one allowed).",
)
@click.option(
    "--recipe",
    default=None,
    type=click.Path(exists=True, path_type=Path),
    help="test split only: the frozen run folder (runs/<name>, or its manifest.json) to unseal it for, once per recipe.",
)
@click.option(
    "--arm",
    type=click.Choice(["recipe", "base"]),
    default="recipe",
    show_default=True,
    help="test split with --recipe: who plays. recipe: the recipe's model with its adapter; base: the "
    "untrained base model it was trained from (no adapter), the control of the same frozen protocol. "
    "Each arm is audited once.",
)
@click.option(
    "--run-dir", default=None, type=click.Path(path_type=Path), help="Run folder (an existing one is resumed)."
)
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="Episodes in parallel.")
@click.option("--max-turns", default=30, show_default=True, type=click.IntRange(1, 1000), help="Turn cap per episode.")
@click.option(
    "--repeat-limit",
    default=3,
    show_default=True,
    type=click.IntRange(2, 100),
    help="The same action this many times in a row ends the episode.",
)
@click.option(
    "--max-new-tokens",
    default=512,
    show_default=True,
    type=click.IntRange(1, 32768),
    help="hf/openai: tokens per reply.",
)
@json_option
@click.pass_context
@fails_cleanly
def command(
    ctx: click.Context,
    benchmark: str,
    split: str,
    kinds: tuple[str, ...],
    spider2: Path | None,
    gold_alias: tuple[str, ...],
    allow_unavailable: bool,
    results_dir: Path | None,
    driver: str | None,
    base_url: str,
    model: str,
    adapter: str | None,
    recipe: Path | None,
    arm: str,
    run_dir: Path | None,
    workers: int,
    max_turns: int,
    repeat_limit: int,
    max_new_tokens: int,
    as_json: bool,
) -> None:
    """Run a driver over every task of a split; write transcripts, verdicts and a report.

    --kind repair or --kind completion audits just the tasks of that kind of the train or dev split (the
    report, by_kind included, then covers those tasks only).

    The sealed test split needs --recipe RUN (a run folder frozen by `harvest train freeze`) and is audited
    once per recipe, by the recipe's own model unless --driver says otherwise. A model that cannot load or
    an endpoint that cannot be reached fails before the first episode (and before the unseal).

    With --benchmark spider2-dbt the tasks are a local Spider 2.0-DBT checkout's instances: --split dev (16
    instances, reports only) or --split sealed (48, once per frozen recipe and arm), graded by the official
    duckdb_match and reported as k/N over every instance of the part (an instance that cannot be played
    counts 0). Spider2 episodes are long: raise --max-turns.
    """
    if ctx.invoked_subcommand is not None:
        return
    spider2 = _checked_benchmark(
        ctx, benchmark, split, kinds, spider2, gold_alias, allow_unavailable, results_dir, driver
    )
    _check_recipe(benchmark, split, driver, recipe, arm)
    from dbt_harvest.eval.audit.session import AuditRequest

    request = AuditRequest(
        split=split,
        driver=driver or "hf",
        base_url=base_url,
        model=model,
        adapter=adapter,
        recipe=recipe,
        arm=arm,
        kinds=kinds,
        run_dir=run_dir or _default_run_dir(benchmark, split, kinds, driver),
        workers=workers,
        max_turns=max_turns,
        repeat_limit=repeat_limit,
        max_new_tokens=max_new_tokens,
        benchmark=benchmark,
        spider2=spider2,
        gold_aliases=tuple(sorted(parse_aliases(gold_alias).items())),
        allow_unavailable=allow_unavailable,
        spider2_results=results_dir,
    )
    _run(request, as_json)


def _checked_benchmark(
    ctx: click.Context,
    benchmark: str,
    split: str,
    kinds: tuple[str, ...],
    spider2: Path | None,
    gold_alias: tuple[str, ...],
    allow_unavailable: bool,
    results_dir: Path | None,
    driver: str | None,
) -> Path | None:
    """Refuse options that do not apply to the benchmark and split (a usage error); -> the Spider2 checkout
    (spider2-dbt: --spider2, else the imported one; the corpus: what --spider2 or SPIDER2_DIR said)."""
    if kinds and benchmark == "spider2-dbt":
        raise click.UsageError(
            "--kind only applies to the corpus's train and dev splits: spider2-dbt is audited over "
            "all the instances of its part"
        )
    if kinds and split == "test":
        raise click.UsageError(
            "--kind only applies to the corpus's train and dev splits: the sealed test split is "
            "audited once per recipe over all its tasks"
        )
    if benchmark == "spider2-dbt":
        if split not in ("dev", "sealed"):
            raise click.UsageError("spider2-dbt has a dev and a sealed part: pass --split dev or --split sealed")
        if driver == "wrong":
            raise click.UsageError(
                "spider2-dbt instances have no confirmed wrong repairs; use oracle, noop, openai or hf"
            )
        return spider2 or _imported_checkout()
    if split == "sealed":
        raise click.UsageError("--split sealed is spider2-dbt's; the corpus's sealed split is --split test")
    if spider2 is not None and ctx.get_parameter_source("spider2") != click.core.ParameterSource.ENVIRONMENT:
        raise click.UsageError("--spider2 only applies with --benchmark spider2-dbt")
    if gold_alias or allow_unavailable or results_dir is not None:
        raise click.UsageError(
            "--gold-alias, --allow-unavailable and --results-dir only apply with --benchmark spider2-dbt"
        )
    return spider2


def _check_recipe(benchmark: str, split: str, driver: str | None, recipe: Path | None, arm: str) -> None:
    """The sealed split (test, or spider2-dbt's sealed part) needs --recipe; --recipe and --arm need it;
    without a recipe --driver is required (a usage error otherwise)."""
    sealed_split = "sealed" if benchmark == "spider2-dbt" else "test"
    if split == sealed_split and recipe is None:
        raise click.UsageError(
            f"the {split} split is sealed: pass --recipe runs/<run> (a run folder frozen by `harvest train freeze`)"
        )
    if split != sealed_split and recipe is not None:
        raise click.UsageError(f"--recipe only applies to --split {sealed_split}")
    if arm != "recipe" and recipe is None:
        raise click.UsageError(f"--arm only applies to --split {sealed_split} --recipe RUN")
    if driver is None and recipe is None:
        raise click.UsageError("--driver is required (oracle, noop, wrong, openai or hf)")


def _default_run_dir(benchmark: str, split: str, kinds: tuple[str, ...], driver: str | None) -> Path:
    """runs/audit-[spider2-]<split>[-<kind>...]-<driver>-<timestamp>: a new run folder."""
    prefix = "spider2-" if benchmark == "spider2-dbt" else ""
    only = "".join(f"-{k}" for k in sorted(set(kinds)))
    return Path("runs") / f"audit-{prefix}{split}{only}-{driver or 'hf'}-{time.strftime('%Y%m%d-%H%M%S')}"


def _run(request: AuditRequest, as_json: bool) -> None:
    """Play the audit with progress on stderr (every mode) and print its summary, or one JSON object."""
    from rich.console import Console

    from dbt_harvest.cli._progress import progress
    from dbt_harvest.eval.audit.session import run_split

    console = Console(stderr=True)
    # progress on stderr in every mode: a bar on a terminal, one line per interval when piped (--json too)
    report = run_split(
        request,
        progress=progress,
        note=None if as_json else shown,
        say=lambda line: console.print(shown(line), markup=False),
    )
    if as_json:
        echo_json({"run_dir": str(request.run_dir), **{k: v for k, v in report.items() if k != "episodes"}})
    else:
        _print_summary(report, request.run_dir)


def _imported_checkout() -> Path:
    """The checkout `harvest spider2 import` recorded (a usage error when there is none)."""
    from dbt_harvest.eval.spider2.imported import recorded_checkout

    folder = recorded_checkout()
    if folder is None:
        raise click.UsageError(
            "no Spider2 checkout: pass --spider2 DIR, set SPIDER2_DIR, or run `harvest spider2 import DIR` once"
        )
    return folder


@command.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@json_option
@fails_cleanly
def report_command(run_dir: Path, as_json: bool) -> None:
    """(Re)write report.md, report.json and ladder.png of a run folder and print the summary."""
    from dbt_harvest.eval.audit.report import write_report
    from dbt_harvest.eval.audit.rundir import RunDir

    report = write_report(RunDir(run_dir))
    if as_json:
        echo_json({"run_dir": str(run_dir), **{k: v for k, v in report.items() if k != "episodes"}})
    else:
        _print_summary(report, run_dir)


@command.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--out",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for compare.md, compare.json and compare.png (default: RUN_B/compare-<RUN_A name>).",
)
@click.option(
    "--alpha",
    default=0.05,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Significance level of the exact McNemar test.",
)
@click.option(
    "--resamples",
    default=10_000,
    show_default=True,
    type=click.IntRange(100, 1_000_000),
    help="Paired bootstrap resamples for the interval of the difference.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Bootstrap seed (the report is reproducible).")
@json_option
@fails_cleanly
def compare_command(
    run_a: Path, run_b: Path, out: Path | None, alpha: float, resamples: int, seed: int, as_json: bool
) -> None:
    """Compare two audits of the same tasks (A = baseline, B = e.g. the adapter), task by task.

    Paired outcomes, the difference in k/N with a paired bootstrap interval, and exact McNemar: with the
    16-48 tasks of a split a difference of two tasks is noise, and the report says whether this one is.
    """
    from dbt_harvest.eval.audit.compare import compare_runs, power_summary, write_comparison

    comparison = compare_runs(run_a, run_b, alpha=alpha, resamples=resamples, seed=seed)
    paths = write_comparison(comparison, out or run_b / f"compare-{run_a.resolve().name}")
    if as_json:
        echo_json({**comparison.to_dict(), "files": {k: str(v) for k, v in paths.items()}})
        return
    from rich.console import Console

    console = Console()
    console.print(shown(comparison.summary(), lines=True), markup=False)
    console.print(
        f"difference (B - A) {comparison.difference:+.3f}, paired bootstrap 95% interval "
        f"[{comparison.ci_low:+.3f}, {comparison.ci_high:+.3f}]; report: {paths['md']}  chart: {paths['png']}",
        markup=False,
    )
    console.print(power_summary(comparison), markup=False)

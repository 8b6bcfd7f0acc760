"""`harvest score`: score a submission against gold (official mirror + strict), one instance or a
whole Spider 2.0-DBT submission folder, with the reason for every 0.

    harvest score --gold gold.duckdb --pred submitted.duckdb --spec spec.json [--explain] [--json]
    harvest score --spider2 --results DIR --gold DIR [--gold-alias ID=FILE ...] [--json]
    harvest score --task DATASET:INSTANCE_ID (--pred submitted.duckdb | --workspace DIR) [--json]

With --task the grading spec and the gold file come from a dataset row (a `harvest dataset build` folder
or a Hub repo id; the gold is checked against the row's sha256). --workspace builds a materialized
project (`harvest tasks materialize`) in the sandbox at the row's clock, as the audit's submit does, and
scores what it built.

With --spider2 the results folder is read exactly as Spider 2.0-DBT's evaluate.py reads it
(results_metadata.jsonl, answer_or_path relative to <results>/<instance_id>/); the honest k/N over every
instance of the gold metadata is printed beside what evaluate.py itself would print (k/M over the
submitted instances only).

Exit status: 0 when scoring ran, whatever the score (a 0 is a result, printed with its reason); 1 when it
could not run (unreadable gold or results); 2 for a usage error (a missing option, a malformed --spec file).
For CI, ``--fail-under X`` exits 1 when the official score is below X: the instance's 0 or 1 in the
single-instance form, the honest k/N over all gold instances with --spider2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, parse_aliases, say, shown
from dbt_harvest.core.errors import HarvestError

if TYPE_CHECKING:
    from dbt_harvest.core.scorer import GradingSpec
    from dbt_harvest.core.scorer.spider2 import Spider2Report


class ScoreUsageError(HarvestError):
    """The score command was given an unreadable spec or an inconsistent set of options."""


@click.command(name="score")
@click.option("--spider2", is_flag=True, help="Score a Spider 2.0-DBT results folder against its metadata.")
@click.option("--results", type=click.Path(path_type=Path), help="Spider 2.0-DBT results folder (with --spider2).")
@click.option(
    "--gold",
    type=click.Path(path_type=Path),
    help="Gold DuckDB file, or with --spider2 the gold folder holding spider2_eval.jsonl.",
)
@click.option(
    "--task",
    "task_ref",
    metavar="DATASET:INSTANCE_ID",
    help="Grade against a dataset row's spec and gold (DATASET: a built folder or a Hub repo id).",
)
@click.option(
    "--workspace",
    type=click.Path(path_type=Path, file_okay=False),
    help="With --task: build this workspace (sandboxed, at the row's clock) and score the build.",
)
@click.option("--pred", type=click.Path(path_type=Path), help="Submitted DuckDB file (single-instance form).")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="Grading spec JSON (single-instance form).")
@click.option(
    "--gold-alias",
    "gold_alias",
    multiple=True,
    metavar="ID=FILE",
    help="Use FILE in ID's gold folder in place of the metadata's gold name (recorded with its sha256).",
)
@click.option(
    "--explain", "show_explain", is_flag=True, help="Single-instance form: explain the verdicts (people only)."
)
@click.option(
    "--fail-under",
    type=click.FloatRange(0, 1),
    default=None,
    metavar="X",
    help="Exit 1 when the official score is below X (0..1): the instance's 0/1, or with --spider2 the "
    "honest k/N. Without it the exit status is 0 whenever scoring ran, even at score 0.",
)
@json_option
@fails_cleanly
def command(
    spider2: bool,
    results: Path | None,
    gold: Path | None,
    task_ref: str | None,
    workspace: Path | None,
    pred: Path | None,
    spec_path: Path | None,
    gold_alias: tuple[str, ...],
    show_explain: bool,
    fail_under: float | None,
    as_json: bool,
) -> None:
    """Score a submission: the official Spider 2.0-DBT verdict, the strict verdict beside it, and why.

    Exit 0 when scoring ran (even at score 0), 1 when it could not, 2 on a usage error; --fail-under X
    makes a score below X exit 1 (for CI)."""
    if task_ref is not None:
        if spider2 or gold is not None or spec_path is not None or gold_alias:
            raise click.UsageError("--task brings its own gold and spec: drop --gold/--spec/--spider2/--gold-alias")
        if (pred is None) == (workspace is None):
            raise click.UsageError("--task needs exactly one of --pred FILE or --workspace DIR")
        _check_fail_under(_score_task(task_ref, pred, workspace, show_explain, as_json), fail_under)
        return
    if workspace is not None:
        raise click.UsageError("--workspace belongs with --task")
    if gold is None:
        raise click.UsageError("give --gold (or --task DATASET:INSTANCE_ID)")
    if spider2:
        if results is None:
            raise click.UsageError("--spider2 needs --results DIR")
        if pred is not None or spec_path is not None:
            raise click.UsageError("--pred/--spec belong to the single-instance form, not --spider2")
        _check_fail_under(_score_spider2(results, gold, parse_aliases(gold_alias), as_json), fail_under)
        return
    if pred is None or spec_path is None:
        raise click.UsageError("give --pred FILE and --spec FILE (or --spider2 --results DIR)")
    if gold_alias:
        raise click.UsageError("--gold-alias only applies with --spider2")
    if show_explain and fail_under is not None:
        raise click.UsageError("--fail-under scores; --explain only explains: use one of them")
    _check_fail_under(_score_one(gold, pred, spec_path, show_explain, as_json), fail_under)


def _score_task(
    task_ref: str, pred: Path | None, workspace: Path | None, show_explain: bool, as_json: bool
) -> float | None:
    from dbt_harvest.corpora.materialize import load_task
    from dbt_harvest.harvester.gold import gold_path

    dataset, sep, instance_id = task_ref.rpartition(":")
    if not sep or not dataset or not instance_id:
        raise click.BadParameter(f"{task_ref!r}: expected DATASET:INSTANCE_ID", param_hint="--task")
    task, row, _ = load_task(dataset, instance_id)
    if workspace is not None:
        pred, why = _build_submission(workspace, row)
        if pred is None:  # as the audit grades it: a project that does not build scores 0 and 0
            if as_json:
                echo_json({"official": {"score": 0, "reason": why}, "strict": {"score": 0, "reason": why}})
            else:
                click.echo(f"official 0  ({why})\nstrict   0  ({why})")
            return 0.0
    assert pred is not None
    return _report(gold_path(task.gold_sha256), pred, task.grading, show_explain, as_json)


def _build_submission(workspace: Path, row: dict) -> tuple[Path | None, str]:
    """Build a materialized workspace in the sandbox at the row's clock (fresh database) -> its captured tables."""
    from dbt_harvest.core.errors import HarvestError
    from dbt_harvest.corpora.materialize import row_pin
    from dbt_harvest.harvester.build import build_workspace
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.sandbox import safe_fs

    root = workspace.resolve()
    if (root / "project").is_dir() and (root / "task.json").is_file():
        root = root / "project"  # the materialize folder itself
    # the row was checked (plain file name, relative project folder); these act beneath the workspace only
    for name in (row["database_file"], row["database_file"] + ".wal"):
        safe_fs.remove(root, name)
    project_file = f"{row['project_dir'].strip('/') or '.'}/dbt_project.yml".removeprefix("./")
    parts = project_file.split("/")
    for depth in range(1, len(parts) + 1):  # a sandboxed build wrote this tree: follow no link in it
        entry = safe_fs.lstat(root, "/".join(parts[:depth]))
        if entry is not None and entry.kind == "link":
            raise HarvestError(
                f"{'/'.join(parts[:depth])} in the workspace is a link; a workspace's project "
                "files are read without following links"
            )
    found = discover(root, row["project_dir"])
    pin = row_pin(row)  # what the row says of its pin: known failing tests, database file
    result = build_workspace(
        root,
        row["project_dir"],
        found.profile,
        row["profile_schema"],
        row["clock"],
        sandboxed=True,
        log_path=root / "harvest-score.log",
        capture=True,
        exclude_tests=pin.excluded_tests,
        db_file=pin.db_file,
        toolchain=pin.toolchain,
    )
    if not result.models_ok or result.gold_file is None:
        return None, f"the workspace does not build: {result.first_error} (log: {root / 'harvest-score.log'})"
    return result.gold_file, ""


def _check_fail_under(official: float | None, fail_under: float | None) -> None:
    """Exit 1 (after the report is printed) when the official score is below ``fail_under``."""
    if fail_under is None or official is None or official >= fail_under:
        return
    click.echo(f"error: official score {official:.4g} is below --fail-under {fail_under:g}", err=True)
    raise SystemExit(1)


def _score_one(gold: Path, pred: Path, spec_path: Path, show_explain: bool, as_json: bool) -> float | None:
    from dbt_harvest.core.scorer import GradingSpec
    from dbt_harvest.core.scorer.spec import SpecFormatError

    try:
        spec = GradingSpec.from_dict(json.loads(spec_path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ScoreUsageError(f"cannot read grading spec {spec_path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, SpecFormatError, AttributeError, UnicodeDecodeError) as exc:
        # a malformed spec is a usage error: exit 2 with click's usage message
        raise click.BadParameter(f"{spec_path} is not a grading spec: {exc}", param_hint="--spec") from None
    return _report(gold, pred, spec, show_explain, as_json)


def _report(gold: Path, pred: Path, spec: GradingSpec, show_explain: bool, as_json: bool) -> float | None:
    """Score (or explain) one prediction against its gold and print it; -> the official score (None: explained)."""
    from dbt_harvest.core.scorer import explain, score

    if show_explain:
        explanation = explain(gold, pred, spec)
        if as_json:
            echo_json(explanation.to_dict())
        else:
            say(explanation.to_text())  # values from the submission: escaped
        return None
    result = score(gold, pred, spec)
    if as_json:
        echo_json(result.to_dict())
        return float(result.official.score)
    for label, verdict in (("official", result.official), ("strict", result.strict)):
        click.echo(f"{label:<9}{verdict.score}" + (f"  ({shown(verdict.reason)})" if verdict.reason else ""))
    return float(result.official.score)


def _score_spider2(results: Path, gold: Path, aliases: dict[str, str], as_json: bool) -> float:
    from dbt_harvest.cli._progress import progress
    from dbt_harvest.core.scorer import spider2

    folder = spider2.read_folders(results, gold)  # layout errors surface before any progress bar
    spider2.validate_aliases(aliases, (str(k) for k in folder.gold))
    with progress("score", len(folder.gold), "instances") as tracker:  # stderr only: stdout stays the report
        report = spider2.score_read(folder, results, gold, aliases, progress=tracker.advance)
    if as_json:
        echo_json(report.to_dict())
    else:
        for line in report_lines(report):
            click.echo(shown(line))
    return report.score / report.total if report.total else 0.0


def report_lines(report: Spider2Report) -> list[str]:
    """The people's view of a Spider 2.0-DBT report: one line per instance, then both figures."""
    rows = report.instances
    width = max((len(r.instance_id) for r in rows), default=10)
    lines = []
    for r in rows:
        official = "-" if r.official is None else str(r.official)
        note = f"  [{r.status}]" if r.status != "graded" else ""
        problem = f"  (not a sound task: {r.task_problem})" if r.task_problem and r.task_problem not in r.reason else ""
        alias = ""
        if r.gold_alias is not None:
            alias = (
                f"  [gold {r.gold_alias.shipped_name} for {r.gold_alias.expected_name}, "
                f"sha256 {r.gold_alias.sha256[:12]}]"
            )
        lines.append(
            f"{r.instance_id:<{width}}  official {official}  strict {r.strict}{note}  {r.reason}{problem}{alias}"
        )
    if report.results_stopped:
        lines.append(f"note: {report.results_stopped}")
    if report.extra_results:
        lines.append(
            f"note: {len(report.extra_results)} results line(s) name instances the gold does not have "
            f"(ignored): {', '.join(report.extra_results[:5])}"
        )
    lines.append(
        f"honest: {report.score}/{report.total} over all instances (not submitted, not mirrored or "
        f"unsound = 0); strict {report.strict_score}/{report.total}"
    )
    if report.official_crash:
        lines.append(f"evaluate.py stops with an error on this folder and prints no score: {report.official_crash}")
    elif report.official_unknown:
        lines.append(
            f"evaluate.py: {report.official_score} of {report.submitted} submitted instances pass here; "
            f"{report.official_unknown} submitted instance(s) use checks not mirrored here, so its "
            "last line is unknown"
        )
    else:
        lines.append(
            f"evaluate.py prints: {report.official_line} ({report.official_score}/{report.submitted} "
            "over the submitted instances only)"
        )
    return lines

"""`harvest score`: score a submission against gold (official mirror + strict), one instance or a
whole Spider 2.0-DBT submission folder, with the reason for every 0.

    harvest score --gold gold.duckdb --pred submitted.duckdb --spec spec.json [--explain] [--json]
    harvest score --spider2 --results DIR --gold DIR [--gold-alias ID=FILE ...] [--json]
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli._common import echo_json, fails_cleanly, json_option, say, shown
from core.errors import HarvestError


class ScoreUsageError(HarvestError):
    """The score command was given an unreadable spec or an inconsistent set of options."""


def _parse_aliases(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        iid, sep, name = value.partition("=")
        if not sep or not iid or not name:
            raise click.BadParameter(f"{value!r}: expected INSTANCE_ID=FILE", param_hint="--gold-alias")
        out[iid] = name
    return out


@click.command(name="score")
@click.option("--spider2", is_flag=True, help="Score a Spider 2.0-DBT results folder against its metadata.")
@click.option("--results", type=click.Path(path_type=Path), help="Spider 2.0-DBT results folder (with --spider2).")
@click.option("--gold", type=click.Path(path_type=Path), required=True,
              help="Gold DuckDB file, or with --spider2 the gold folder holding spider2_eval.jsonl.")
@click.option("--pred", type=click.Path(path_type=Path), help="Submitted DuckDB file (single-instance form).")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="Grading spec JSON (single-instance form).")
@click.option("--gold-alias", "gold_alias", multiple=True, metavar="ID=FILE",
              help="Use FILE in ID's gold folder in place of the metadata's gold name (recorded with its sha256).")
@click.option("--explain", "show_explain", is_flag=True, help="Single-instance form: explain the verdicts (people only).")
@json_option
@fails_cleanly
def command(spider2: bool, results: Path | None, gold: Path, pred: Path | None, spec_path: Path | None,
            gold_alias: tuple[str, ...], show_explain: bool, as_json: bool) -> None:
    """Score a submission: the official Spider 2.0-DBT verdict, the strict verdict beside it, and why."""
    if spider2:
        if results is None:
            raise click.UsageError("--spider2 needs --results DIR")
        if pred is not None or spec_path is not None:
            raise click.UsageError("--pred/--spec belong to the single-instance form, not --spider2")
        _score_spider2(results, gold, _parse_aliases(gold_alias), as_json)
        return
    if pred is None or spec_path is None:
        raise click.UsageError("give --pred FILE and --spec FILE (or --spider2 --results DIR)")
    if gold_alias:
        raise click.UsageError("--gold-alias only applies with --spider2")
    _score_one(gold, pred, spec_path, show_explain, as_json)


def _score_one(gold: Path, pred: Path, spec_path: Path, show_explain: bool, as_json: bool) -> None:
    from core.scorer import GradingSpec, explain, score
    from core.scorer.spec import SpecFormatError

    try:
        spec = GradingSpec.from_dict(json.loads(spec_path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, SpecFormatError, AttributeError) as exc:
        raise ScoreUsageError(f"cannot read grading spec {spec_path}: {exc}") from None
    if show_explain:
        explanation = explain(gold, pred, spec)
        if as_json:
            echo_json(explanation.to_dict())
        else:
            say(explanation.to_text())  # values from the submission: escaped
        return
    result = score(gold, pred, spec)
    if as_json:
        echo_json(result.to_dict())
        return
    for label, verdict in (("official", result.official), ("strict", result.strict)):
        click.echo(f"{label:<9}{verdict.score}" + (f"  ({shown(verdict.reason)})" if verdict.reason else ""))


def _score_spider2(results: Path, gold: Path, aliases: dict[str, str], as_json: bool) -> None:
    from rich.progress import Progress

    from core.scorer import spider2

    instances = spider2.read_metadata(gold / spider2.METADATA_NAME)
    spider2.validate_aliases(aliases, instances)
    if not results.is_dir():
        raise spider2.Spider2LayoutError(f"results folder {results} does not exist")
    index = spider2.results_index(results)
    rows = []
    with Progress(transient=True, disable=as_json) as progress:
        task = progress.add_task("scoring", total=len(instances))
        for inst in instances:
            rows.append(spider2.score_instance(gold, results, index, inst, aliases))
            progress.advance(task)
    report = spider2.Spider2Report(tuple(rows))
    if as_json:
        echo_json(report.to_dict())
        return
    width = max((len(r.instance_id) for r in rows), default=10)
    for r in rows:
        alias = ""
        if r.gold_alias is not None:
            alias = f"  [gold {r.gold_alias.shipped_name} for {r.gold_alias.expected_name}, sha256 {r.gold_alias.sha256[:12]}]"
        click.echo(shown(f"{r.instance_id:<{width}}  official {r.official}  strict {r.strict}  {r.reason}{alias}"))
    data = report.to_dict()
    click.echo(
        f"official {report.score}/{report.total} over all instances (missing = 0); "
        f"{data['scoreable_score']}/{report.scoreable} over instances whose gold exists; "
        f"strict {report.strict_score}/{report.total}"
    )

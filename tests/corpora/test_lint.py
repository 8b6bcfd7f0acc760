"""Contamination lint: the Spider 2.0-DBT list and every leak across the train/eval line, with evidence."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from importlib import resources

import pytest
from click.testing import CliRunner
from corpora_world import hub, make_task

from dbt_harvest.cli import main
from dbt_harvest.corpora.exclusions import SHIPPED_SHA256, load_exclusions
from dbt_harvest.corpora.ledger import Params, assign, group_of
from dbt_harvest.corpora.lint import lint, lint_project
from dbt_harvest.corpora.store import store_task


def _kinds(violations):
    return sorted({v.kind for v in violations})


def test_shipped_exclusions_are_the_shared_facts_with_their_source():
    raw = resources.files("corpora").joinpath("data", "spider2_dbt_exclusions.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SHIPPED_SHA256
    ex = load_exclusions()
    assert ex.source["repo"] == "xlang-ai/Spider2" and len(ex.source["commit"]) == 40
    assert "fivetran/shopify_source" in ex.domain_packages and "dbt-labs/dbt_utils" in ex.utility_packages
    assert "jwills/dbt-external-tables" in ex.utility_packages  # git URLs normalised
    assert "SOURCE.md" in [p.name for p in resources.files("corpora").joinpath("data").iterdir()]


def test_benchmark_projects_and_domain_packages_are_flagged_utilities_are_not(world, make):
    ex = load_exclusions()
    clean = make(
        "acme/finance", packages=(hub("dbt-labs/dbt_utils"), hub("calogica/dbt_date"), hub("fivetran/fivetran_utils"))
    )
    same_project = make("someone/thing", project_name="tpch")
    is_domain = make("fivetran/dbt_shopify", project_name="shopify_integration_tests")
    depends = make("acme/store", packages=(hub("fivetran/shopify_source"),))
    depends_git = make(
        "acme/ads",
        packages=(replace(hub("x/y"), source="git:https://github.com/fivetran/dbt_google_ads_source.git", url=""),),
    )
    is_utility = make("dbt-labs/dbt-utils", project_name="dbt_utils")
    found = {
        (v.kind, v.subject) for v in lint([clean, same_project, is_domain, depends, depends_git, is_utility], [], ex)
    }
    assert ("benchmark-project", same_project.id) in found
    assert ("benchmark-package", is_domain.id) in found
    assert ("benchmark-dependency", depends.id) in found
    assert ("benchmark-dependency", depends_git.id) in found
    assert ("benchmark-package", is_utility.id) in found
    assert not any(subject == clean.id for _, subject in found)
    evidence = next(v.evidence for v in lint([depends], [], ex))
    assert "fivetran/shopify_source" in evidence and "Spider 2.0-DBT" in evidence


def test_leaks_across_the_line_are_each_reported_with_evidence(world, make):
    ex = load_exclusions()
    a = make("a/one", files={"models/shared.sql": "select 'same body' as x\n"})
    b = make("b/two", files={"models/shared.sql": "select 'same body' as x\n"})
    c = make("c/three")
    splits = {a.id: "train", b.id: "test", c.id: "dev"}
    statement = (
        "the revenue table double counts refunds for every customer who paid with two different cards last month"
    )
    train_task = make_task(c, "train", "c/three", 1, statement="Users say: " + statement)
    dev_task = make_task(c, "dev", "c/three", 2, statement=statement + " and nobody noticed")
    mismatched = make_task(a, "dev", "a/one", 3)
    found = lint([a, b, c], [train_task, dev_task, mismatched], ex, splits=splits)
    kinds = _kinds(found)
    assert kinds == ["group-split", "ngram-overlap", "shared-model-file", "split-mismatch"]
    overlap = next(v for v in found if v.kind == "ngram-overlap")
    assert overlap.subject == train_task.instance_id and dev_task.instance_id in overlap.evidence
    assert "'the revenue table double counts" in overlap.evidence
    shared = next(v for v in found if v.kind == "shared-model-file")
    assert "train: " in shared.evidence and "test: " in shared.evidence
    # 12 shared words are not an overlap
    short = make_task(c, "dev", "c/three", 4, statement=" ".join(statement.split()[:12]))
    assert not [
        v
        for v in lint([c], [make_task(c, "train", "c/three", 5, statement=statement), short], ex)
        if v.kind == "ngram-overlap"
    ]


def test_lint_project_sees_sealed_test_statements_without_reading_them_in_clear(world, make):
    t = make("t/testrepo")
    r = make("r/trainrepo")
    make("u/other")
    assign(world.pins, Params(0, 0, 0, test_groups=("t/testrepo",)))
    assert lint_project(world.pins, world.home) == []
    statement = (
        "every shipment that left the warehouse after midnight is attributed to the previous day in the daily report"
    )
    store_task(make_task(t, "test", group_of(t.id, world.pins), 1, statement=statement), world.home, world.pins)
    store_task(
        make_task(r, "train", group_of(r.id, world.pins), 2, statement="Again: " + statement), world.home, world.pins
    )
    found = lint_project(world.pins, world.home)
    assert _kinds(found) == ["ngram-overlap"] and "test task" in found[0].evidence
    make("late/unassigned")
    assert "unassigned" in _kinds(lint_project(world.pins, world.home))


def test_a_home_without_the_sealed_store_lints_the_rest_only_when_asked(world, make):
    """A home that grew train/dev pins never minted the test split: plain lint refuses (the check against
    the sealed tasks cannot run there); --without-sealed lints the rest, finds its leaks, and says what
    it did not check."""
    t = make("t/testrepo")
    r = make("r/trainrepo")
    d = make("d/devrepo")
    assign(world.pins, Params(0, 0, 0, test_groups=("t/testrepo",), dev_groups=("d/devrepo",)))
    statement = "every invoice paid in two instalments is counted twice in the monthly revenue of its customer"
    store_task(make_task(t, "test", group_of(t.id, world.pins), 1, statement="x " + statement), world.home, world.pins)
    for sealed in (world.home / "sealed" / "test").glob("*.json"):
        sealed.unlink()  # the seal in pins/ still counts the test task: this home never minted it
    store_task(
        make_task(r, "train", group_of(r.id, world.pins), 2, statement="Again: " + statement), world.home, world.pins
    )
    store_task(
        make_task(d, "dev", group_of(d.id, world.pins), 3, statement=statement + " again"), world.home, world.pins
    )
    runner = CliRunner()
    refused = runner.invoke(main, ["lint"])
    assert refused.exit_code == 1 and "sealed store" in refused.output
    found = runner.invoke(main, ["lint", "--without-sealed", "--json"])
    assert found.exit_code == 1, found.output
    data = json.loads(found.output)
    assert data["sealed_checked"] is False
    assert [v["kind"] for v in data["violations"]] == ["ngram-overlap"] and "dev task" in data["violations"][0][
        "evidence"
    ]
    said = runner.invoke(main, ["lint", "--without-sealed"])
    assert "NOT checked against the sealed test split" in said.output


def test_cli_lint_exit_codes_and_evidence(world, make):
    make("a/one")
    make("b/two")
    make("c/three")
    runner = CliRunner()
    result = runner.invoke(main, ["lint"])
    assert result.exit_code == 1 and "unassigned" in result.output
    assert runner.invoke(main, ["split", "assign", "--test", "1", "--dev", "1", "--seed", "7"]).exit_code == 0
    result = runner.invoke(main, ["lint", "--json"])
    assert result.exit_code == 0 and json.loads(result.output) == {"violations": [], "sealed_checked": True}
    make("someone/tpch-copy", project_name="tpch")
    runner.invoke(main, ["split", "assign"])
    result = runner.invoke(main, ["lint"])
    assert result.exit_code == 1
    assert "benchmark-project: someone__tpch-copy@" in result.output and "'tpch'" in result.output


@pytest.mark.parametrize("args", [["split", "show"], ["split", "show", "--json"]])
def test_cli_split_show(world, make, args):
    make("a/one")
    make("a/one-fork", fork_of="a/one", files={"models/z.sql": "select 'z'\n"})
    make("b/two")
    make("c/three")
    runner = CliRunner()
    assert runner.invoke(main, ["split", "assign", "--test", "1", "--dev", "1", "--seed", "1"]).exit_code == 0
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    if "--json" in args:
        data = json.loads(result.output)
        group = next(g for g in data["groups"] if g["group"] == "a/one")
        assert len(group["pins"]) == 2 and any("shared root commit" in r for r in group["reasons"])
        assert [h["action"] for h in data["history"]] == ["reserve"]
    else:
        assert "a/one" in result.output and "reserve" in result.output
    again = runner.invoke(main, ["split", "assign", "--test", "2", "--dev", "1", "--seed", "1"])
    assert again.exit_code == 1 and again.output.startswith("error:") and "--force" in again.output


def _template(table: str, description: str, gold_rows: int, mutant_rows: int, columns=()):
    from dbt_harvest.harvester.mint.statement import Symptom, template_statement

    return template_statement([Symptom(table, description, gold_rows, mutant_rows, tuple(columns))])


def test_template_statements_of_different_repositories_do_not_collide_on_the_template(world, make):
    from dbt_harvest.corpora.digest import ngrams

    ex = load_exclusions()
    a, b, c = make("a/library"), make("b/clinic"), make("c/freight")
    splits = {a.id: "train", b.id: "dev", c.id: "test"}
    tasks = [
        make_task(a, "train", "a/library", 1, statement=_template("fct_loans", "Loans that took place.", 10, 8)),
        make_task(
            a,
            "train",
            "a/library",
            2,
            statement=_template(
                "member_activity", "Members of the public.", 5, 5, [("fines_open", "Unpaid fines.", "higher")]
            ),
        ),
        make_task(b, "dev", "b/clinic", 3, statement=_template("fct_visits", "Visits kept or missed.", 10, 8)),
        make_task(
            b,
            "dev",
            "b/clinic",
            4,
            statement=_template(
                "patient_engagement", "Living patients.", 5, 5, [("balance_due", "What they owe.", "higher")]
            ),
        ),
        make_task(c, "test", "c/freight", 5, statement=_template("fct_shipments", "Consignments that moved.", 10, 8)),
    ]
    # the raw statements do share the template's 13-grams (what made `harvest lint` fail before) ...
    assert set(ngrams(tasks[0].problem_statement)) & set(ngrams(tasks[2].problem_statement))
    # ... the lint compares what is specific to each task, and finds nothing
    assert [v for v in lint([a, b, c], tasks, ex, splits=splits) if "statement" in v.kind or "ngram" in v.kind] == []


def test_a_task_copied_across_the_line_still_fails_the_lint(world, make):
    ex = load_exclusions()
    a, b = make("a/library"), make("b/clinic")
    splits = {a.id: "train", b.id: "dev"}
    documented = _template(
        "member_activity",
        "Members of the public, one row each, with their borrowing in "
        "the 60 days up to today and the fines they still owe.",
        22,
        20,
    )
    undocumented = _template("fct_loans", "", 10, 12)
    for statement, kinds in ((documented, {"ngram-overlap", "same-statement"}), (undocumented, {"same-statement"})):
        original = make_task(a, "train", "a/library", 1, statement=statement)
        copied = make_task(b, "dev", "b/clinic", 2, statement=statement)
        found = lint([a, b], [original, copied], ex, splits=splits)
        assert {v.kind for v in found} == kinds, found
        assert all(v.subject == original.instance_id and copied.instance_id in v.evidence for v in found)
    # a description shared word for word across the line is flagged even under another table's name
    shared = "Members of the public, one row each, with their borrowing in the 60 days up to today"
    found = lint(
        [a, b],
        [
            make_task(a, "train", "a/library", 3, statement=_template("members", shared, 5, 4)),
            make_task(b, "dev", "b/clinic", 4, statement=_template("patients", shared, 5, 5, [("x", "", "lower")])),
        ],
        ex,
        splits=splits,
    )
    assert [v.kind for v in found] == ["ngram-overlap"]


VENDOR_DOC = (
    "Boolean representing whether a record is the most recent version of that record, as the vendor's "
    "connector documents it for every history table it syncs."
)


def _completion(pin, split: str, group: str, n: int, columns):
    from dbt_harvest.harvester.mint.contract import ColumnContract, Contract, completion_statement

    name = f"fct_{group.split('/')[-1]}_{n}"
    contract = Contract(
        model=f"model.p.{name}",
        name=name,
        file=f"models/{name}.sql",
        description=f"One row per {group} thing of case {n}.",
        materialized="table",
        columns=tuple(ColumnContract(c, d) for c, d in columns),
        model_tests=(),
        reads=("model stg",),
        depth=1,
    )
    return replace(
        make_task(pin, split, group, n, statement=completion_statement(contract)),
        kind="completion",
        operator="complete",
        family="completion",
    )


def test_a_column_documented_word_for_word_in_two_repositories_is_shared_text_not_a_leak(world, make):
    ex = load_exclusions()
    a, b = make("a/library"), make("b/clinic")
    splits = {a.id: "train", b.id: "dev"}
    dev = _completion(b, "dev", "b/clinic", 1, [("visit_id", "The visit."), ("is_most_recent_record", VENDOR_DOC)])
    train = _completion(a, "train", "a/library", 2, [("loan_id", "The loan."), ("is_most_recent_record", VENDOR_DOC)])
    # a repair statement that names the same column with the same documentation, in its own words around it
    repair = make_task(
        a,
        "train",
        "a/library",
        3,
        statement=_template(
            "loans_history", "Loans as they changed.", 5, 5, [("is_most_recent_record", VENDOR_DOC, "true_more")]
        ),
    )
    assert lint([a, b], [dev, train, repair], ex, splits=splits) == []
    # the same words under another column's name, or only a part of the evaluation task's line, are evidence
    renamed = _completion(a, "train", "a/library", 4, [("is_latest", VENDOR_DOC)])
    found = lint([a, b], [dev, renamed], ex, splits=splits)
    assert [(v.kind, v.subject) for v in found] == [("ngram-overlap", renamed.instance_id)]
    own = _completion(
        b, "dev", "b/clinic", 5, [("is_most_recent_record", VENDOR_DOC + " It is false for deleted rows.")]
    )
    found = lint([a, b], [own, train], ex, splits=splits)
    assert [(v.kind, v.subject) for v in found] == [("ngram-overlap", train.instance_id)]


def test_words_that_three_repositories_share_are_documentation_two_are_evidence(world, make):
    ex = load_exclusions()
    a, b, c = make("a/library"), make("b/clinic"), make("c/freight")
    shared = (
        "Members of the public, one row each, with their borrowing in the 60 days up to today and the fines "
        "they still owe."
    )
    dev = make_task(b, "dev", "b/clinic", 1, statement=_template("patients", shared, 5, 4))
    first = make_task(a, "train", "a/library", 2, statement=_template("members", shared, 5, 4))
    two = lint([a, b], [dev, first], ex, splits={a.id: "train", b.id: "dev"})
    assert [v.kind for v in two] == ["ngram-overlap"]
    third = make_task(c, "train", "c/freight", 3, statement=_template("drivers", shared, 5, 4))
    assert lint([a, b, c], [dev, first, third], ex, splits={a.id: "train", b.id: "dev", c.id: "train"}) == []
    # two columns' lines side by side are no phrase of either: the lint reads a completion line by line
    from dbt_harvest.corpora.digest import specific_runs

    statement = _completion(
        a, "train", "a/library", 4, [("loan_id", "The loan."), ("due", "When it is due.")]
    ).problem_statement
    assert ["loan_id", "the", "loan"] in specific_runs(statement) and [
        "due",
        "when",
        "it",
        "is",
        "due",
    ] in specific_runs(statement)

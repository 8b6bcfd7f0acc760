"""Task quality on the ``parcel_depot`` fixture: gold any correct build matches, statements from the
confirmed build, wrong repairs that prove something, one task per bug, labelled local checks, the quality
report, and the independent verifier (``harvest tasks verify``).

Each test names the rule it holds the harvester to; every one of them fails when its rule is removed
(``test_…_without_the_rule`` parts show the unguarded behaviour on the same data where it is cheap).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dbt_harvest.core.closing import repair_closing
from dbt_harvest.harvester.mint.candidates import Candidate
from dbt_harvest.mutators import Edit, Mutation, WrongRepair
from tests.fixtures import PARCEL_BOUNDARY_KG, fixture_repo

HEAVY = "model.parcel_depot.heavy_parcels"
HEAVY_FILE = "models/marts/heavy_parcels.sql"
REVENUE = "model.parcel_depot.sender_revenue"
REVENUE_FILE = "models/marts/sender_revenue.sql"
REGION = "model.parcel_depot.region_summary"
REGION_FILE = "models/marts/region_summary.sql"


@pytest.fixture(scope="module")
def depot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`harvest add` of parcel_depot (sandboxed), its built state, lineage, tests and gold."""
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.gold import gold_path
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.mint.local_checks import suite
    from dbt_harvest.harvester.state import load_state
    from dbt_harvest.harvester.workspace import template
    from tests.conftest import use_env

    root = tmp_path_factory.mktemp("depot")
    repo = fixture_repo("parcel_depot", root / "repo")
    home, pins = root / "home", root / "pins"
    with use_env(home, pins):
        pin = add(f"{repo.path}@{repo.head}", AddOptions()).pin
        state = load_state(pin.id)
        tree = template(pin)
        world = {
            "pin": pin,
            "state": state,
            "nodes": models(state.manifest),
            "tests": suite(state.manifest),
            "gold": gold_path(pin.gold_sha256),
            "tree": tree,
            "home": home,
            "pins": pins,
            "scratch": root / "scratch",
        }
    world["env"] = lambda: use_env(home, pins)
    return world


def _table(pin, name: str):  # type: ignore[no-untyped-def]
    return next(t for t in pin.tables if t.name == f"main.{name}")


# --- gold any correct build matches ----------------------------------------------------------------------


def test_a_value_naming_the_database_is_found_and_never_graded(depot) -> None:  # type: ignore[no-untyped-def]
    pin = depot["pin"]
    staged = _table(pin, "stg_parcels")
    # the second build of `harvest add` used another database file name: the column that embeds it
    # differed, a third build (same name as the first) agreed: it depends on the name, not on chance
    assert staged.database_columns == ("_loaded_from",) and staged.unstable_columns == ("_loaded_from",)
    assert staged.deterministic and staged.gradable
    position = [c.name for c in staged.columns].index("_loaded_from")
    assert position not in staged.stable_positions
    assert pin.database == "build"


def test_the_clock_is_frozen_so_time_derived_columns_are_gold(depot) -> None:  # type: ignore[no-untyped-def]
    pin = depot["pin"]
    revenue = _table(pin, "sender_revenue")
    # current_timestamp in two builds: equal only when the clock does not tick
    assert pin.clock_frozen and revenue.deterministic and revenue.unstable_columns == ()
    import duckdb

    con = duckdb.connect(str(depot["gold"]), read_only=True)
    try:
        stamps = {r[0] for r in con.execute("select refreshed_at from main.sender_revenue").fetchall()}
    finally:
        con.close()
    assert len(stamps) == 1 and str(next(iter(stamps))).startswith(pin.clock.split(" ")[0])


def test_old_pins_without_the_new_fields_still_read_byte_for_byte(depot) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.pin import Pin, pin_from_dict

    pin = depot["pin"]
    old = replace(
        pin, clock_frozen=False, tables=tuple(replace(t, unstable_columns=(), database_columns=()) for t in pin.tables)
    )
    text = old.to_toml()
    assert "clock_frozen" not in text and "unstable_columns" not in text and "database = " not in text
    import tomllib

    data = tomllib.loads(text)
    data.pop("digest")
    assert pin_from_dict(data) == old and isinstance(old, Pin)


# --- hand-made candidates through screening and confirmation ----------------------------------------


def _candidate(
    depot,
    model: str,
    file: str,
    old: str,
    new: str,
    wrong: tuple[tuple[str, str], ...] = (),
    effect: str = "changed_values",
    family: str = "filter",
) -> Candidate:  # type: ignore[no-untyped-def]
    text = (depot["tree"] / file).read_text()
    start = text.index(old)
    edit = Edit(start, start + len(old), new)
    broken = edit.apply(text)
    repairs = []
    for before, after in wrong:
        at = broken.index(before)
        repairs.append(WrongRepair(at, at + len(before), after, "hand-made"))
    mutation = Mutation(f"{family}.hand_made", family, effect, edit, tuple(repairs), "hand-made")
    return Candidate(depot["pin"].id, model, file, text, mutation)


def _screen(depot, cand):  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.engine import Engine
    from dbt_harvest.harvester.mint.screen import screen

    catalog = depot["nodes"][cand.model].relation.split(".")[0].strip('"')
    engine = Engine(depot["state"].database, catalog, depot["scratch"] / f"engine-{cand.key}")
    try:
        with depot["env"]():
            return screen(engine, depot["pin"], depot["nodes"], cand, depot["gold"], depot["tests"])
    finally:
        engine.close()


def _confirm(depot, cand, *, seen=None, wrong_order=None):  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.confirm import BuildContext, Seen, confirm
    from dbt_harvest.harvester.sandbox import Limits

    node = depot["nodes"][cand.model]
    ctx = BuildContext(
        depot["pin"],
        depot["gold"],
        depot["scratch"] / f"confirm-{cand.key}",
        True,
        Limits(wall_s=300),
        base_db=depot["state"].database,
        select=(f"{node.name}+",),
    )
    with depot["env"]():
        return confirm(
            ctx, cand, None, nodes=depot["nodes"], tests=depot["tests"], seen=seen or Seen(), wrong_order=wrong_order
        )


def _boundary_flip(depot, wrong=(("state != 'lost'", "state != 'returned'"),)):  # type: ignore[no-untyped-def]
    return _candidate(
        depot,
        HEAVY,
        HEAVY_FILE,
        f"weight_kg > {PARCEL_BOUNDARY_KG}\n",
        f"weight_kg >= {PARCEL_BOUNDARY_KG}\n",
        wrong,
        effect="more_rows",
    )


@pytest.fixture(scope="module")
def flip(depot):  # type: ignore[no-untyped-def]
    """The boundary flip and its confirmation (a sandboxed build), read by three tests."""
    cand = _boundary_flip(depot)
    return cand, _confirm(depot, cand)


def test_statement_claims_come_from_the_build_with_its_hooks(depot, flip) -> None:  # type: ignore[no-untyped-def]
    cand, outcome = flip
    screened = _screen(depot, cand)
    # screening runs the model's SQL without its post-hook: gold has the hook's row, the re-run not,
    # so the row the bug adds looks like "the same number of rows with other values"
    assert screened.observation is not None
    assert screened.observation.changed["main.heavy_parcels"] == (3, 3)
    assert outcome.ok, (outcome.reason, outcome.detail)
    from dbt_harvest.core.task_record import Claim

    # the real build (hook included) adds a row: that is what the statement says, and it holds
    assert outcome.claims == (Claim("heavy_parcels", "more_rows"),)
    assert outcome.effect == "more_rows" and "more rows" in outcome.statement
    assert outcome.grading is not None and outcome.grading.condition_tabs == ("heavy_parcels",)
    # no dbt test covers heavy_parcels: labelled, not dropped
    assert outcome.local_checks is not None and outcome.local_checks.covering_tests == ()


def test_a_false_claim_is_caught_on_the_built_tables(depot, flip) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.task_record import Claim
    from dbt_harvest.harvester.mint.claims import check_claims

    cand, outcome = flip
    assert outcome.ok
    # what screening's observation would have claimed: a column of equal rows holding other values
    mutant = _mutant_capture(depot, cand)
    with depot["env"]():
        results = check_claims(
            depot["pin"],
            (Claim("heavy_parcels", "different", "handling"), Claim("heavy_parcels", "fewer_rows")),
            depot["gold"],
            mutant,
        )
    assert [r.holds for r in results] == [False, False]


def test_a_statement_says_which_way_a_column_moved_in_the_words_its_claim_checks(depot) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.task_record import Claim
    from dbt_harvest.harvester.mint.statement import COLUMN_WORDS

    # senders 4 and 5 have no delivered parcel: without the coalesce their revenue is NULL, not 0
    cand = _candidate(
        depot,
        REVENUE,
        REVENUE_FILE,
        "coalesce(sum(d.fee), 0) as revenue",
        "sum(d.fee) as revenue",
        (("sum(d.fee) as revenue", "coalesce(sum(d.fee), 1) as revenue"),),
        family="null",
    )
    outcome = _confirm(depot, cand)
    assert outcome.ok, (outcome.reason, outcome.detail)
    assert Claim("sender_revenue", "nulls_more", "revenue") in outcome.claims
    # the claim checked is "more NULLs", so the words say that, not only "wrong values" (before: every
    # direction but higher/lower read "holds wrong values for some rows")
    assert f"`revenue` (Fees of delivered parcels) {COLUMN_WORDS['nulls_more']}" in outcome.statement
    assert COLUMN_WORDS["different"] not in outcome.statement
    from dbt_harvest.harvester.mint.observe import DIRECTIONS

    assert set(COLUMN_WORDS) == set(DIRECTIONS) and len(set(COLUMN_WORDS.values())) == len(DIRECTIONS)


def _mutant_capture(depot, cand) -> Path:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.build import build_workspace
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.workspace import fresh_workspace

    with depot["env"]():
        workspace = depot["scratch"] / f"full-{cand.key}"
        if not workspace.exists():
            fresh_workspace(depot["pin"], workspace)
            (workspace / cand.file).write_text(cand.broken)
        result = build_workspace(
            workspace,
            depot["pin"].project_dir,
            discover(workspace, ".").profile,
            "main",
            depot["pin"].clock,
            db_file="other_name.duckdb",
        )
    assert result.models_ok and result.gold_file is not None, result.first_error
    return result.gold_file


def test_a_wrong_repair_that_changes_nothing_the_grader_sees_is_refused(depot) -> None:  # type: ignore[no-untyped-def]
    # "fix" the bug by excluding lost parcels a second way: the graded output stays the broken one
    noop = (("state != 'lost'", "state != 'lost' and state is not null"),)
    cand = _boundary_flip(depot, noop)
    screened = _screen(depot, cand)
    assert (screened.ok, screened.reason) == (False, "no_wrong_repair")
    assert "not informative" in screened.detail
    outcome = _confirm(depot, cand, wrong_order=(0,))  # confirmation alone says the same
    assert (outcome.ok, outcome.reason) == (False, "no_wrong_repair") and "not informative" in outcome.detail


def test_an_informative_wrong_repair_records_what_it_fixes_and_leaves(depot) -> None:  # type: ignore[no-untyped-def]
    # dropped "lost" exclusion in region_summary, restored with another state: rows stay, figures move
    cand = _candidate(
        depot,
        REGION,
        REGION_FILE,
        "where p.state in ('delivered', 'in_transit', 'returned')\n",
        "where p.state in ('delivered', 'in_transit', 'returned', 'lost')\n",
        (
            ("'returned', 'lost')", "'returned', 'lost', 'unknown')"),
            ("'in_transit', 'returned', 'lost')", "'in_transit', 'lost')"),
        ),
        effect="changed_values",
    )
    outcome = _confirm(depot, cand)
    assert outcome.ok, (outcome.reason, outcome.detail)
    assert len(outcome.wrong_patches) == 1 and "'in_transit', 'lost')" in outcome.wrong_patches[0]
    (note,) = outcome.wrong_notes
    assert note.intent == "hand-made" and note.leaves
    assert all("region_summary" in item for item in note.fixes + note.leaves)


def test_the_same_bug_twice_is_one_task(depot, flip) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.confirm import Seen

    first = flip[1]
    assert first.ok and first.signature
    # another edit with the same broken outputs: the boundary moved to 39.5 instead of flipping >
    twin = _candidate(
        depot,
        HEAVY,
        HEAVY_FILE,
        f"weight_kg > {PARCEL_BOUNDARY_KG}\n",
        "weight_kg > 39.5\n",
        (("state != 'lost'", "state != 'returned'"),),
        effect="more_rows",
    )
    assert twin.key != _boundary_flip(depot).key
    again = _confirm(depot, twin, seen=Seen(frozenset({first.signature})))
    assert (again.ok, again.reason) == (False, "duplicate")
    alone = _confirm(depot, twin)  # without the pin's index it would have been kept: same signature
    assert alone.ok and alone.signature == first.signature
    # the same words for another bug are refused too
    from dbt_harvest.harvester.mint.confirm import statement_digest

    worded = _confirm(depot, twin, seen=Seen(frozenset(), frozenset({statement_digest(first.statement)})))
    assert (worded.ok, worded.reason) == (False, "duplicate_statement")


def test_the_driver_drops_duplicates_across_shards() -> None:
    from dbt_harvest.harvester.mint.pipeline import distinct_bugs
    from dbt_harvest.harvester.mint.shard import CandidateReport, ShardResult

    def report(key: str, task: str, signature: str, digest: str) -> CandidateReport:
        return CandidateReport(
            key,
            "p@1",
            "m",
            "f",
            "op",
            "filter",
            "more_rows",
            "confirm",
            True,
            "",
            "",
            task_id=task,
            signature=signature,
            statement_digest=digest,
        )

    tasks = tuple(type("R", (), {"instance_id": i})() for i in ("t1", "t2", "t3"))
    result = ShardResult(
        (report("a", "t1", "s1", "d1"), report("b", "t2", "s1", "d2"), report("c", "t3", "s3", "d1")), tasks
    )  # type: ignore[arg-type]
    index: dict[str, dict[str, str]] = {"signatures": {}, "statements": {}}
    reports, kept = distinct_bugs(result, index)
    assert [(r.key, r.kept, r.reason) for r in reports] == [
        ("a", True, ""),
        ("b", False, "duplicate"),
        ("c", False, "duplicate_statement"),
    ]
    assert [t.instance_id for t in kept] == ["t1"] and index["signatures"] == {"s1": "t1"}
    again, kept_again = distinct_bugs(ShardResult((report("a", "t1", "s1", "d1"),), tasks[:1]), index)  # type: ignore[arg-type]
    assert again[0].kept and [t.instance_id for t in kept_again] == ["t1"]  # a re-run keeps its own task


def test_dead_placeholder_code_is_not_a_candidate(depot) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.candidates import model_candidates

    dead: list = []
    with depot["env"]():
        found = list(model_candidates(depot["pin"], depot["nodes"][REVENUE], depot["tree"], None, 0, dead=dead))
    assert found
    for cand in found:
        assert "where 1 = 0" in cand.broken, cand.mutation.description
    # the placeholder's sites are counted, not tried: flipping, negating, dropping `1 = 0`
    assert len(dead) >= 4 and {d.family for d in dead} == {"filter"}
    assert all("always false" in d.why or "constant" in d.why for d in dead)


# --- a whole mint, the report, and the verifier ----------------------------------------------------------


@pytest.fixture(scope="module")
def minted(depot) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.ledger import Params, assign
    from dbt_harvest.corpora.store import load_tasks, mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, mint, yield_report

    with depot["env"]():
        assign(depot["pins"], Params(test=0, dev=0, seed=0))
        mint([depot["pin"]], MintOptions(max_per_model=2, seed=0), mint_target(harvest_home(), pins_dir()))
        tasks = load_tasks("train", depot["home"], depot["pins"], purpose="inspect")
        report = yield_report([depot["pin"].id])
    return {"tasks": tasks, "report": report}


def test_every_kept_task_holds_the_quality_rules(minted) -> None:  # type: ignore[no-untyped-def]
    tasks = minted["tasks"]
    assert tasks
    assert len({t.broken_signature for t in tasks}) == len(tasks)
    assert len({t.problem_statement for t in tasks}) == len(tasks)
    for task in tasks:
        assert task.wrong_repair_patches and len(task.wrong_repair_notes) == len(task.wrong_repair_patches)
        # the statement names dbt tests only when some cover the broken lineage
        assert task.problem_statement.endswith(repair_closing(task.local_checks))
        assert ("dbt tests" in task.problem_statement) == bool(task.local_checks.tests_total or task.local_tests)
        assert task.claims and all(c.table in task.grading.condition_tabs for c in task.claims)
        assert task.database == "build" and task.effect in ("more_rows", "fewer_rows", "changed_values")
        # the database-name column is never graded
        for table, cols in zip(task.grading.condition_tabs, task.grading.condition_cols):
            if table == "stg_parcels":
                assert 6 not in cols


def test_the_quality_report_counts_what_the_issue_asks(minted) -> None:  # type: ignore[no-untyped-def]
    report = minted["report"]
    quality = report["quality"]
    kept = len(minted["tasks"])
    assert quality["kept"] == kept and quality["informative_wrong_repair"] == kept and quality["informative_rate"] == 1
    assert quality["claims_checked"] >= kept
    assert quality["local_tests_zero"] == sum(1 for t in minted["tasks"] if t.local_tests == 0)
    assert report["tasks_per_repository"] and sum(report["tasks_per_repository"].values()) == kept
    assert quality["dead_sites"] >= 4  # sender_revenue's placeholder, at least
    for row in report["families"].values():
        assert {"candidates", "dead_sites", "screened_out", "confirm_rejected", "kept"} <= set(row)


def test_verify_rebuilds_every_task_independently_and_catches_a_bad_one(depot, minted, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from dbt_harvest.cli import main
    from dbt_harvest.core.task_record import write_task

    # every progress update printed: the piped lines say how far the real builds got
    env = {"HARVEST_HOME": str(depot["home"]), "HARVEST_PINS": str(depot["pins"]), "HARVEST_PROGRESS_INTERVAL": "0"}
    assert len(minted["tasks"]) >= 2
    good, second = minted["tasks"][:2]
    # the second task made bad: its statement claims the opposite, and its "wrong repair" only adds a comment
    # to the broken file (its graded output IS the broken one: it proves nothing). Verified in one run with a
    # good task of the same pin (one set of fresh builds per pin, the unmodified project built once)
    from dbt_harvest.core.patching import apply_to_text, make_patch, parse_patch

    original_text = (depot["tree"] / second.file).read_text()
    broken_text = apply_to_text(original_text, parse_patch(second.broken_patch)[0])
    noop = make_patch(second.file, broken_text, broken_text + "\n-- reviewed\n")
    flipped = {"more_rows": "fewer_rows", "fewer_rows": "more_rows", "higher": "lower", "lower": "higher"}
    claims = tuple(replace(c, kind=flipped.get(c.kind, "nulls_less")) for c in second.claims)
    bad = replace(second, claims=claims, wrong_repair_patches=(noop,))
    folder = depot["home"] / "tasks" / "train"
    original = (folder / f"{second.instance_id}.json").read_text()
    try:
        write_task(bad, folder)
        result = CliRunner().invoke(main, ["tasks", "verify", good.instance_id, second.instance_id, "--json"], env=env)
    finally:
        (folder / f"{second.instance_id}.json").write_text(original)
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)  # the whole of stdout is one JSON object: progress goes to stderr
    assert data["summary"]["ok"] == 1
    # the verdicts come in id order (good sorts first): counted progress with the real verdicts
    progress = [line.rsplit(" (", 1)[0] for line in result.stderr.splitlines() if line.startswith("tasks verify: ")]
    assert progress == [
        "tasks verify: 1/2 tasks, 1 verified, 0 failed",
        "tasks verify: 2/2 tasks, 1 verified, 1 failed",
    ]
    verdicts = {v["instance_id"]: v for v in data["tasks"]}
    assert set(verdicts[good.instance_id]["checks"]) == {
        "gold_matches",
        "broken_fails",
        "repair_passes",
        "wrong_repair",
        "claims",
        "distinct",
        "stable_gold",
    }
    assert verdicts[good.instance_id]["ok"] and all(c["ok"] for c in verdicts[good.instance_id]["checks"].values())
    checks = verdicts[second.instance_id]["checks"]
    assert not checks["claims"]["ok"] and not checks["wrong_repair"]["ok"]
    assert "not informative" in checks["wrong_repair"]["detail"]
    assert checks["gold_matches"]["ok"] and checks["broken_fails"]["ok"] and checks["repair_passes"]["ok"]


def test_a_restored_filter_may_take_another_value_the_data_holds(depot) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.mint.candidates import model_candidates
    from dbt_harvest.harvester.mint.domain import gold_values

    with depot["env"]():
        values = gold_values(depot["gold"])
        assert values("state") == ("delivered", "in_transit", "lost", "returned")
        plain = list(model_candidates(depot["pin"], depot["nodes"][REVENUE], depot["tree"], ["filter"], 0))
        rich = list(
            model_candidates(depot["pin"], depot["nodes"][REVENUE], depot["tree"], ["filter"], 0, values=values)
        )
    dropped = next(c for c in rich if c.mutation.operator == "filter.drop_conjunct")
    restored = [
        w.apply(dropped.broken)
        for w in dropped.mutation.wrong_repairs
        if w.intent == "restore the filter with another value of the column"
    ]
    # the file spells only 'delivered': the other states come from the data
    assert any("state = 'in_transit'" in t for t in restored) and any("state = 'lost'" in t for t in restored)
    assert not any(
        w.intent == "restore the filter with another value of the column"
        for c in plain
        for w in c.mutation.wrong_repairs
    )

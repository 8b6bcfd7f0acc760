"""Distinguishing data through lineage (issue 16) on the ``club_ledger`` fixture: the columns its mart
reads are computed in staging (renamed, cast, lowered), so a distinguishing row must be traced back to
the seed column. Each derivation is checked on the real built pin: on the seeds the mutant equals the
original (the re-run shows no difference), with the derived rows it does not, and one augmentation
holding all of them keeps the original project healthy (it builds, every dbt test passes).

Real dbt, DuckDB, git and sandbox; the pure tracing is tested on its own at the end.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.fixtures import fixture_repo

MART = "model.club_ledger.member_balances"
ACTIVITY = "model.club_ledger.region_activity"


@pytest.fixture(scope="module")
def club(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """club_ledger pinned (built twice, sandboxed), its mart's candidates and the lineage of the pin."""
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.augment.run import lineage_of, read_seeds
    from dbt_harvest.harvester.mint.candidates import model_candidates
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.state import load_state
    from dbt_harvest.harvester.workspace import template
    from tests.conftest import use_env

    root = tmp_path_factory.mktemp("club")
    repo = fixture_repo("club_ledger", root / "repo")
    home, pins = root / "home", root / "pins"
    with use_env(home, pins):
        pin = add(f"{repo.path}@{repo.head}", AddOptions()).pin
        state = load_state(pin.id)
        nodes = models(state.manifest)
        tree = template(pin)
        candidates = {
            uid: tuple(model_candidates(pin, nodes[uid], tree, ("null", "join"), 0)) for uid in (MART, ACTIVITY)
        }
        seeds = read_seeds(tree, pin.project_dir, state.manifest)
        lineage = lineage_of(state.manifest, state.database)
    return {
        "pin": pin,
        "state": state,
        "nodes": nodes,
        "candidates": candidates,
        "seeds": seeds,
        "lineage": lineage,
        "root": root,
        "env": lambda: use_env(home, pins),
    }


def _derive(club: dict[str, Any], operator: str, removed: str, model: str = MART):  # type: ignore[no-untyped-def]
    """The candidate of ``operator`` in ``model`` whose edit removes ``removed``, its proposal and both
    screens (the mutant re-run on the seeds, and on the seeds with the derived rows)."""
    from dbt_harvest.harvester.augment.derive import propose, render
    from dbt_harvest.harvester.augment.run import screen_rows
    from dbt_harvest.mutators import transplant

    node = club["nodes"][model]
    compiled = node.compiled_code
    for cand in club["candidates"][model]:
        placed = transplant(cand.mutation.edit, cand.original, compiled)
        if cand.mutation.operator != operator or placed is None or removed not in compiled[placed.start : placed.end]:
            continue
        mutated = placed.apply(compiled)
        proposal = propose(
            cand.key,
            cand.mutation.family,
            operator,
            compiled[placed.start : placed.end],
            placed.replacement,
            compiled,
            mutated,
            tuple(club["seeds"].values()),
            frozenset(),
            lambda *a: None,
            0,
            club["lineage"],
        )
        _, written = render(club["seeds"], list(proposal.rows))
        with club["env"]():
            args = (club["pin"], club["state"].manifest, club["nodes"], club["seeds"])
            scratch = club["root"] / "screen" / cand.key
            before = screen_rows(*args, (), model, mutated, scratch / "off")
            after = screen_rows(*args, written, model, mutated, scratch / "on")
        return proposal, written, before, after
    raise AssertionError(f"no {operator} candidate removing {removed!r}")


def test_a_null_in_a_renamed_and_cast_column_is_set_in_the_seed_column_it_comes_from(club) -> None:  # type: ignore[no-untyped-def]
    proposal, written, before, after = _derive(club, "null.drop_coalesce_default", "members.bonus_points")
    # the mart reads members.bonus_points; staging computes it as cast(bonus_pts as double)
    assert proposal.row.seed == "ledger_members" and proposal.row.values == (("bonus_pts", ""),)
    assert written == (("ledger_members", ("5", "Ada", "north", "")),)  # a clone of a real member, fresh id
    assert (before, after) == (False, True)


def test_a_null_from_an_unmatched_left_join_is_an_outer_row_whose_traced_key_matches_nothing(club) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import FRESH

    proposal, written, before, after = _derive(club, "null.drop_coalesce_default", "paid.total_paid")
    # paid is the joined side of the LEFT JOIN: its columns are NULL for a member who never paid
    assert proposal.row.seed == "ledger_members" and proposal.row.values == (("id", FRESH),)
    assert [w[0] for w in written] == ["ledger_members"] and written[0][1][0] not in {"1", "2", "3", "4"}
    assert (before, after) == (False, True)


@pytest.mark.parametrize(
    "dropped, seed_column",
    [("members.member_id = paid.member_id", "member_ref"), ("members.region = paid.region", "region")],
)
def test_a_dropped_join_key_is_seen_through_a_twin_whose_traced_key_is_fresh(
    club, dropped: str, seed_column: str
) -> None:  # type: ignore[no-untyped-def]
    proposal, written, before, after = _derive(club, "join.drop_on_key", dropped)
    # a payment that agrees with a real one on every key but the dropped one: the mutant fans out
    assert proposal.row.seed == "ledger_payments" and proposal.row.values[0][0] == seed_column
    ((seed, values),) = written
    template = club["seeds"]["ledger_payments"].rows[proposal.row.template]
    column = club["seeds"]["ledger_payments"].column(seed_column)
    assert seed == "ledger_payments" and values[column] != template[column]
    assert [v for i, v in enumerate(values) if i not in (0, column)] == [
        v for i, v in enumerate(template) if i not in (0, column)
    ]
    assert (before, after) == (False, True)


def test_left_to_inner_adds_an_unmatched_member_and_an_orphan_payment_that_never_match(club) -> None:  # type: ignore[no-untyped-def]
    proposal, written, before, after = _derive(club, "join.left_to_inner", "left join")
    assert proposal.row.seed == "ledger_members" and [r.seed for r in proposal.extra] == ["ledger_payments"]
    member = next(v for s, v in written if s == "ledger_members")
    payment = next(v for s, v in written if s == "ledger_payments")
    assert member[0] not in {"1", "2", "3", "4"} and payment[1] not in {"1", "2", "3", "4", member[0]}
    assert (before, after) == (False, True)


@pytest.mark.parametrize(
    "operator, removed, seed_column",
    [("null.count_column_to_star", "member_id", "member_ref"), ("null.count_star_to_column", "*", "region")],
)
def test_a_swapped_count_is_seen_on_a_clone_whose_traced_counted_column_is_null(
    club, operator: str, removed: str, seed_column: str
) -> None:  # type: ignore[no-untyped-def]
    proposal, written, before, after = _derive(club, operator, removed, ACTIVITY)
    # the counted column is computed in staging (cast(member_ref as integer), lower(region)): the NULL is
    # set in the seed column; the twin of the same payment makes the count(distinct ...) wrong repair
    # differ from the mutant
    assert proposal.row.seed == "ledger_payments" and proposal.row.values == ((seed_column, ""),)
    assert proposal.extra == (type(proposal.row)("ledger_payments", proposal.row.template, ()),)
    seed = club["seeds"]["ledger_payments"]
    null, twin = (values for _, values in written)
    template = seed.rows[proposal.row.template]
    assert null[seed.column(seed_column)] == "" and twin[1:] == template[1:]
    assert len({null[0], twin[0], *(r[0] for r in seed.rows)}) == len(seed.rows) + 2  # fresh payment ids
    assert (before, after) == (False, True)


def test_a_default_dropped_inside_a_grouped_sum_is_seen_on_a_null_row_in_a_group_of_its_own(club) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import FRESH

    proposal, written, before, after = _derive(club, "null.drop_coalesce_default", "coalesce(amount, 0)", ACTIVITY)
    # sum() skips a NULL amount in a region that has others: the row also gets a region no payment has
    assert proposal.row.seed == "ledger_payments"
    assert proposal.row.values == (("amount", ""), ("region", FRESH))
    seed = club["seeds"]["ledger_payments"]
    ((_, values),) = written
    assert values[seed.column("amount")] == "" and values[seed.column("region")] not in {r[2] for r in seed.rows}
    assert (before, after) == (False, True)


def test_fresh_dates_are_written_like_the_column_and_precede_every_row() -> None:
    from dbt_harvest.harvester.augment.derive import _fresh

    assert _fresh(["2024-03-02", "2024-03-01", ""], set()) == "2024-02-29"
    assert _fresh(["2024-03-02 10:00:00"], {"2024-03-01 00:00:00"}) == "2024-02-29 00:00:00"
    assert _fresh(["7", "", "9"], set()) == "10" and _fresh(["north"], set()) == "north_h1"


def test_a_count_of_a_constant_column_has_no_proposal() -> None:
    from dbt_harvest.harvester.augment.derive import NoProposal, propose

    sql = 'select source_relation, count(*) as n from "db"."main"."stg_members" group by 1'
    with pytest.raises(NoProposal, match="traces to no seed column"):
        propose(
            "k",
            "null",
            "null.count_star_to_column",
            "*",
            "source_relation",
            sql,
            sql.replace("count(*)", "count(source_relation)"),
            (),
            frozenset(),
            lambda *a: None,
            0,
            _lineage(),
        )


def test_one_augmentation_of_all_derived_rows_keeps_the_original_project_healthy(club) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import render
    from dbt_harvest.harvester.augment.run import augmented_pin

    rows = []
    for operator, removed, model in [
        ("null.drop_coalesce_default", "members.bonus_points", MART),
        ("null.drop_coalesce_default", "paid.total_paid", MART),
        ("join.drop_on_key", "members.region = paid.region", MART),
        ("join.left_to_inner", "left join", MART),
        ("null.count_column_to_star", "member_id", ACTIVITY),
        ("null.count_star_to_column", "*", ACTIVITY),
        ("null.drop_coalesce_default", "coalesce(amount, 0)", ACTIVITY),
    ]:
        proposal, _, _, _ = _derive(club, operator, removed, model)
        rows += proposal.rows
    patch, written = render(club["seeds"], rows)
    with club["env"]():
        pin = augmented_pin(club["pin"], patch, len(written))  # raises AugmentRejected if a dbt test fails
    # the unmatched member serves both the NULL of the joined side and the inner join, and both counts
    # share the twin of one payment: each added once
    assert len(rows) == 10 and len(written) == 8
    assert pin.augments == club["pin"].id and pin.augmentation_sha256


# --- the pure part -------------------------------------------------------------------------------------------


def _lineage():  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.trace import Lineage

    staging = (
        "select cast(id as integer) as member_id, coalesce(nm, '') as member_name, bonus * 2 as points, "
        '\'x\' as source_relation from "db"."raw"."members"'
    )
    return Lineage(
        models={"db.main.stg_members": staging},
        columns={
            "db.raw.members": ("id", "nm", "bonus"),
            "db.main.stg_members": ("member_id", "member_name", "points", "source_relation"),
        },
        seeds={"db.raw.members": "members"},
    )


def test_trace_follows_renames_casts_coalesce_and_expressions_to_the_seed_column() -> None:
    from dbt_harvest.harvester.augment.trace import trace

    sql = (
        'with m as (select * from "db"."main"."stg_members"), t as (select m.member_id as who, '
        "m.points + 1 as score, m.source_relation from m) select * from t"
    )
    lin = _lineage()
    assert trace(sql, "t", "who", lin) == (("members", "id"),)
    assert trace(sql, "t", "score", lin) == (("members", "bonus"),)
    assert trace(sql, "m", "member_name", lin) == (("members", "nm"),)
    assert trace(sql, "t", "source_relation", lin) == ()  # a constant: no seed row can change it


def test_a_dropped_constant_key_has_no_proposal() -> None:
    from dbt_harvest.harvester.augment.derive import NoProposal, SeedTable, propose

    sql = (
        'with m as (select * from "db"."main"."stg_members"), o as (select * from "db"."main"."stg_members") '
        "select m.member_id from m left join o on m.member_id = o.member_id and m.source_relation = o.source_relation"
    )
    mutated = sql.replace(" and m.source_relation = o.source_relation", "")
    seeds = (SeedTable.parse("members", "seeds/members.csv", "id,nm,bonus\n1,a,2\n"),)
    with pytest.raises(NoProposal, match="constant"):
        propose(
            "k",
            "join",
            "join.drop_on_key",
            " and m.source_relation = o.source_relation",
            "",
            sql,
            mutated,
            seeds,
            frozenset(),
            lambda *a: None,
            0,
            _lineage(),
        )
    mutated = sql.replace("m.member_id = o.member_id and ", "")
    got = propose(
        "k",
        "join",
        "join.drop_on_key",
        "m.member_id = o.member_id and ",
        "",
        sql,
        mutated,
        seeds,
        frozenset(),
        lambda *a: None,
        0,
        _lineage(),
    )
    assert got.row.seed == "members" and got.row.values[0][0] == "id"


def test_fresh_values_never_repeat_across_the_rows_of_one_patch() -> None:
    from dbt_harvest.harvester.augment.derive import FRESH, SeedRow, SeedTable, render

    left = SeedTable.parse("orders", "seeds/orders.csv", "order_id,customer_id\n1,7\n2,8\n")
    right = SeedTable.parse("customers", "seeds/customers.csv", "customer_id,name\n7,Ann\n8,Bo\n")
    _, written = render(
        {"orders": left, "customers": right},
        [SeedRow("orders", 0, (("customer_id", FRESH),)), SeedRow("customers", 0, ())],
    )
    # both sides would pick 9 for a fresh customer id: the orphans must not match each other
    assert written == (("orders", ("3", "9")), ("customers", ("10", "Ann")))


def test_a_column_computed_from_several_seed_columns_traces_in_the_same_order_under_any_string_hashing() -> None:
    """sqlglot's lineage meets a column's sources in an order that follows Python's string hashing; the
    first traced pair is the one a proposal clones, so a rebuild of the corpus (another process, another
    ``PYTHONHASHSEED``) must get the same order: the pairs come sorted. Eight interpreters, eight seeds."""
    import subprocess
    import sys

    code = (
        "from dbt_harvest.harvester.augment.trace import Lineage, trace\n"
        'staging = \'select coalesce(zone, nm, alias, bonus, id) as who from "db"."raw"."members"\'\n'
        "lin = Lineage(models={'db.main.stg': staging},"
        " columns={'db.raw.members': ('id', 'nm', 'bonus', 'alias', 'zone'), 'db.main.stg': ('who',)},"
        " seeds={'db.raw.members': 'members'})\n"
        "print(trace('select s.who from \"db\".\"main\".\"stg\" s', 's', 'who', lin))\n"
    )
    seen = set()
    for seed in range(8):
        run = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        )
        assert run.returncode == 0, run.stderr[-2000:]
        seen.add(run.stdout.strip())
    expected = tuple(sorted(("members", c) for c in ("zone", "nm", "alias", "bonus", "id")))
    assert seen == {repr(expected)}


def test_a_traced_time_proposal_also_adds_a_row_both_comparisons_reject() -> None:
    from dbt_harvest.harvester.augment.derive import SeedTable, propose
    from dbt_harvest.harvester.augment.run import time_probe
    from dbt_harvest.harvester.augment.trace import Lineage

    lin = Lineage(
        models={"db.main.stg_visits": 'select cast(seen as date) as visited_on from "db"."raw"."visits"'},
        columns={"db.raw.visits": ("visit_id", "seen"), "db.main.stg_visits": ("visited_on",)},
        seeds={"db.raw.visits": "visits"},
    )
    seeds = (SeedTable.parse("visits", "seeds/visits.csv", "visit_id,seen\n1,2024-05-30\n"),)
    sql = 'select * from "db"."main"."stg_visits" v where v.visited_on >= current_date - interval 30 day'
    got = propose(
        "k",
        "time",
        "time.boundary",
        ">=",
        ">",
        sql,
        sql.replace(">=", ">"),
        seeds,
        frozenset(),
        time_probe("2024-05-31 00:00:00"),
        0,
        lin,
    )
    # on the bound (kept by >= only), and the day before it (kept by neither: only removing the bound,
    # the operator's wrong repair, keeps it)
    assert [r.values for r in got.rows] == [(("seen", "2024-05-01"),), (("seen", "2024-04-30"),)]


def test_swapped_timestamp_columns_are_seen_on_a_twin_whose_timestamps_differ() -> None:
    from dbt_harvest.harvester.augment.derive import SeedTable, propose, render
    from dbt_harvest.harvester.augment.trace import Lineage

    # every bill was created, due and paid at the same moment: reading one for another changes nothing
    seed = SeedTable.parse(
        "bills", "seeds/bills.csv", "id,created,due,paid,amount\n1,2021-03-08 6:58:07,2021-03-08 6:58:07,2021-03-08,5\n"
    )
    lin = Lineage(
        models={
            "db.main.stg_bills": "select id, cast(created as timestamp) as created_at, "
            'cast(due as timestamp) as due_at from "db"."raw"."bills"'
        },
        columns={
            "db.raw.bills": ("id", "created", "due", "paid", "amount"),
            "db.main.stg_bills": ("id", "created_at", "due_at"),
        },
        seeds={"db.raw.bills": "bills"},
    )
    sql = 'select g.id, g.created_at, g.due_at from "db"."main"."stg_bills" g'
    got = propose(
        "k",
        "time",
        "time.swap_timestamp_columns",
        "g.due_at",
        "created_at as due_at",
        sql,
        sql.replace("g.due_at", "created_at as due_at"),
        (seed,),
        frozenset(),
        lambda *a: None,
        0,
        lin,
    )
    assert got.row.values == (("due", "2021-03-10 00:00:00"),)  # due moved on, written like its column
    _, written = render({"bills": seed}, list(got.rows))
    # the extra twin has every timestamp apart (a wrong repair reading `paid` differs from the mutant too)
    assert written[1][1] == ("3", "2021-03-09 00:00:00", "2021-03-10 00:00:00", "2021-03-11", "5")

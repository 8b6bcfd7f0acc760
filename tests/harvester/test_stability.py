"""Stable gold (harvester.mint.stability) and the facts read from gold (harvester.mint.facts), on DuckDB
databases written here: real DuckDB, the screening engine's locked-down connection, no dbt."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from dbt_harvest.core.pin import Column, TableRecord
from dbt_harvest.harvester.mint.facts import examples_of, facts_of, grain_of, read_file_table
from dbt_harvest.harvester.mint.lineage import ModelNode
from dbt_harvest.harvester.mint.stability import Rebuilder, Stability, input_relations, stable_tables

SCORES = '"build"."main"."scores"'


def _database(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE main.scores AS SELECT i AS player_id, (i % 4) * 10 AS points, 'team ' || (i % 3) AS team "
        "FROM range(40) t(i)"
    )
    con.close()
    return path


def _node(name: str, sql: str) -> ModelNode:
    return ModelNode(
        f"model.x.{name}", name, f"models/{name}.sql", f'"build"."main"."{name}"', "main", name, "table", "sql", "",
        sql, "", {}, ("model.x.scores",), table=f"main.{name}",
    )  # fmt: skip


def _check(tmp_path: Path, name: str, sql: str) -> Stability:
    db = _database(tmp_path / "build.duckdb")
    node = _node(name, sql)
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE main.{name} AS {sql.replace(SCORES, 'main.scores')}")
    con.close()
    rebuilder = Rebuilder(db, "build", tmp_path / "scratch")
    try:
        return rebuilder.check(node, [SCORES, node.relation], "2024-01-01 00:00:00")
    finally:
        rebuilder.close()


@pytest.mark.parametrize(
    ("sql", "moved"),
    [
        # a rank over tied points: its multiset is 1..40 either way, but which player holds which rank moves
        (f"SELECT player_id, points, row_number() OVER (ORDER BY points DESC) AS pos FROM {SCORES}", ("pos",)),
        # a total order: nothing moves
        (f"SELECT player_id, row_number() OVER (ORDER BY points DESC, player_id) AS pos FROM {SCORES}", ()),
        # dense_rank over the tied value itself is determined by it
        (f"SELECT player_id, dense_rank() OVER (ORDER BY points DESC) AS tier FROM {SCORES}", ()),
        # string_agg without an order: the text moves
        (f"SELECT team, string_agg(player_id::VARCHAR, ',') AS roster FROM {SCORES} GROUP BY team", ("roster",)),
        # the first row per team without a total order
        (
            f"SELECT team, first(player_id) AS captain, count(*) AS members FROM {SCORES} GROUP BY team",
            ("captain",),
        ),
    ],
)
def test_the_perturbed_rebuilds_move_exactly_the_order_dependent_columns(
    tmp_path: Path, sql: str, moved: tuple[str, ...]
) -> None:
    result = _check(tmp_path, "ranked", sql)
    assert result.checked and result.unstable == moved, result
    assert bool(result.moved_under) == bool(moved)


def test_a_model_the_engine_cannot_rebuild_is_not_checked_and_its_table_is_not_graded(tmp_path: Path) -> None:
    broken = _check(tmp_path, "ranked", f"SELECT player_id FROM {SCORES}")
    assert broken.checked
    db = tmp_path / "other.duckdb"
    _database(db)
    node = _node("ghost", f"SELECT no_such_column FROM {SCORES}")
    rebuilder = Rebuilder(db, "build", tmp_path / "scratch2")
    try:
        result = rebuilder.check(node, [SCORES], "2024-01-01 00:00:00")
    finally:
        rebuilder.close()
    assert not result.checked and "could not be rebuilt" in result.error
    python = ModelNode("model.x.py", "py", "models/py.py", '"build"."main"."py"', "main", "py", "table", "python",
                       "", "", "", {}, (), table="main.py")  # fmt: skip
    assert "python model" in Rebuilder(db, "build", tmp_path / "s3").check(python, [], "").error


def test_stable_tables_add_moved_columns_and_make_an_unchecked_table_ungradable() -> None:
    cols = (Column("player_id", "INTEGER"), Column("pos", "BIGINT"))
    tables = (
        TableRecord("main.ranked", 40, "f", True, False, cols, unstable_columns=()),
        TableRecord("main.ghost", 40, "f", True, False, cols),
        TableRecord("main.calm", 40, "f", True, False, cols),
    )
    found = stable_tables(
        tables, [Stability("main.ranked", ("pos",)), Stability("main.ghost", error="x"), Stability("main.calm")]
    )
    by_name = {t.name: t for t in found}
    assert by_name["main.ranked"].stable_positions == (0,) and by_name["main.ranked"].gradable
    assert not by_name["main.ghost"].gradable
    assert by_name["main.calm"] == tables[2]


def test_input_relations_are_the_relations_the_sql_names_longest_first() -> None:
    sql = 'select * from "build"."main"."orders" join "build"."main"."orders_v2" using (id)'
    found = input_relations(sql, ['"build"."main"."orders"', '"build"."main"."orders_v2"', '"build"."main"."x"'])
    assert found == ('"build"."main"."orders_v2"', '"build"."main"."orders"')


def test_facts_read_from_a_table_name_its_grain_types_nulls_and_boundary_rows(tmp_path: Path) -> None:
    db = tmp_path / "gold.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE main.guides AS SELECT * FROM (VALUES "
        "(1, 'Ana Ruiz', 2, 120.0), (2, 'Bram Olsen', 3, 135.5), (3, 'Chiara Conti', 0, NULL), "
        "(4, 'Dev Patel', 1, 75.0), (5, 'Emeka Obi', 2, 60.0), (6, 'Fumiko Sato', 4, 250.0)) "
        "AS t(guide_id, full_name, bookings, revenue)"
    )
    con.close()
    gold = read_file_table(db, "guides")
    assert gold is not None and read_file_table(db, "absent") is None
    facts = facts_of(gold, "guides", "guides", ["guide_id", "full_name", "bookings", "revenue"])
    assert facts.rows == 6 and facts.grain == ("guide_id",)
    assert [(c.type, c.nulls) for c in facts.columns] == [
        ("integer", False),
        ("text", False),
        ("integer", False),
        ("number", True),
    ]
    # the null and the zero are the same guide (no bookings, no revenue); the busiest and the quietest
    examples = set(facts.examples)
    assert ("3", "Chiara Conti", "0", None) in examples and ("6", "Fumiko Sato", "4", "250") in examples
    assert len(facts.examples) <= 6


def test_the_grain_is_the_smallest_unique_combination_and_none_when_nothing_is_unique() -> None:
    rows = [(1, "a", 1), (1, "b", 2), (2, "a", 3)]
    assert grain_of(rows, range(3), ["x", "y", "z"]) == ("z",)
    assert grain_of([(1, "a"), (1, "b"), (2, "a")], range(2), ["x", "y"]) == ("x", "y")
    assert grain_of([(1, "a"), (1, "a")], range(2), ["x", "y"]) == ()
    assert grain_of([(None, "a"), (1, "b")], range(1), ["x"]) == ()  # a null is no key
    assert examples_of([], []) == ()


def test_order_sensitive_aggregates_without_an_order_are_found_in_the_sql() -> None:
    from dbt_harvest.harvester.mint.stability import order_sensitive_aliases

    sql = """
    select team,
        string_agg(name, ', ') as roster,
        string_agg(name, ', ' order by name) as sorted_roster,
        list(player_id) filter (where points > 0) as scorers,
        array_agg(distinct coalesce(nick, name)) AS "Nicks",
        first(player_id) over (partition by team order by points) as leader,
        count(*) as members
    from scores group by team
    """
    assert order_sensitive_aliases(sql) == frozenset({"roster", "scorers", "nicks"})
    assert order_sensitive_aliases("select listagg(x) within group (order by x) as xs from t") == frozenset()


def test_a_column_named_after_an_unordered_aggregate_upstream_is_unstable_even_when_no_rebuild_moves_it(
    tmp_path: Path,
) -> None:
    """One player per team: string_agg cannot move here, but the rule it follows can; the name reaches the
    model from an upstream model's SQL."""
    from dbt_harvest.harvester.mint.stability import lineage_sql

    db = tmp_path / "build.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE main.scores AS SELECT i AS player_id, 'p' || i AS name FROM range(5) t(i)")
    con.execute(
        "CREATE TABLE main.rosters AS SELECT player_id AS team, string_agg(name, ', ') AS roster FROM main.scores GROUP BY 1"
    )
    con.execute("CREATE TABLE main.board AS SELECT team, roster FROM main.rosters")
    con.close()
    upstream = _node("rosters", f"select player_id as team, string_agg(name, ', ') as roster from {SCORES} group by 1")
    board = ModelNode(
        "model.x.board", "board", "models/board.sql", '"build"."main"."board"', "main", "board", "table", "sql", "",
        'select team, roster from "build"."main"."rosters"', "", {}, ("model.x.rosters",), table="main.board",
    )  # fmt: skip
    nodes = {"model.x.rosters": upstream, "model.x.board": board}
    rebuilder = Rebuilder(db, "build", tmp_path / "scratch")
    try:
        alone = rebuilder.check(board, [SCORES, '"build"."main"."rosters"'], "2024-01-01 00:00:00")
        with_lineage = rebuilder.check(
            board, [SCORES, '"build"."main"."rosters"'], "2024-01-01 00:00:00", lineage_sql(nodes, "model.x.board")
        )
    finally:
        rebuilder.close()
    assert alone.unstable == ()
    assert with_lineage.unstable == ("roster",) and with_lineage.moved_under.startswith("an order-sensitive")


def test_a_column_that_reads_the_clock_through_a_view_is_stable(tmp_path: Path) -> None:
    """A staging view that reads the clock is evaluated at today's date when the built database is read; the
    rebuilds freeze the pin's clock. Compared with the built relation, the clock column would move in every
    rebuild; compared with the unperturbed rebuild, nothing moves (rafarngt's `days_since_registration`)."""
    db = _database(tmp_path / "build.duckdb")
    ages = "SELECT player_id, current_date - DATE '2023-01-01' AS days FROM {scores}"
    mart = 'SELECT a.player_id, a.days * 2 AS doubled FROM "build"."main"."ages" AS a'
    con = duckdb.connect(str(db))
    con.execute("CREATE VIEW main.ages AS " + ages.format(scores="main.scores"))
    con.execute("CREATE TABLE main.doubled AS " + mart.replace('"build"."main"."ages"', "main.ages"))
    con.close()
    rebuilder = Rebuilder(db, "build", tmp_path / "scratch")
    try:
        view = rebuilder.check(
            _node("ages", ages.format(scores=SCORES)), [SCORES, '"build"."main"."ages"'], "2024-01-01 00:00:00"
        )
        table = rebuilder.check(
            _node("doubled", mart), [SCORES, '"build"."main"."ages"', '"build"."main"."doubled"'], "2024-01-01 00:00:00"
        )
    finally:
        rebuilder.close()
    assert view == Stability("main.ages") and table == Stability("main.doubled")

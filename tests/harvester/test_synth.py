"""Synthesized source data (issue 60, `harvest add --synthesize-data`, ``harvester/synth``).

The pure parts first (what the SQL says about each source column, the contract, the rows drawn from it),
then the original ``courier_routes`` fixture, which ships no data at all, end to end: pinned through the CLI
with real sandboxed dbt-duckdb builds, minted for every kind, verified fresh, rebuilt in a second home, and
put in a dataset. Refusals (no sources, a test no data can satisfy) end in one line and exit 1.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.harvester.gitrepos import make_git_repo
from dbt_harvest.harvester.synth.contract import Contract, SynthColumn, SynthTable, derive
from dbt_harvest.harvester.synth.generate import ORPHANS, generate
from dbt_harvest.harvester.synth.usage import ColumnRef, Literal, analyse
from tests.cli_home import error_lines, run_cli
from tests.fixtures import fixture_dir

ORDERS, CUSTOMERS = "_synth__shop__orders", "_synth__shop__customers"
MODELS = {
    "stg_orders": f'with src as (select * from "build"."main"."{ORDERS}") '
    "select id as order_id, customer_id, cast(ordered_at as date) as order_date, lower(status) as status, "
    "amount / 100.0 as amount from src",
    "stg_customers": f"select id as customer_id, name, coalesce(tier, 'basic') as tier "
    f'from "build"."main"."{CUSTOMERS}" where not is_deleted',
    "fct": "select c.customer_id, count(*) as n from stg_customers c left join stg_orders o "
    "on o.customer_id = c.customer_id where o.status in ('shipped', 'done') and o.order_date >= '2024-01-01' "
    "group by 1",
}


def test_usage_follows_columns_through_ctes_renames_and_models() -> None:
    use = analyse(MODELS, [ORDERS, CUSTOMERS])
    status, ordered = ColumnRef(ORDERS, "status"), ColumnRef(ORDERS, "ordered_at")
    # `o.status in (...)` in the mart is a literal of the source column behind stg_orders' lower(status)
    assert {lit.value for lit in use.literals[status]} == {"shipped", "done"}
    assert use.literals[ordered] == (Literal(">=", "2024-01-01", "string"),)
    assert "date" in use.types[ordered]
    assert use.types[ColumnRef(CUSTOMERS, "is_deleted")] == ("boolean",)
    assert ColumnRef(CUSTOMERS, "tier") in use.null_handled
    # the join pairs the renamed key (stg_customers.customer_id is the source's id) with the orders' column
    (join,) = use.joins
    assert {join.left, join.right} == {ColumnRef(CUSTOMERS, "id"), ColumnRef(ORDERS, "customer_id")}
    assert join.outer


def _test_node(name: str, uid: str, depends: str, **kwargs: object) -> dict:
    """A generic test's node as the manifest holds it, as much of it as the contract reads."""
    return {
        "unique_id": uid,
        "resource_type": "test",
        "depends_on": {"nodes": [depends]},
        "test_metadata": {"name": name, "kwargs": kwargs},
    }


def _manifest() -> dict:
    """A parsed manifest's shape, as much of it as the contract reads."""

    def source(table: str, columns: dict) -> dict:
        uid = f"source.shop.shop.{table}"
        return {"unique_id": uid, "source_name": "shop", "name": table, "columns": columns}

    models = {
        f"model.shop.{name}": {"resource_type": "model", "name": name, "alias": name, "compiled_code": sql}
        for name, sql in MODELS.items()
    }
    tests = [
        _test_node("unique", "test.shop.u1", "source.shop.shop.customers", column_name="id"),
        _test_node(
            "accepted_values",
            "test.shop.a1",
            "source.shop.shop.orders",
            column_name="status",
            values=["shipped", "done", "lost"],
        ),
        _test_node("not_null", "test.shop.n1", "source.shop.shop.orders", column_name="amount"),
    ]
    return {
        "sources": {
            "source.shop.shop.orders": source("orders", {"amount": {"data_type": "numeric(10,2)"}}),
            "source.shop.shop.customers": source("customers", {"id": {}, "name": {}}),
        },
        "nodes": {**models, **{t["unique_id"]: t for t in tests}},
    }


def test_the_contract_joins_yaml_tests_and_sql() -> None:
    contract = derive(_manifest())
    orders, customers = contract.table(ORDERS), contract.table(CUSTOMERS)
    assert orders is not None and customers is not None
    amount, status, customer_id = orders.column("amount"), orders.column("status"), orders.column("customer_id")
    assert amount is not None and amount.type == "numeric" and amount.not_null  # the YAML's data_type wins
    assert status is not None and status.values == ("shipped", "done", "lost")
    key = customers.column("id")
    assert key is not None and key.unique
    # the key the join reads: drawn from the unique side, orphans allowed (no relationships test forbids them)
    assert customer_id is not None and customer_id.parent == ColumnRef(CUSTOMERS, "id") and customer_id.orphans
    assert customer_id.type == key.type == "integer"


def test_test_arguments_nested_under_arguments_are_read() -> None:
    """dbt 1.10's ``accepted_values: {arguments: {values: [...]}}`` keeps the values nested in the manifest's
    kwargs; they were read as no values, and a real project's accepted_values tests failed on drawn text."""
    manifest = _manifest()
    test = manifest["nodes"]["test.shop.a1"]["test_metadata"]
    test["kwargs"] = {"column_name": "status", "arguments": {"values": ["shipped", "done", "lost"]}}
    status = (derive(manifest).table(ORDERS) or SynthTable("", "", "", ())).column("status")
    assert status is not None and status.values == ("shipped", "done", "lost")


def test_rows_exercise_both_sides_of_every_rule() -> None:
    contract = derive(_manifest())
    tables = {t.relation: t for t in generate(contract, seed=3)}
    orders, customers = tables[ORDERS], tables[CUSTOMERS]
    col = {name: [row[i] for row in orders.rows] for i, name in enumerate(orders.columns)}
    ccol = {name: [row[i] for row in customers.rows] for i, name in enumerate(customers.columns)}
    # accepted values: every one present and nothing else; the filter's literals are among them
    assert set(col["status"]) == {"shipped", "done", "lost"}
    # the date filter's boundary and both its neighbours
    assert {"2024-01-01", "2023-12-31", "2024-01-02"} <= set(col["ordered_at"])
    assert None not in col["amount"]  # not_null
    assert len(set(ccol["id"])) == len(ccol["id"])  # unique
    assert None in ccol["tier"]  # the SQL coalesces it
    parents = set(ccol["id"])
    orphans = [v for v in col["customer_id"] if v not in parents]
    assert len(orphans) == ORPHANS
    # some customers have no order: a left join keeps them, an inner join drops them
    assert parents - set(col["customer_id"])


def test_rows_are_deterministic_per_seed() -> None:
    contract = derive(_manifest())
    assert generate(contract, seed=3) == generate(contract, seed=3)
    assert generate(contract, seed=3) != generate(contract, seed=4)


def test_a_relationships_child_never_gets_an_orphan() -> None:
    parent = SynthTable("_synth__a__p", "a", "p", (SynthColumn("id", "integer", unique=True),))
    child = SynthTable(
        "_synth__a__c",
        "a",
        "c",
        (SynthColumn("pid", "integer", parent=ColumnRef("_synth__a__p", "id"), orphans=False),),
    )
    rows = {t.relation: t for t in generate(Contract((parent, child)), seed=1)}
    ids = {r[0] for r in rows["_synth__a__p"].rows}
    assert {r[0] for r in rows["_synth__a__c"].rows} <= ids


# ------------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def couriers(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """courier_routes (no data) pinned with --synthesize-data through the CLI and minted for both kinds."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.core.pin import read_pin
    from dbt_harvest.corpora.ledger import Params, assign
    from dbt_harvest.corpora.store import load_tasks, mint_target
    from dbt_harvest.harvester.mint.pipeline import MintOptions, load_reports, mint
    from tests.conftest import use_env

    root = tmp_path_factory.mktemp("couriers")
    repo = make_git_repo(fixture_dir("courier_routes"), root / "repo")
    code, out, err = run_cli(
        root, "add", f"{repo.path}@{repo.head}", "--synthesize-data", "--synth-seed", "7", "--json"
    )
    assert code == 0, err
    added = json.loads(out)
    home, pins = root / "home", root / "pins"
    with use_env(home, pins):
        pin = read_pin(Path(added["pin"]))
        assign(pins, Params(test=0, dev=0, seed=0))
        mint([pin], MintOptions(kinds=("repair", "completion")), mint_target(harvest_home(), pins_dir()))
        reports = load_reports(pin.id)
        tasks = load_tasks("train", home, pins, purpose="inspect")
    return SimpleNamespace(
        root=root, repo=repo, added=added, pin=pin, reports=reports, tasks=tasks, home=home, pins=pins
    )


slow = pytest.mark.slow


@slow
def test_a_project_without_data_is_pinned_on_synthesized_data(couriers: SimpleNamespace) -> None:
    from dbt_harvest.core.patching import parse_patch
    from dbt_harvest.harvester.workspace import synthesis_text

    pin = couriers.pin
    assert couriers.added["data_origin"] == "synthesized" and pin.data_origin == "synthesized"
    assert pin.synthesis_seed == 7
    # the project's own tests all pass on it (none is a known failure), and every mart is gradable and non-empty
    assert pin.baseline_tests == ()
    marts = {t.name: t for t in pin.tables}
    for name in ("main.courier_performance", "main.zone_revenue", "main.zone_coverage"):
        assert marts[name].gradable and marts[name].rows > 0
    # the patch only adds files, under harvest's own names; the project's SQL and YAML are untouched
    files = parse_patch(synthesis_text(pin, couriers.pins))
    assert files and all(p.created and "_harvest_synth" in p.path for p in files)
    code, out, _ = run_cli(couriers.root, "show", pin.id)
    assert code == 0 and "data synthesized" in out


@slow
def test_every_mutation_family_yields_a_task_on_synthesized_data(couriers: SimpleNamespace) -> None:
    kept = Counter(t.family for t in couriers.tasks)
    for family in ("filter", "join", "null", "grain", "time", "values", "completion"):
        assert kept[family] >= 1, (family, kept)
    assert {t.origin for t in couriers.tasks} == {"synthesized"}
    assert all(t.data_origin == "synthesized" for t in couriers.tasks)


@slow
def test_a_rebuild_in_another_home_derives_the_same_data(couriers: SimpleNamespace, tmp_path: Path) -> None:
    pins = tmp_path / "pins"
    shutil.copytree(couriers.pins, pins)
    shutil.rmtree(pins / "patches" / "synthesized")  # never committed: a fresh clone has none
    before = {p.name: p.read_bytes() for p in pins.glob("*.toml")}
    env = {"HARVEST_HOME": str(tmp_path / "home"), "HARVEST_PINS": str(pins)}
    result = CliRunner().invoke(
        main, ["add", f"{couriers.repo.path}@{couriers.repo.head}", "--rebuild", "--json"], env=env
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["drift"] == []
    assert {p.name: p.read_bytes() for p in pins.glob("*.toml")} == before
    assert (pins / "patches" / "synthesized" / f"{couriers.pin.synthesis_sha256}.diff").is_file()


@slow
def test_a_synthesized_task_verifies_fresh(couriers: SimpleNamespace) -> None:
    join = next(t for t in couriers.tasks if t.family == "join")
    shutil.rmtree(couriers.home / "templates", ignore_errors=True)
    code, out, err = run_cli(couriers.root, "tasks", "verify", join.instance_id, "--json")
    assert code == 0, err
    (task,) = json.loads(out)["tasks"]
    assert task["ok"] and task["checks"]["claims"]["ok"] and task["checks"]["wrong_repair"]["ok"]


@slow
def test_the_dataset_says_each_rows_data_origin(
    couriers: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    from dbt_harvest.corpora.build import build_dataset
    from dbt_harvest.corpora.errors import DatasetBuildError

    out = tmp_path / "ds"
    build_dataset(out, home=couriers.home, pins=couriers.pins, splits=("train",), public=False)
    rows = datasets.load_dataset("parquet", data_files=str(out / "data" / "train-*.parquet"), split="train")
    assert set(rows["data_origin"]) == {"synthesized"}
    assert all(r["synthesis_patch"] and r["synthesis_patch_sha256"] == couriers.pin.synthesis_sha256 for r in rows)
    card = (out / "README.md").read_text()
    assert f"train {len(couriers.tasks)} synthesized" in card
    # a row rebuilds on an empty home from the dataset alone (its synthesis_patch applied), into a relative OUT
    mirror = tmp_path / "mirror" / "local" / "courier_routes"
    shutil.copytree(couriers.repo.path, mirror)
    empty = {"HARVEST_HOME": str(tmp_path / "empty-home"), "HARVEST_PINS": str(tmp_path / "empty-pins")}
    args = [
        "tasks",
        "materialize",
        str(out),
        rows[0]["instance_id"],
        "task",
        "--repo-mirror",
        str(mirror.parent.parent),
    ]
    with monkeypatch.context() as m:
        m.chdir(tmp_path)
        done = CliRunner().invoke(main, args, env=empty)
    assert done.exit_code == 0, done.stderr
    seeds = tmp_path / "task" / "project" / "seeds" / "_harvest_synth"
    assert sorted(p.name for p in seeds.glob("*.csv")) == [
        "_synth__dispatch__couriers.csv",
        "_synth__dispatch__deliveries.csv",
        "_synth__dispatch__zones.csv",
    ]
    with pytest.raises(DatasetBuildError, match="no tasks"):
        build_dataset(
            tmp_path / "ds2",
            home=couriers.home,
            pins=couriers.pins,
            splits=("train",),
            public=False,
            data_origin="repository",
        )


def _variant(tmp: Path, extra: dict[str, str], drop: tuple[str, ...] = ()) -> Path:
    """courier_routes with files added or removed, as a one-commit repository."""
    src = tmp / "src"
    shutil.copytree(fixture_dir("courier_routes"), src)
    for rel in drop:
        (src / rel).unlink()
    for rel, text in extra.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    repo = make_git_repo(src, tmp / "repo")
    return Path(f"{repo.path}@{repo.head}")


@slow
def test_a_test_no_synthesized_data_can_satisfy_is_refused_by_name(tmp_path: Path) -> None:
    spec = _variant(tmp_path, {"tests/assert_no_active_couriers.sql": "select * from {{ ref('stg_couriers') }}\n"})
    code, _, err = run_cli(tmp_path, "add", str(spec), "--synthesize-data")
    assert code == 1
    (line,) = error_lines(err)
    assert "still fail on synthesized data" in line and "assert_no_active_couriers" in line
    assert not list((tmp_path / "pins").glob("*.toml"))  # nothing half-written: no pin


@slow
def test_a_project_without_sources_is_refused(tmp_path: Path) -> None:
    stg = "models/staging/"
    spec = _variant(
        tmp_path,
        {
            f"{stg}stg_couriers.sql": "select 1 as courier_id, 'a' as courier_name, 'bike' as vehicle, true as is_active\n"
        },
        drop=(
            f"{stg}sources.yml",
            f"{stg}stg_deliveries.sql",
            f"{stg}stg_zones.sql",
            "models/marts/zone_revenue.sql",
            "models/marts/zone_coverage.sql",
            "models/marts/courier_performance.sql",
            "models/marts/schema.yml",
        ),
    )
    code, _, err = run_cli(tmp_path, "add", str(spec), "--synthesize-data")
    assert code == 1
    (line,) = error_lines(err)
    assert "declares no sources" in line


def test_synth_seed_without_synthesize_data_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run_cli(tmp_path, "add", "owner/name@" + "a" * 40, "--synth-seed", "3")
    assert code == 2 and "--synthesize-data" in err


def test_repair_tightens_only_what_failed() -> None:
    from dbt_harvest.harvester.synth.contract import Failure, repair

    contract = derive(_manifest())
    name = ColumnRef(CUSTOMERS, "name")
    repaired = repair(contract, [Failure("unique", (name,)), Failure("expression_is_true", (name,))])
    customers = repaired.table(CUSTOMERS)
    assert customers is not None and customers.column("name") == SynthColumn("name", "varchar", unique=True)
    assert repaired.table(ORDERS) == contract.table(ORDERS)
    assert repair(contract, []) == contract


def test_a_case_branch_or_coalesce_default_types_the_column_it_meets() -> None:
    models = {
        "m": "select max(case when a.src = 'organic' then a.visitors else 0 end) as organic, "
        "coalesce(a.signup_at, b.created_at) as first_seen, coalesce(b.score, 0.5) as score "
        f'from "build"."main"."{ORDERS}" as a join "build"."main"."{CUSTOMERS}" as b on a.id = b.id'
    }
    use = analyse(models, [ORDERS, CUSTOMERS])
    assert "integer" in use.types[ColumnRef(ORDERS, "visitors")]
    assert "numeric" in use.types[ColumnRef(CUSTOMERS, "score")]
    assert (ColumnRef(CUSTOMERS, "created_at"), ColumnRef(ORDERS, "signup_at")) in use.alike


def test_a_cast_error_retypes_the_column_it_names() -> None:
    from dbt_harvest.harvester.synth.contract import retype_from_error

    contract = Contract(
        (SynthTable(ORDERS, "shop", "orders", (SynthColumn("ms", "date"), SynthColumn("n", "varchar"))),)
    )
    error = "Conversion Error: Unimplemented type for cast (DATE -> BIGINT) when casting from source column ms"
    retyped = retype_from_error(contract, error).table(ORDERS)
    assert retyped is not None and retyped.column("ms") == SynthColumn("ms", "integer")
    assert retype_from_error(contract, "Binder Error: no column named x") == contract


def test_a_text_operator_refused_on_a_number_makes_the_column_text_that_holds_numbers() -> None:
    """A real Northwind port filters ``supplier_ids not like '%;%'`` and then casts the column to an integer.
    Synthesized as a number (its name), the LIKE failed; as plain text, the cast would. It is retyped to text
    holding numbers, so both read it; every value casts, and a trim refused the same way retypes too."""
    import duckdb

    from dbt_harvest.harvester.synth.contract import retype_from_error

    contract = Contract(
        (SynthTable(ORDERS, "shop", "orders", (SynthColumn("supplier_ids", "integer"), SynthColumn("n", "integer"))),)
    )
    like = (
        "Binder Error: No function matches the given name and argument types '!~~(BIGINT, STRING_LITERAL)'. You "
        "might need to add explicit type casts. Candidate functions: !~~(VARCHAR, VARCHAR) -> BOOLEAN "
        "LINE 28: supplier_ids NOT LIKE '%;%' ^"
    )
    retyped = retype_from_error(contract, like)
    table = retyped.table(ORDERS)
    assert table is not None and table.column("supplier_ids") == SynthColumn(
        "supplier_ids", "varchar", text_of="integer"
    )
    assert table.column("n") == SynthColumn("n", "integer")
    (orders,) = generate(retyped, seed=0)
    values = [row[0] for row in orders.rows if row[0] is not None]
    con = duckdb.connect()
    assert all(con.execute("select cast(? as integer)", [v]).fetchone() for v in values)
    trim = "No function matches the given name and argument types 'trim(BIGINT)'. LINE 3: NULLIF(TRIM(o.n), '')"
    assert (retype_from_error(contract, trim).table(ORDERS) or table).column("n") == SynthColumn(
        "n", "varchar", text_of="integer"
    )
    assert retype_from_error(retyped, like) == retyped  # already text: nothing more to do


def test_a_regular_expression_refused_on_a_date_makes_it_text_holding_dates() -> None:
    """Postgres' ``last_review ~ '^[0-9]{4}-'`` (DuckDB's ``regexp_full_match``) on a column synthesized as a
    DATE was refused; as text holding ISO dates, both the expression and a later cast to a date read it."""
    import duckdb

    from dbt_harvest.harvester.synth.contract import retype_from_error

    contract = Contract((SynthTable(ORDERS, "shop", "orders", (SynthColumn("last_review", "date"),)),))
    error = (
        "Binder Error: No function matches the given name and argument types 'regexp_full_match(DATE, "
        "STRING_LITERAL)'. LINE 12: case when last_review ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' then"
    )
    retyped = retype_from_error(contract, error)
    table = retyped.table(ORDERS)
    assert table is not None and table.column("last_review") == SynthColumn("last_review", "varchar", text_of="date")
    (orders,) = generate(retyped, seed=0)
    con = duckdb.connect()
    values = [row[0] for row in orders.rows if row[0] is not None]
    assert values and all(con.execute("select cast(? as date)", [v]).fetchone() for v in values)


def test_a_number_cast_refusing_a_drawn_text_value_makes_that_column_hold_numbers() -> None:
    """``replace(price, '$', '')::decimal(10,2)`` and a self-join key cast after a staging rename refused the
    text synthesis drew (``price_4``, ``reportsto_2``); the error names no source column, or a renamed one. The
    drawn value names its column: that column is made text holding numbers, and nothing else changes."""
    from dbt_harvest.harvester.synth.contract import retype_from_error

    contract = Contract(
        (
            SynthTable(
                ORDERS,
                "shop",
                "orders",
                (SynthColumn("price", "varchar"), SynthColumn("reportsto", "varchar"), SynthColumn("n", "integer")),
            ),
        )
    )
    replaced = 'Conversion Error: Could not convert string "price_4" to DECIMAL(10,2) LINE 9: REPLACE(REPLACE(price'
    table = retype_from_error(contract, replaced).table(ORDERS)
    assert table is not None and table.column("price") == SynthColumn("price", "varchar", text_of="integer")
    assert table.column("reportsto") == SynthColumn("reportsto", "varchar")
    renamed = (
        "Conversion Error: Could not convert string 'reportsto_2' to INT64 when casting from source column "
        "reports_to_employee_id"
    )
    table = retype_from_error(contract, renamed).table(ORDERS)
    assert table is not None and table.column("reportsto") == SynthColumn("reportsto", "varchar", text_of="integer")
    assert retype_from_error(contract, "Could not convert string 'lost_2' to INT32") == contract


def test_the_model_whose_compile_queries_another_is_named_from_either_error() -> None:
    from dbt_harvest.harvester.synth.run import _querying_model

    runtime = "Runtime Error in model int_session_events__agg (models/marts/int.sql) Catalog Error: Table ..."
    dbt_utils = (
        "dbt: Runtime Error Compilation Error in model fct_session_events (models/marts/product/fct.sql) In "
        'get_column_values(): relation "build"."main"."int_events" does not exist'
    )
    assert _querying_model(runtime) == "int_session_events__agg"
    assert _querying_model(dbt_utils) == "fct_session_events"
    assert _querying_model("Parser Error: syntax error at or near grant") is None


def test_tracing_a_long_chain_of_select_star_models_is_linear() -> None:
    """A `select *` over a join of two `select *` models, 120 deep: each (scope, column) is resolved once.
    Before, every level tried every source again (exponential: 40 models did not finish in a minute; a real
    128-model project ran for 16). Run in a child so that a regression times out instead of hanging."""
    import subprocess
    import sys

    script = (
        "from dbt_harvest.harvester.synth.usage import analyse\n"
        'models = {\'m0\': \'select * from "build"."main"."_synth__s__t"\'}\n'
        "for i in range(1, 120):\n"
        "    models[f'm{i}'] = f'select * from m{i - 1} join m{max(0, i - 2)} using (id) where x{i} > {i}'\n"
        "print(len(analyse(models, ['_synth__s__t']).columns))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 1  # columns traced to the one source (unqualified ones over a join are not)


# ------------------------------------------------------------------------------- range and length tests


def _bounded_manifest() -> dict:
    """_manifest() with the range and length tests real projects carry: dbt_utils' accepted_range (one
    exclusive), dbt_expectations' between, length and in-set tests, and a between bound written as SQL."""
    manifest = _manifest()

    orders, customers = "source.shop.shop.orders", "source.shop.shop.customers"
    for t in (
        _test_node("accepted_range", "test.shop.r1", orders, column_name="amount", min_value=10, max_value=60),
        _test_node("accepted_range", "test.shop.r2", orders, column_name="id", min_value=1000, inclusive=False),
        _test_node(
            "expect_column_values_to_be_between",
            "test.shop.r3",
            orders,
            column_name="ordered_at",
            min_value="'2023-12-31'",
            max_value="cast('2024-06-30' as date)",
        ),
        _test_node(
            "expect_column_value_lengths_to_be_between", "test.shop.l1", customers, column_name="name", max_value=4
        ),
        _test_node("expect_column_value_lengths_to_equal", "test.shop.l2", customers, column_name="tier", value=6),
        _test_node(
            "expect_column_values_to_be_between", "test.shop.r4", customers, column_name="id", min_value="current_date"
        ),
    ):
        manifest["nodes"][t["unique_id"]] = t
    return manifest


def test_range_and_length_tests_bound_the_contract() -> None:
    from dbt_harvest.harvester.synth.contract import Bounds, bounds_of

    contract = derive(_bounded_manifest())
    orders, customers = contract.table(ORDERS), contract.table(CUSTOMERS)
    assert orders is not None and customers is not None
    assert orders.column("amount").bounds == Bounds("10", "60")  # type: ignore[union-attr]
    assert orders.column("id").bounds == Bounds("1000", None, strict=True)  # type: ignore[union-attr]
    assert orders.column("ordered_at").bounds == Bounds("2023-12-31", "2024-06-30")  # type: ignore[union-attr]
    assert customers.column("name").bounds == Bounds(max_len=4)  # type: ignore[union-attr]
    assert customers.column("tier").bounds == Bounds(min_len=6, max_len=6)  # type: ignore[union-attr]
    # a bound written as SQL the synthesizer cannot evaluate leaves that side open
    assert not customers.column("id").bounds  # type: ignore[union-attr]
    assert bounds_of("unique", {}) == Bounds() and not Bounds()


def test_rows_meet_range_and_length_tests_and_keep_the_filters_in_range_neighbours() -> None:
    contract = derive(_bounded_manifest())
    for seed in (1, 2, 3):
        tables = {t.relation: t for t in generate(contract, seed=seed)}
        orders, customers = tables[ORDERS], tables[CUSTOMERS]
        col = {name: [row[i] for row in orders.rows] for i, name in enumerate(orders.columns)}
        ccol = {name: [row[i] for row in customers.rows] for i, name in enumerate(customers.columns)}
        assert all(10 <= float(v) <= 60 for v in col["amount"] if v is not None)
        assert all(int(v) > 1000 for v in col["id"] if v is not None)
        days = [v for v in col["ordered_at"] if v is not None]
        assert all("2023-12-31" <= d[:10] <= "2024-06-30" for d in days)
        # the filter `order_date >= '2024-01-01'`: its boundary and both neighbours lie in range, so all stay
        assert {"2024-01-01", "2023-12-31", "2024-01-02"} <= {d[:10] for d in days}
        assert all(len(v) <= 4 for v in ccol["name"] if v is not None)
        assert all(len(v) == 6 for v in ccol["tier"] if v is not None)


def test_a_filter_neighbour_outside_a_range_is_never_drawn() -> None:
    from dbt_harvest.harvester.synth.contract import Bounds

    col = SynthColumn("qty", "integer", literals=(Literal(">", "0", "number"),), bounds=Bounds("0", "9"))
    rows = generate(Contract((SynthTable(ORDERS, "shop", "orders", (col,)),)), seed=5)[0].rows
    values = {int(r[0]) for r in rows if r[0] is not None}
    assert {0, 1} <= values and -1 not in values and max(values) <= 9


def test_repair_bounds_a_column_a_range_test_failed_on() -> None:
    from dbt_harvest.harvester.synth.contract import Bounds, Failure, repair

    contract = derive(_manifest())
    name = ColumnRef(CUSTOMERS, "name")
    repaired = repair(
        contract, [Failure("expect_column_value_lengths_to_be_between", (name,), bounds=Bounds(min_len=3, max_len=5))]
    )
    customers = repaired.table(CUSTOMERS)
    assert customers is not None and customers.column("name").bounds == Bounds(min_len=3, max_len=5)  # type: ignore[union-attr]
    assert (
        repair(repaired, [Failure("expect_column_value_lengths_to_be_between", (name,), bounds=Bounds(max_len=5))])
        == repaired
    )


_GENERIC_TESTS = {
    # the project's own generic tests, named and called as dbt_utils' and dbt_expectations' are
    "tests/generic/accepted_range.sql": (
        "{% test accepted_range(model, column_name, min_value=none, max_value=none, inclusive=true) %}\n"
        "select * from {{ model }} where\n"
        "{%- if inclusive %} {{ column_name }} < {{ min_value }} or {{ column_name }} > {{ max_value }}\n"
        "{%- else %} {{ column_name }} <= {{ min_value }} or {{ column_name }} >= {{ max_value }}{% endif %}\n"
        "{% endtest %}\n"
    ),
    "tests/generic/expect_column_value_lengths_to_be_between.sql": (
        "{% test expect_column_value_lengths_to_be_between(model, column_name, min_value, max_value) %}\n"
        "select * from {{ model }}\n"
        "where length({{ column_name }}) < {{ min_value }} or length({{ column_name }}) > {{ max_value }}\n"
        "{% endtest %}\n"
    ),
    "tests/generic/expect_column_values_to_be_between.sql": (
        "{% test expect_column_values_to_be_between(model, column_name, min_value, max_value, strictly=false) %}\n"
        "select * from {{ model }} where not ({{ column_name }} {{ '>' if strictly else '>=' }} {{ min_value }}\n"
        "  and {{ column_name }} {{ '<' if strictly else '<=' }} {{ max_value }})\n"
        "{% endtest %}\n"
    ),
}


@slow
def test_a_project_with_range_and_length_tests_is_pinned_on_data_that_meets_them(tmp_path: Path) -> None:
    """Before range and length tests were read, the synthesized fees (0-500), names (13 characters) and
    hire days (a year from 2024-01-01) failed these tests and `harvest add` refused the project."""
    import csv
    import io

    from dbt_harvest.core.patching import apply_to_text, parse_patch

    sources = (fixture_dir("courier_routes") / "models/staging/sources.yml").read_text()
    sources = (
        sources.replace(
            "          - name: courier_name\n",
            "          - name: courier_name\n"
            "            tests:\n"
            "              - expect_column_value_lengths_to_be_between: {min_value: 3, max_value: 7}\n",
        )
        .replace(
            "          - name: hired_on\n",
            "          - name: hired_on\n"
            "            tests:\n"
            "              - expect_column_values_to_be_between:\n"
            "                  {min_value: \"'2019-01-01'\", max_value: \"'2021-12-31'\", strictly: true}\n",
        )
        .replace(
            "          - name: fee\n",
            "          - name: fee\n"
            "            tests:\n"
            "              - accepted_range: {min_value: 3, max_value: 25, inclusive: false}\n",
        )
    )
    spec = _variant(tmp_path, {**_GENERIC_TESTS, "models/staging/sources.yml": sources})
    code, out, err = run_cli(tmp_path, "add", str(spec), "--synthesize-data", "--synth-seed", "3", "--json")
    assert code == 0, err
    from dbt_harvest.core.pin import read_pin
    from dbt_harvest.harvester.workspace import synthesis_text

    pin = read_pin(Path(json.loads(out)["pin"]))
    assert pin.baseline_tests == ()  # every project test passes on the data, none known to fail
    patch = {p.path.rsplit("/", 1)[-1]: p for p in parse_patch(synthesis_text(pin, tmp_path / "pins"))}
    rows = {
        name: list(csv.DictReader(io.StringIO(apply_to_text("", p))))
        for name, p in patch.items()
        if name.endswith(".csv")
    }
    couriers, deliveries = rows["_synth__dispatch__couriers.csv"], rows["_synth__dispatch__deliveries.csv"]
    assert all(3 <= len(r["courier_name"]) <= 7 for r in couriers if r["courier_name"])
    assert all("2019-01-01" < r["hired_on"] < "2021-12-31" for r in couriers if r["hired_on"])
    assert all(3 < float(r["fee"]) < 25 for r in deliveries if r["fee"])


@slow
def test_a_snapshot_whose_yaml_names_a_source_reads_its_synthesized_data(tmp_path: Path) -> None:
    """A snapshot declared in YAML (``relation: source(...)``) is rendered after parsing, where the source
    override's new ``ref`` was refused ("dbt was unable to infer all dependencies"), and the add failed; it
    now reads the seed's relation, as a source test does. A snapshot block is parsed like a model, before
    the graph exists: it takes the ``ref`` then."""
    snapshot = (
        "snapshots:\n  - name: couriers_history\n    relation: source('dispatch', 'couriers')\n"
        "    config:\n      unique_key: courier_id\n      strategy: check\n      check_cols: all\n"
    )
    sql_snapshot = (
        "{% snapshot zones_history %}\n{{ config(unique_key='zone_code', strategy='check', check_cols='all', "
        "target_schema='main') }}\nselect * from {{ source('dispatch', 'zones') }}\n{% endsnapshot %}\n"
    )
    spec = _variant(tmp_path, {"snapshots/couriers_history.yml": snapshot, "snapshots/zones_history.sql": sql_snapshot})
    code, out, err = run_cli(tmp_path, "add", str(spec), "--synthesize-data", "--json")
    assert code == 0, err
    from dbt_harvest.core.pin import read_pin

    assert read_pin(Path(json.loads(out)["pin"])).baseline_tests == ()


def test_a_column_a_text_function_reads_is_text() -> None:
    """``trim(account_number)``: DuckDB has no trim of a number, and the name alone drew a number."""
    use = analyse({"m": f'select trim(account_number) as a, upper(code) as c from "build"."main"."{ORDERS}"'}, [ORDERS])
    assert use.types[ColumnRef(ORDERS, "account_number")] == ("varchar",)
    assert use.types[ColumnRef(ORDERS, "code")] == ("varchar",)
    # DuckDB's to_timestamp(x) reads seconds since 1970: a number, not the timestamp text its name suggests
    use = analyse({"m": f'select to_timestamp(last_contact) as t from "build"."main"."{ORDERS}"'}, [ORDERS])
    assert use.types[ColumnRef(ORDERS, "last_contact")] == ("integer",)
    # strptime(x, format) (Postgres' to_date(x, format), ported) parses text
    use = analyse({"m": f'select strptime(reading_date, \'%d/%m/%Y\') as d from "build"."main"."{ORDERS}"'}, [ORDERS])
    assert use.types[ColumnRef(ORDERS, "reading_date")] == ("varchar",)


def test_a_column_moved_to_another_time_zone_is_a_timestamp() -> None:
    """Snowflake's ``convert_timezone('UTC', valid_from)`` is ported as ``valid_from AT TIME ZONE 'UTC'``; the
    name said nothing, so the column was drawn as text and DuckDB refused ``timezone(VARCHAR, VARCHAR)`` (a
    public project stopped there). DuckDB's own ``timezone(zone, ts)`` reads the same."""
    sql = (
        "select valid_from at time zone 'UTC' as a, timezone('Europe/Paris', valid_to) as b,"
        f' coalesce(label, \'x\') as c from "build"."main"."{ORDERS}"'
    )
    use = analyse({"m": sql}, [ORDERS])
    assert use.types[ColumnRef(ORDERS, "valid_from")] == ("timestamp",)
    assert use.types[ColumnRef(ORDERS, "valid_to")] == ("timestamp",)
    assert ColumnRef(ORDERS, "label") not in use.types or "timestamp" not in use.types[ColumnRef(ORDERS, "label")]


def test_the_parts_a_date_is_made_from_are_numbers() -> None:
    """``make_date(m.year, m.month, 1)``: a column named ``year`` said nothing of its type, was drawn as text,
    and DuckDB refused ``make_date(VARCHAR, ...)`` (a public project stopped there)."""
    use = analyse({"m": f'select make_date(year, month, 1) as d from "build"."main"."{ORDERS}"'}, [ORDERS])
    assert use.types[ColumnRef(ORDERS, "year")] == ("integer",)
    assert use.types[ColumnRef(ORDERS, "month")] == ("integer",)


def test_a_text_column_named_as_a_time_zone_holds_zone_names() -> None:
    import duckdb

    from dbt_harvest.harvester.synth.generate import TIME_ZONES

    table = SynthTable(
        ORDERS, "shop", "orders", (SynthColumn("customer_time_zone", "varchar"), SynthColumn("tz", "varchar"))
    )
    (rows,) = generate(Contract((table,)), seed=2)
    values = {v for row in rows.rows for v in row}
    assert values <= set(TIME_ZONES) and len(values) > 1
    for zone in values:
        duckdb.sql(f"select timezone('{zone}', timestamptz '2024-01-01 00:00:00+00')").fetchall()


def test_a_column_name_is_read_by_its_words() -> None:
    """``country`` held a ``count`` and was drawn as a number, so a real project's ``country`` join failed
    on "Afghanistan"; names are read word by word (snake_case and camelCase)."""
    from dbt_harvest.harvester.synth.contract import choose_type

    for name, family in (
        ("country", "varchar"),
        ("account", "varchar"),
        ("order_count", "numeric"),
        ("UnitPrice", "numeric"),
        ("netrevenue", "numeric"),
        ("tax_rate", "numeric"),
        ("customer_id", "integer"),
    ):
        assert choose_type("", (), name) == family, name


@slow
def test_a_postgres_project_that_grants_and_queries_a_model_at_compile_time_is_pinned(tmp_path: Path) -> None:
    """Three stops of real Postgres projects, in one original project: hooks that grant to a role (DuckDB has
    none, and ``on-run-end`` runs after ``dbt seed`` too, so synthesis never compiled a model), a model whose
    compile queries another model (``run_query`` over a ``ref``, which ``dbt compile`` does not build: the
    compile failed, and the source columns only the SQL names were never synthesized), and a projection
    ``shift_day::date`` that Postgres names ``shift_day`` and DuckDB does not. Each alone failed the add."""
    sources = (fixture_dir("courier_routes") / "models/staging/sources.yml").read_text()
    sources += "      - name: shifts\n        description: one row per courier shift, columns undocumented\n"
    project = (fixture_dir("courier_routes") / "dbt_project.yml").read_text()
    project = project.replace(
        "    staging:\n", '    +post-hook: "grant select on {{ this }} to reporting"\n    staging:\n'
    ) + ('on-run-end:\n  - "{% for s in schemas %}grant usage on schema {{ s }} to reporting;{% endfor %}"\n')
    introspecting = (
        "{%- set days = [] -%}\n{%- if execute -%}\n"
        '{%- set days = run_query("select distinct shift_day from " ~ ref(\'stg_shifts\') ~ " order by 1 limit 2")'
        ".columns[0].values() -%}\n{%- endif -%}\n"
        "select courier_id, count(*) as shifts, sum(hours_worked) as hours\n"
        "{%- for d in days %}, count(*) filter (where shift_day = '{{ d }}') as day_{{ loop.index }}{% endfor %}\n"
        "from {{ ref('stg_shifts') }}\nwhere shift_day >= date '2024-01-01'\ngroup by courier_id\n"
    )
    spec = _variant(
        tmp_path,
        {
            "dbt_project.yml": project,
            "models/staging/sources.yml": sources,
            "models/staging/stg_shifts.sql": (
                "select shift_id, courier_id, shift_day::date, hours_worked\nfrom {{ source('dispatch', 'shifts') }}\n"
            ),
            "models/marts/courier_shifts.sql": introspecting,
        },
    )
    code, out, err = run_cli(tmp_path, "add", str(spec), "--synthesize-data", "--port-from", "postgres", "--json")
    assert code == 0, err
    from dbt_harvest.core.pin import read_pin

    pin = read_pin(Path(json.loads(out)["pin"]))
    assert pin.baseline_tests == ()
    assert "dbt_project.yml" in pin.ported_files and "models/staging/stg_shifts.sql" in pin.ported_files
    shifts = next(t for t in pin.tables if t.name.endswith("courier_shifts"))
    assert shifts.rows > 0 and not shifts.empty


@slow
def test_a_failed_first_compile_is_named_when_the_build_then_fails(tmp_path: Path) -> None:
    """When the first compile failed, synthesis drew only the YAML's columns, and the refusal then named a
    column the SQL reads ("not found ... Candidate bindings: id"), hiding the cause (a real project's
    ``'dbt_utils' is undefined``, another's grant hook). The refusal now names the compile's error too."""
    sources = (fixture_dir("courier_routes") / "models/staging/sources.yml").read_text()
    sources += "      - name: shifts\n"
    spec = _variant(
        tmp_path,
        {
            "models/staging/sources.yml": sources,
            "models/staging/stg_shifts.sql": (
                "{% if execute %}{{ exceptions.raise_compiler_error('shift calendar macro is missing') }}{% endif %}\n"
                "select shift_id, courier_id from {{ source('dispatch', 'shifts') }}\n"
            ),
        },
    )
    code, _, err = run_cli(tmp_path, "add", str(spec), "--synthesize-data")
    assert code == 1
    (line,) = error_lines(err)
    assert "does not build on synthesized data" in line
    assert "the first compile failed" in line and "shift calendar macro is missing" in line
    assert not list((tmp_path / "pins").glob("*.toml"))


def test_accepted_values_that_are_words_make_a_column_text_whatever_its_name_says() -> None:
    """A column named like a number (``income_level__value``) with an accepted_values test of words was
    synthesized as DECIMAL and filled with the words: the seed's load refused them (a real project stopped
    there). The test's values decide; numbers in the list keep the column a number."""
    manifest = _manifest()
    orders = manifest["sources"]["source.shop.shop.orders"]["columns"]
    orders["income_level__value"] = {}
    orders["score_value"] = {}
    manifest["nodes"]["test.shop.a2"] = _test_node(
        "accepted_values",
        "test.shop.a2",
        "source.shop.shop.orders",
        column_name="income_level__value",
        values=["Upper middle income", "Low income"],
    )
    manifest["nodes"]["test.shop.a3"] = _test_node(
        "accepted_values", "test.shop.a3", "source.shop.shop.orders", column_name="score_value", values=["1", "2.5"]
    )
    table = derive(manifest).table(ORDERS)
    assert table is not None
    income, score = table.column("income_level__value"), table.column("score_value")
    assert income is not None and income.type == "varchar"
    assert score is not None and score.type == "numeric"
    rows = {t.relation: t for t in generate(derive(manifest), seed=1)}[ORDERS]
    drawn = {row[rows.columns.index("income_level__value")] for row in rows.rows}
    assert drawn <= {"Upper middle income", "Low income"}


def test_a_unique_test_a_join_fans_out_makes_the_child_one_to_one() -> None:
    """``fct`` left joins orders to customers; a unique test on its ``customer_id`` failed because customers
    drew several orders each. The customer key was already unique, so repair had nothing to tighten and the
    project was refused (a public project's carts and orders): the orders' key is now drawn one-to-one."""
    from dbt_harvest.harvester.synth.contract import repair
    from dbt_harvest.harvester.synth.run import failures_of

    manifest = _manifest()
    manifest["nodes"]["model.shop.fct"] = {**manifest["nodes"]["model.shop.fct"], "unique_id": "model.shop.fct"}
    test = _test_node("unique", "test.shop.u_fct", "model.shop.fct", column_name="customer_id")
    test["attached_node"] = "model.shop.fct"
    manifest["nodes"]["test.shop.u_fct"] = test
    # the manifest `dbt test` writes holds no model's compiled SQL: the failure is traced with the compile's
    tested = {
        **manifest,
        "nodes": {k: {**v, "compiled_code": ""} if k.startswith("model.") else v for k, v in manifest["nodes"].items()},
    }
    assert failures_of(["test.shop.u_fct"], tested) == ([], ["test.shop.u_fct"])
    (failure,), _ = failures_of(["test.shop.u_fct"], tested, MODELS)
    assert failure.refs == (ColumnRef(CUSTOMERS, "id"),)

    contract = derive(manifest)
    repaired = repair(contract, [failure])
    orders = repaired.table(ORDERS)
    assert orders is not None
    child = orders.column("customer_id")
    assert child is not None and child.one_to_one and not child.unique
    assert repair(repaired, [failure]) == repaired  # nothing more to tighten: the next round refuses

    tables = {t.relation: t for t in generate(repaired, seed=5)}
    keys = [row[tables[ORDERS].columns.index("customer_id")] for row in tables[ORDERS].rows]
    parents = {row[tables[CUSTOMERS].columns.index("id")] for row in tables[CUSTOMERS].rows}
    drawn = [k for k in keys if k is not None]
    assert len(drawn) == len(set(drawn))  # each customer at most once
    assert parents - set(drawn)  # some customers have no order
    assert [k for k in drawn if k not in parents]  # orphans where the left join keeps them

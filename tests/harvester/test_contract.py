"""A model's contract from dbt's manifest, and the completion statement written from it (pure)."""

from __future__ import annotations

from dbt_harvest.harvester.mint.completion import leaked_line, missing_breaks_parse
from dbt_harvest.harvester.mint.contract import (
    completion_statement,
    contract_of,
    graded_columns,
    why_not_completable,
)
from dbt_harvest.harvester.mint.lineage import models

SQL = (
    "with paid as (\n    select order_id, sum(amount) as amount_paid from {{ ref('stg_payments') }}\n"
    "    where payment_status = 'succeeded' group by 1\n)\n"
    "select o.order_id, {{ dbt_utils.generate_surrogate_key(['o.order_id']) }} as order_key,\n"
    "       o.customer_id, coalesce(p.amount_paid, 0) as amount_paid\nfrom {{ ref('stg_orders') }} o\n"
    "left join paid p using (order_id)\n"
)


def _model(
    name: str, parents: list[str], description: str = "", columns: dict | None = None, sql: str = "select 1"
) -> dict:
    return {
        "resource_type": "model",
        "name": name,
        "unique_id": f"model.shop.{name}",
        "package_name": "shop",
        "original_file_path": f"models/{name}.sql",
        "schema": "main",
        "alias": name,
        "config": {"materialized": "table"},
        "language": "sql",
        "raw_code": sql,
        "compiled_code": sql,
        "description": description,
        "columns": {k: {"name": k, "description": v} for k, v in (columns or {}).items()},
        "depends_on": {"nodes": parents},
        "relation_name": f'"build"."main"."{name}"',
    }


def _test(
    name: str, model: str, column: str | None, kwargs: dict, test_name: str, namespace: str | None = None
) -> dict:
    return {
        "resource_type": "test",
        "name": name,
        "unique_id": f"test.shop.{name}",
        "attached_node": model,
        "column_name": column,
        "depends_on": {"nodes": [model]},
        "test_metadata": {"name": test_name, "kwargs": kwargs, "namespace": namespace},
    }


def _manifest() -> dict:
    nodes = {
        "model.shop.stg_orders": _model(
            "stg_orders", ["source.shop.raw.orders"], "Orders.", {"order_id": "The order as the shop recorded it."}
        ),
        "model.shop.stg_payments": _model("stg_payments", ["seed.shop.payments"]),
        "model.shop.fct_orders": _model(
            "fct_orders",
            ["model.shop.stg_orders", "model.shop.stg_payments"],
            "One row per order with the money collected from succeeded payments.",
            {
                "order_id": "The order's identifier.",
                "order_key": "Surrogate key.",
                "customer_id": "customer id",
                "amount_paid": "Sum of the order's succeeded payments; 0 when none.",
            },
            SQL,
        ),
        "model.shop.orders_per_day": _model(
            "orders_per_day",
            ["model.shop.fct_orders"],
            "Orders per day.",
            {"day": "The calendar day the orders were placed on."},
        ),
        "seed.shop.payments": {"resource_type": "seed", "name": "payments", "unique_id": "seed.shop.payments"},
        "test.shop.unique_fct": _test(
            "unique_fct", "model.shop.fct_orders", "order_id", {"column_name": "order_id"}, "unique"
        ),
        "test.shop.status_values": _test(
            "status_values",
            "model.shop.fct_orders",
            "customer_id",
            {"to": "ref('dim_customers')", "field": "customer_id"},
            "relationships",
        ),
        "test.shop.grain": _test(
            "grain",
            "model.shop.fct_orders",
            None,
            {"combination_of_columns": ["order_id", "customer_id"]},
            "unique_combination_of_columns",
            "dbt_utils",
        ),
    }
    sources = {"source.shop.raw.orders": {"source_name": "raw", "name": "orders"}}
    return {"nodes": nodes, "sources": sources}


def test_the_contract_holds_what_the_project_documents_and_the_statement_says_it_without_sql() -> None:
    manifest = _manifest()
    nodes = models(manifest)
    contract = contract_of(manifest, nodes, "model.shop.fct_orders", "models/fct_orders.sql")
    assert contract.depth == 1 and contract.materialized == "table"
    assert contract.reads == ("model stg_orders", "model stg_payments")
    by_name = {c.name: c for c in contract.columns}
    assert by_name["order_id"].tests == ("unique",)
    assert by_name["customer_id"].tests == ("relationships: to dim_customers.customer_id",)
    assert contract.model_tests == ("dbt_utils.unique_combination_of_columns: order_id, customer_id",)
    # "customer id" says nothing the name does not: it is no description
    assert {c.name for c in contract.described_columns} == {"order_id", "order_key", "amount_paid"}
    assert why_not_completable(contract) == ""

    statement = completion_statement(contract)
    assert "`models/fct_orders.sql`" in statement and "One row per order" in statement
    assert "`amount_paid`: Sum of the order's succeeded payments; 0 when none." in statement
    assert "`stg_orders` (model), `stg_payments` (model)" in statement
    assert leaked_line(statement, SQL) == "" and "coalesce" not in statement
    assert leaked_line(statement + "\nleft join paid p using (order_id)", SQL) == "left join paid p using (order_id)"

    # graded: documented, stable columns; the generated key only when its recipe is documented
    table = ("order_id", "order_key", "customer_id", "amount_paid", "loaded_at")
    assert graded_columns(contract, table, frozenset(range(5)), SQL) == (0, 2, 3)
    assert graded_columns(contract, table, frozenset({0, 1, 2}), SQL) == (0, 2)
    documented = contract.__class__(
        **{
            **contract.__dict__,
            "columns": tuple(
                c if c.name != "order_key" else c.__class__(c.name, "md5 hash of the order id", c.tests)
                for c in contract.columns
            ),
        }
    )
    assert graded_columns(documented, table, frozenset(range(5)), SQL) == (0, 1, 2, 3)

    # a model read by another model fails dbt's parse without its file; a leaf does not, tests on it or not
    assert missing_breaks_parse(manifest, "model.shop.fct_orders")
    assert not missing_breaks_parse(manifest, "model.shop.orders_per_day")
    manifest["nodes"]["test.shop.unique_fct"]["attached_node"] = "model.shop.orders_per_day"
    manifest["nodes"]["test.shop.unique_fct"]["depends_on"] = {"nodes": ["model.shop.orders_per_day"]}
    assert not missing_breaks_parse(manifest, "model.shop.orders_per_day")
    # removed together, a model and the only model reading it leave nothing dangling
    assert not missing_breaks_parse(manifest, "model.shop.orders_per_day", "model.shop.fct_orders")


def test_models_whose_documentation_cannot_state_what_they_hold_are_not_candidates() -> None:
    manifest = _manifest()
    nodes = models(manifest)
    assert why_not_completable(contract_of(manifest, nodes, "model.shop.stg_payments", "m.sql")) == "undocumented"
    manifest["nodes"]["model.shop.stg_payments"]["description"] = "Payments."
    manifest["nodes"]["model.shop.stg_payments"]["columns"] = {"payment_id": {"description": "payment id"}}
    nodes = models(manifest)
    assert (
        why_not_completable(contract_of(manifest, nodes, "model.shop.stg_payments", "m.sql")) == "columns_undescribed"
    )
    # documented, but it reads no model (a staging model over a source): left to repairs
    assert why_not_completable(contract_of(manifest, nodes, "model.shop.stg_orders", "m.sql")) == "reads_no_model"
    assert why_not_completable(contract_of(manifest, nodes, "model.shop.orders_per_day", "m.sql")) == ""

"""Distinguishing data, column lineage: which seed column a column the mutated node reads comes from.

Package projects rename, cast and compute their seed columns in staging models (``cast(id as bigint) as
campaign_id``, ``coalesce(nm, '') as name``), so a column the mutated node reads is rarely a seed column
by name. ``trace`` follows it back with sqlglot's column lineage: within a model through its CTEs and
SELECT expressions, and across models through the relations each model reads (its compiled SQL), until
it reaches a seed relation: the answer is the (seed, seed column) pairs the value is computed from. A
column computed from literals only (``'' as source_relation``) traces to nothing: no seed row can
change it.

Pure: the caller passes every model's compiled SQL, every relation's columns (for ``select *``) and
which relations are seeds (``Lineage``); nothing here reads files or runs SQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.lineage import lineage as sqlglot_lineage

#: model hops followed before giving up (a chain of staging, intermediate and mart models)
MAX_DEPTH = 8


@dataclass(frozen=True)
class Lineage:
    """What tracing needs, keyed by normalised relation (``catalog.schema.table``, lower-case, unquoted):
    each model's compiled SQL, each relation's columns, and the seed each seed relation holds."""

    models: Mapping[str, str]
    columns: Mapping[str, tuple[str, ...]]
    seeds: Mapping[str, str]

    def schema(self) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
        """The columns as sqlglot's nested schema (types do not matter to lineage)."""
        out: dict[str, dict[str, dict[str, dict[str, str]]]] = {}
        for relation, cols in self.columns.items():
            parts = relation.split(".")
            if len(parts) != 3:
                continue
            out.setdefault(parts[0], {}).setdefault(parts[1], {})[parts[2]] = dict.fromkeys(cols, "text")
        return out


def relation_key(relation: str | exp.Table) -> str:
    """``"Build"."s"."t"`` -> ``build.s.t`` (an unparsable name: lower-cased as given)."""
    table = relation
    if isinstance(relation, str):
        try:
            table = exp.to_table(relation, dialect="duckdb")
        except (sqlglot.errors.ParseError, ValueError):
            return relation.lower().replace('"', "")
    assert isinstance(table, exp.Table)
    return ".".join(p.name.lower() for p in table.parts)


def _parse(sql: str) -> exp.Expression | None:
    try:
        tree = sqlglot.parse_one(sql, dialect="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return None
    return tree if isinstance(tree, exp.Expression) else None  # sqlglot types it as its Expr trait


def _leaves(column: str, sql: str | exp.Expression, lin: Lineage) -> list[tuple[str, str]]:
    """(relation, column) of every table column the output ``column`` of ``sql`` is computed from."""
    try:
        root = sqlglot_lineage(column, sql, schema=lin.schema(), dialect="duckdb")
    except Exception:
        return []
    out = []
    for node in root.walk():
        if not node.downstream and isinstance(node.source, exp.Table):
            out.append((relation_key(node.source), node.name.split(".")[-1].strip('"').lower()))
    return out


def _hop(relation: str, column: str, lin: Lineage, depth: int) -> list[tuple[str, str]]:
    if relation in lin.seeds:
        return [(lin.seeds[relation], column)]
    sql = lin.models.get(relation)
    if sql is None or depth >= MAX_DEPTH:
        return []
    out: list[tuple[str, str]] = []
    for rel, col in _leaves(column, sql, lin):
        out += _hop(rel, col, lin, depth + 1)
    return out


def trace(sql: str, table: str, column: str, lin: Lineage) -> tuple[tuple[str, str], ...]:
    """The (seed, seed column) pairs that ``table.column`` in the query ``sql`` is computed from, once
    each, sorted: sqlglot's lineage walk meets a column's sources in an order that changes with Python's
    string hashing (``PYTHONHASHSEED``), and the first pair is the one a proposal uses, so the order found
    is not kept (a corpus rebuild must derive the same rows). ``table`` is how the query names the
    relation: an alias, a CTE, a relation, or "" (then every relation and CTE of the query that has the
    column is tried)."""
    tree = _parse(sql)
    if tree is None:
        return ()
    with_ = tree.args.get("with_") or tree.args.get("with")
    ctes = {c.alias_or_name.lower(): c for c in (with_.expressions if isinstance(with_, exp.With) else [])}
    names: list[str | exp.Table] = []
    wanted = table.lower()
    for t in tree.find_all(exp.Table):
        if not wanted or t.alias_or_name.lower() == wanted:
            names.append(t.name.lower() if t.name.lower() in ctes and not t.args.get("db") else t)
    if wanted in ctes:
        names.append(wanted)
    out: list[tuple[str, str]] = []
    for name in names:
        if isinstance(name, str):  # a CTE of this query: trace its output column, with the query's WITH
            query = exp.select(exp.column(column)).from_(name)
            query.set("with_", with_.copy() if isinstance(with_, exp.With) else None)
            for rel, col in _leaves(column, query, lin):
                out += _hop(rel, col, lin, 0)
        else:
            key = relation_key(name)
            if column.lower() in {c.lower() for c in lin.columns.get(key, ())} or key in lin.seeds:
                out += _hop(key, column.lower(), lin, 0)
    return tuple(sorted(set(out)))


__all__ = ["Lineage", "MAX_DEPTH", "relation_key", "trace"]

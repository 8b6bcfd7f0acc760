"""How a project's SQL uses each source column: the evidence synthesized data is drawn from.

A project that ships no data still says a great deal about it in its SQL: ``cast(x as date)`` types a column,
``status = 'shipped'`` names a value the data must hold (and its other side must hold too, or a flipped
filter changes nothing), ``coalesce(discount, 0)`` says the column has nulls, ``o.customer_id = c.id`` says
one column draws its values from another. This module reads that evidence out of the project's compiled SQL
with sqlglot, per source column, following each column back through CTEs, subqueries and upstream models
to the synthesized source relation it comes from (renames and simple casts pass through).

Pure: the caller passes every model's compiled SQL keyed by relation name and the names of the synthesized
source relations; nothing here reads files or runs SQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

#: how deep a column is followed through scopes and models before giving up
MAX_DEPTH = 24

TYPES = ("integer", "numeric", "date", "timestamp", "boolean", "varchar")

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?")
#: functions a value passes through unchanged enough that a literal compared with the result is a value
#: of the argument (``lower(status) = 'open'``: the column holds 'open')
_PASSTHROUGH = (exp.Cast, exp.TryCast, exp.Lower, exp.Upper, exp.Trim, exp.Coalesce, exp.Paren, exp.Alias)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
#: functions of text: the column they read holds text (``trim(account_number)``; DuckDB has no trim of a number)
_TEXT_FUNCTIONS = tuple(
    getattr(exp, name)
    for name in (
        *("Lower", "Upper", "Trim", "Initcap", "Substring"),
        *("RegexpReplace", "RegexpExtract", "RegexpExtractAll", "RegexpLike"),
        *("StrToDate", "StrToTime"),  # strptime(x, format), Postgres' to_date(x, format) ported: x is text
    )
    if hasattr(exp, name)
)
_DATE_FUNCTIONS = (
    exp.DateTrunc,
    exp.TimestampTrunc,
    exp.DateDiff,
    exp.DateAdd,
    exp.DateSub,
    exp.TimestampDiff,
    exp.TimestampAdd,
    exp.TimestampSub,
    exp.Extract,
    exp.Year,
    exp.Month,
    exp.Day,
    exp.DayOfWeek,
)
_DATE_NAMES = {
    "date_part",
    "datepart",
    "datediff",
    "dateadd",
    "date_diff",
    "date_add",
    "strftime",
    "dayname",
    "monthname",
}
_NUMERIC_AGGREGATES = (exp.Sum, exp.Avg, exp.Stddev, exp.Variance)


@dataclass(frozen=True, order=True)
class ColumnRef:
    """A column of a synthesized source relation (both lower-case)."""

    table: str
    column: str


@dataclass(frozen=True, order=True)
class Literal:
    """A value the SQL compares a column with: ``op`` is ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``,
    ``like`` or ``between``; ``value`` as SQL text would read it (a string without quotes)."""

    op: str
    value: str
    kind: str  # "number" | "string" | "boolean"


@dataclass(frozen=True, order=True)
class Join:
    """Two columns an equality join condition pairs; ``outer`` when the join keeps unmatched rows."""

    left: ColumnRef
    right: ColumnRef
    outer: bool


@dataclass(frozen=True)
class Usage:
    """Everything the SQL says about the synthesized relations' columns."""

    columns: frozenset[ColumnRef] = frozenset()
    types: Mapping[ColumnRef, tuple[str, ...]] = field(default_factory=dict)
    literals: Mapping[ColumnRef, tuple[Literal, ...]] = field(default_factory=dict)
    null_handled: frozenset[ColumnRef] = frozenset()
    joins: tuple[Join, ...] = ()
    # columns that must share a type (the arguments of one coalesce, the branches of one case)
    alike: tuple[tuple[ColumnRef, ColumnRef], ...] = ()


def _parse(sql: str) -> exp.Expression | None:
    for dialect in ("duckdb", "postgres"):
        try:
            tree = sqlglot.parse_one(sql, dialect=dialect)
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
            continue
        if isinstance(tree, exp.Expression):
            return tree
    return None


def type_of_datatype(data_type: str) -> str:
    """A declared or cast type's family (``TYPES``); ``varchar`` when unknown."""
    text = data_type.lower().strip()
    if re.match(r"^(big|small|tiny|hug|u)?int|^integer|^long|^short", text):
        return "integer"
    if re.match(r"^(numeric|decimal|double|float|real|number|money)", text):
        return "numeric" if not re.match(r"^number\(\s*\d+\s*(,\s*0\s*)?\)$", text) else "integer"
    if text.startswith(("timestamp", "datetime")):
        return "timestamp"
    if text == "date":
        return "date"
    if text.startswith("bool"):
        return "boolean"
    return "varchar"


def _literal(node: exp.Expr) -> Literal | None:
    """``node`` as a compared value, or None when it is no constant."""
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return Literal("=", "-" + node.this.name, "number")
    if isinstance(node, exp.Literal):
        return Literal("=", node.name, "string" if node.is_string else "number")
    if isinstance(node, exp.Boolean):
        return Literal("=", "true" if node.this else "false", "boolean")
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        return _literal(node.this)
    return None


def _literal_type(lit: Literal) -> str:
    if lit.kind == "boolean":
        return "boolean"
    if lit.kind == "number":
        return "integer" if re.fullmatch(r"-?\d+", lit.value) else "numeric"
    if _ISO_DATE.match(lit.value):
        return "date"
    if _ISO_TIMESTAMP.match(lit.value):
        return "timestamp"
    return "varchar"


def _strip(node: exp.Expr) -> exp.Expr:
    """The column under pass-through functions (``lower(trim(x))`` -> ``x``), else ``node``."""
    while isinstance(node, _PASSTHROUGH) and isinstance(node.this, exp.Expression):
        node = node.this
    return node


class _Resolver:
    """Follows a column of a scope back to the synthesized relations it is read from."""

    def __init__(self, models: Mapping[str, str], seeds: Iterable[str]) -> None:
        self.models = {k.lower(): v for k, v in models.items()}
        self.seeds = {s.lower() for s in seeds}
        self._scopes: dict[str, Scope | None] = {}
        # (scope, output column) -> what it is read from; None while being resolved (a cycle reads nothing).
        # Without it a `select *` over a `select *` over ... tries every source at every level: on a
        # 128-model project the tracing ran for 16 minutes
        self._outputs: dict[tuple[int, str], list[ColumnRef] | None] = {}

    def root(self, model: str) -> Scope | None:
        if model not in self._scopes:
            tree = _parse(self.models[model])
            scope = None
            if tree is not None:
                try:
                    scope = build_scope(tree)
                except Exception:  # sqlglot raises plain errors on shapes it cannot scope
                    scope = None
            self._scopes[model] = scope
        return self._scopes[model]

    def column(self, scope: Scope, col: exp.Column, depth: int = 0) -> list[ColumnRef]:
        if depth > MAX_DEPTH:
            return []
        name = col.name.lower()
        alias = col.table
        if alias:
            found = scope.sources.get(alias)
            candidates = [found] if found is not None else []
        else:
            candidates = list(scope.sources.values())
        out: list[ColumnRef] = []
        for source in candidates:
            out += self._from_source(source, name, depth + 1, only=len(candidates) == 1)
        return sorted(set(out))

    def _from_source(self, source: object, name: str, depth: int, *, only: bool) -> list[ColumnRef]:
        if isinstance(source, exp.Table):
            table = source.name.lower()
            if table in self.seeds:
                # an unqualified column of a scope reading several relations: not knowable from here
                return [ColumnRef(table, name)] if only else []
            if table in self.models:
                root = self.root(table)
                return self.output(root, name, depth) if root is not None else []
            return []
        if isinstance(source, Scope):
            return self.output(source, name, depth)
        return []

    def output(self, scope: Scope, name: str, depth: int) -> list[ColumnRef]:
        """What the output column ``name`` of ``scope`` is read from (once per scope and name)."""
        key = (id(scope), name)
        if key in self._outputs:
            return list(self._outputs[key] or ())
        if depth > MAX_DEPTH:
            return []
        self._outputs[key] = None
        found = sorted(set(self._output(scope, name, depth)))
        self._outputs[key] = found
        return list(found)

    def _output(self, scope: Scope, name: str, depth: int) -> list[ColumnRef]:
        if isinstance(scope.expression, exp.SetOperation):
            out: list[ColumnRef] = []
            for part in scope.set_operation_scopes:
                out += self.output(part, name, depth + 1)
            return out
        select = scope.expression
        if not isinstance(select, exp.Select):
            return []
        for projection in select.selects:
            if projection.alias_or_name.lower() == name and not isinstance(projection, exp.Star):
                inner = _strip(projection.unalias())
                if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
                    return self.column(scope, inner, depth + 1)
                return []
        stars = [
            p
            for p in select.selects
            if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
        ]
        out = []
        for star in stars:
            alias = star.table if isinstance(star, exp.Column) else ""
            sources = [scope.sources[alias]] if alias and alias in scope.sources else list(scope.sources.values())
            for source in sources:
                out += self._from_source(source, name, depth + 1, only=len(sources) == 1)
        return out


class _Collector:
    def __init__(self) -> None:
        self.columns: set[ColumnRef] = set()
        self.types: dict[ColumnRef, list[str]] = {}
        self.literals: dict[ColumnRef, set[Literal]] = {}
        self.null_handled: set[ColumnRef] = set()
        self.joins: set[Join] = set()
        self.alike: set[tuple[ColumnRef, ColumnRef]] = set()

    def type(self, refs: list[ColumnRef], family: str) -> None:
        for ref in refs:
            self.types.setdefault(ref, []).append(family)

    def literal(self, refs: list[ColumnRef], lit: Literal) -> None:
        for ref in refs:
            self.literals.setdefault(ref, set()).add(lit)
            self.types.setdefault(ref, []).append(_literal_type(lit))

    def usage(self) -> Usage:
        return Usage(
            columns=frozenset(self.columns),
            types={k: tuple(v) for k, v in sorted(self.types.items())},
            literals={k: tuple(sorted(v)) for k, v in sorted(self.literals.items())},
            null_handled=frozenset(self.null_handled),
            joins=tuple(sorted(self.joins)),
            alike=tuple(sorted(self.alike)),
        )


_OPS = {exp.EQ: "=", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}


def _scan_scope(scope: Scope, resolver: _Resolver, out: _Collector) -> None:
    def refs(node: exp.Expr) -> list[ColumnRef]:
        inner = _strip(node)
        if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
            return resolver.column(scope, inner)
        return []

    for col in scope.columns:
        out.columns.update(resolver.column(scope, col))
    expression = scope.expression
    own = [n for n in expression.walk() if not isinstance(n, exp.Subquery | exp.CTE) or n is expression]
    for node in own:
        if isinstance(node, _COMPARISONS):
            _comparison(node, refs, out)
        elif isinstance(node, exp.In):
            lits = [_literal(e) for e in node.expressions]
            for lit in lits:
                if lit is not None:
                    out.literal(refs(node.this), Literal("in", lit.value, lit.kind))
        elif isinstance(node, exp.Between):
            for bound in (node.args.get("low"), node.args.get("high")):
                lit = _literal(bound) if isinstance(bound, exp.Expression) else None
                if lit is not None:
                    out.literal(refs(node.this), Literal("between", lit.value, lit.kind))
        elif isinstance(node, exp.Like | exp.ILike):
            lit = _literal(node.expression)
            if lit is not None and lit.kind == "string":
                out.literal(refs(node.this), Literal("like", lit.value, "string"))
        elif isinstance(node, exp.Cast | exp.TryCast):
            to = node.args.get("to")
            if isinstance(to, exp.DataType):
                out.type(refs(node.this), type_of_datatype(to.sql(dialect="duckdb")))
        elif isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod):
            interval = any(isinstance(side, exp.Interval) for side in (node.left, node.right))
            for side in (node.left, node.right):
                out.type(refs(side), "timestamp" if interval else "numeric")
        elif isinstance(node, _TEXT_FUNCTIONS):
            out.type(refs(node.this), "varchar")
        elif isinstance(node, exp.UnixToTime):  # DuckDB's to_timestamp(x): x counts seconds since 1970
            out.type(refs(node.this), "integer")
        elif isinstance(node, _NUMERIC_AGGREGATES):
            out.type(refs(node.this), "numeric")
        elif isinstance(node, _DATE_FUNCTIONS):
            for arg in node.args.values():
                if isinstance(arg, exp.Expression) and not isinstance(arg, exp.Var | exp.Literal | exp.Interval):
                    out.type(refs(arg), "timestamp")
        elif isinstance(node, exp.DateFromParts | exp.TimestampFromParts):  # make_date(y, m, d): numbers
            for arg in node.args.values():
                if isinstance(arg, exp.Expression):
                    out.type(refs(arg), "integer")
        elif isinstance(node, exp.AtTimeZone):  # Snowflake's convert_timezone, ported: a timestamp's zone
            out.type(refs(node.this), "timestamp")
        elif isinstance(node, exp.ConvertTimezone) and isinstance(node.args.get("timestamp"), exp.Expression):
            out.type(refs(node.args["timestamp"]), "timestamp")
        elif isinstance(node, exp.Anonymous) and node.name.lower() == "timezone" and len(node.expressions) == 2:
            out.type(refs(node.expressions[1]), "timestamp")  # DuckDB's timezone(zone, ts)
        elif isinstance(node, exp.Anonymous) and node.name.lower() in _DATE_NAMES:
            for arg in node.expressions[1:] if node.name.lower() in {"date_part", "datepart"} else node.expressions:
                out.type(refs(arg), "timestamp")
        elif isinstance(node, exp.Coalesce):
            for ref in refs(node.this):
                out.null_handled.add(ref)
            _same_type(node.this, node.expressions, refs, out)
        elif isinstance(node, exp.Case):
            branches = [i.args.get("true") for i in node.args.get("ifs") or []] + [node.args.get("default")]
            values = [b for b in branches if isinstance(b, exp.Expression)]
            for value in values:
                _same_type(value, values, refs, out)
        elif isinstance(node, (exp.Is, exp.Nullif)):
            out.null_handled.update(refs(node.this))
        elif isinstance(node, exp.Not | exp.And | exp.Or):
            for arg in (node.args.get("this"), node.args.get("expression")):
                if isinstance(arg, exp.Column):
                    out.type(refs(arg), "boolean")
        elif isinstance(node, (exp.If, exp.Where)):
            cond = node.args.get("this")
            if isinstance(cond, exp.Column):
                out.type(refs(cond), "boolean")


def _comparison(node: exp.Binary, refs: Callable[[exp.Expr], list[ColumnRef]], out: _Collector) -> None:
    """A comparison's literal on either side (``5 < x`` reads as ``x > 5``), and an equality of two columns
    as a join (outer when it sits in a left, right or full join's condition)."""
    left, right = node.left, node.right
    for side, other in ((left, right), (right, left)):
        lit = _literal(other)
        if lit is not None:
            op = _OPS[type(node)]
            if side is right:
                op = {">": "<", "<": ">", ">=": "<=", "<=": ">="}.get(op, op)
            out.literal(refs(side), Literal(op, lit.value, lit.kind))
    lrefs, rrefs = refs(left), refs(right)
    if isinstance(node, exp.EQ) and lrefs and rrefs:
        join = node.find_ancestor(exp.Join)
        outer = bool(join and (join.side or "").upper() in {"LEFT", "RIGHT", "FULL"})
        for a in lrefs:
            for b in rrefs:
                if a != b:
                    out.joins.add(Join(min(a, b), max(a, b), outer))


def _same_type(
    node: exp.Expr, others: Sequence[exp.Expr], refs: Callable[[exp.Expr], list[ColumnRef]], out: _Collector
) -> None:
    """A column that meets a literal where both must have one type (a coalesce default, another branch of a
    case) takes the literal's type."""
    column_refs = refs(node)
    if not column_refs:
        return
    for other in others:
        for ref in refs(other):
            for mine in column_refs:
                if ref != mine:
                    out.alike.add((min(ref, mine), max(ref, mine)))
        lit = _literal(other)
        if lit is not None and lit.value.lower() != "null":
            out.type(column_refs, _literal_type(lit))


def analyse(models: Mapping[str, str], seeds: Iterable[str]) -> Usage:
    """The usage of every synthesized relation's columns (``seeds``, relation names) in every model's
    compiled SQL (``models``: relation name -> SQL). A model sqlglot cannot parse contributes nothing."""
    resolver = _Resolver(models, seeds)
    out = _Collector()
    for model in sorted(resolver.models):
        root = resolver.root(model)
        if root is None:
            continue
        for scope in root.traverse():
            _scan_scope(scope, resolver, out)
    return out.usage()


def resolve_output(models: Mapping[str, str], seeds: Iterable[str], relation: str, column: str) -> list[ColumnRef]:
    """The synthesized columns the output ``column`` of model ``relation`` is read from (a dbt test on a
    model column constrains these), [] when it is computed."""
    resolver = _Resolver(models, seeds)
    rel = relation.lower()
    if rel in resolver.seeds:
        return [ColumnRef(rel, column.lower())]
    if rel not in resolver.models:
        return []
    root = resolver.root(rel)
    return sorted(set(resolver.output(root, column.lower(), 0))) if root is not None else []


__all__ = ["TYPES", "ColumnRef", "Join", "Literal", "Usage", "analyse", "resolve_output", "type_of_datatype"]

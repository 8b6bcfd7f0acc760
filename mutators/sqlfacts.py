"""Facts about a parsed model that several operator families share: which clause a node sits in,
the top-level conjuncts of a predicate, tokens between two nodes, and name-based type guesses.

Kept small on purpose: anything only one family needs lives in that family's module.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from typing import Any

from sqlglot import exp
from sqlglot.tokens import Token

from dbt_harvest.mutators.edits import Edit
from dbt_harvest.mutators.masking import MaskedFile

#: predicate clauses: the node types that hold a boolean condition, by clause name.
PREDICATE_CLAUSES = frozenset({"where", "having", "qualify", "on"})

_TEMPORAL = re.compile(
    r"(^|_)(date|dt|day|time|timestamp|ts|at|datetime|month|week|year|period)$|^(date|dt|day|month|week)_",
    re.IGNORECASE,
)
_TEMPORAL_NODES: tuple[type[exp.Expression], ...] = (
    exp.CurrentDate,
    exp.CurrentTimestamp,
    exp.CurrentDatetime,
    exp.Interval,
    exp.DateTrunc,
    exp.TimestampTrunc,
    exp.DateAdd,
    exp.DateSub,
    exp.TsOrDsAdd,
    exp.DateDiff,
    exp.StrToDate,
    exp.StrToTime,
    exp.TimeToStr,
    exp.Date,
    exp.Timestamp,
)


def clause_of(node: exp.Expr) -> str:
    """The clause a node sits in: where, having, qualify, on, projection, group, order, window…"""
    child, parent = node, node.parent
    while parent is not None:
        key = child.arg_key
        if isinstance(parent, exp.Where):
            return "where"
        if isinstance(parent, exp.Having):
            return "having"
        if isinstance(parent, exp.Qualify):
            return "qualify"
        if isinstance(parent, exp.Join):
            return "on" if key == "on" else "from"
        if isinstance(parent, exp.Select) and key == "expressions":
            return "projection"
        if isinstance(parent, exp.Group):
            return "group"
        if isinstance(parent, exp.Order):
            return "order"
        if isinstance(parent, exp.Window):
            return "window"
        if isinstance(parent, (exp.From, exp.Select, exp.Subquery, exp.Union)):
            return "from" if isinstance(parent, exp.From) else "other"
        child, parent = parent, parent.parent
    return "other"


def condition_of(clause_node: exp.Expression) -> exp.Expression | None:
    """The boolean condition held by a Where/Having/Qualify node or a Join's ON."""
    cond: exp.Expression | None = clause_node.args.get("on") if isinstance(clause_node, exp.Join) else clause_node.this
    return cond


def conjuncts(cond: exp.Expression) -> list[exp.Expression]:
    """Top-level AND operands, left to right (parenthesised groups stay whole)."""
    if isinstance(cond, exp.And):
        return conjuncts(cond.this) + conjuncts(cond.expression)
    return [cond]


def predicate_clauses(tree: exp.Expression) -> Iterator[tuple[str, exp.Expression, exp.Expression]]:
    """(clause name, clause node, condition) for every WHERE, HAVING, QUALIFY and JOIN … ON."""
    for node in tree.find_all(exp.Where, exp.Having, exp.Qualify, exp.Join):
        cond = condition_of(node)
        if isinstance(cond, exp.Expression):
            name = {exp.Where: "where", exp.Having: "having", exp.Qualify: "qualify", exp.Join: "on"}[type(node)]
            yield name, node, cond


def is_positive_predicate(node: exp.Expression) -> bool:
    """True when the node's truth value filters rows directly: only AND/OR/parens up to WHERE/ON/HAVING."""
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, (exp.Where, exp.Having, exp.Qualify)):
            return True
        if isinstance(parent, exp.Join):
            return child.arg_key == "on"
        if not isinstance(parent, (exp.And, exp.Or, exp.Paren)):
            return False
        child, parent = parent, parent.parent
    return False


def list_drop(parsed: Any, items: list[exp.Expression], index: int) -> tuple[int, int] | None:
    """The span that removes ``items[index]`` and one separator from a comma/AND list of siblings."""
    spans = [parsed.span(i) for i in items]
    if any(s is None for s in spans) or len(items) < 2:
        return None
    if index > 0:
        return spans[index - 1][1], spans[index][1]
    return spans[0][0], spans[1][0]


def known_spans(parsed: MaskedFile, nodes: Iterable[exp.Expr]) -> list[tuple[int, int]] | None:
    """The span of every node in order, or None when any of them has no known span."""
    spans: list[tuple[int, int]] = []
    for node in nodes:
        span = parsed.span(node)
        if span is None:
            return None
        spans.append(span)
    return spans


def tokens_in(parsed: Any, start: int, end: int) -> list[Token]:
    """Tokens lying wholly inside [start, end)."""
    tokens = parsed.tokens
    starts = [t.start for t in tokens] if not hasattr(parsed, "_token_starts") else parsed._token_starts
    lo = bisect.bisect_left(starts, start)
    out: list[Token] = []
    for tok in tokens[lo:]:
        if tok.start >= end:
            break
        if tok.end < end:
            out.append(tok)
    return out


def token_between(parsed: Any, start: int, end: int, words: Iterable[str]) -> Token | None:
    """The first token in [start, end) whose text (upper-cased) is one of ``words``."""
    wanted = {w.upper() for w in words}
    for tok in tokens_in(parsed, start, end):
        if parsed.text[tok.start : tok.end + 1].upper() in wanted:
            return tok
    return None


def text_of(parsed: Any, node: exp.Expression) -> str | None:
    span = parsed.span(node)
    return None if span is None else parsed.text[span[0] : span[1]]


def wrapped(parsed: Any, node: exp.Expression) -> str | None:
    """The node's original text, parenthesised unless it is a column, literal or function call."""
    text = text_of(parsed, node)
    if text is None:
        return None
    if isinstance(node, (exp.Column, exp.Literal, exp.Boolean, exp.Func, exp.Paren, exp.Identifier)):
        return text
    return f"({text})"


def same_case(template: str, word: str) -> str:
    """``word`` in the letter case of ``template`` (upper, lower or capitalised)."""
    if template.isupper():
        return word.upper()
    if template[:1].isupper():
        return word.capitalize()
    return word.lower()


def keeps_output_name(node: exp.Column, replacement: str) -> str:
    """``replacement`` for a column's name, aliased back to the old name when the column is a bare
    projection (``select o.created_at`` -> ``select o.updated_at as created_at``): a swapped column
    must change values, not the name (or the type) of an output column."""
    if isinstance(node.parent, exp.Select) and node.arg_key == "expressions":
        return f"{replacement} as {node.name}"
    return replacement


#: name-based kinds of value columns; a hurried repair swaps a column only for one of the same kind.
VALUE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("money", re.compile(r"(amount|price|cost|revenue|total|fee|tax|discount|balance|spend|value)", re.I)),
    ("count", re.compile(r"(^num_|_count$|^count_|quantity|qty)", re.I)),
    ("id", re.compile(r"_id$", re.I)),
)


def value_kind(name: str) -> str | None:
    """The kind of a column by its name (money, count, id), or None."""
    for kind, pattern in VALUE_KINDS:
        if pattern.search(name or ""):
            return kind
    return None


def sibling_column(parsed: Any, node: exp.Expression) -> str | None:
    """Another column of the same relation and the same kind by name (a timestamp for a timestamp, a key
    for a key, an amount for an amount), spelled in the file: what a hurried repair reaches for instead
    of the right one. None for a column of no known kind (any other column would be a guess)."""
    if not isinstance(node, exp.Column) or not node.name:
        return None
    temporal, kind = looks_temporal(node), value_kind(node.name)
    if not temporal and kind is None:
        return None
    names = sorted(
        {
            c.name
            for c in parsed.tree.find_all(exp.Column)
            if c.table == node.table
            and c.name
            and c.name != node.name
            and looks_temporal(c) == temporal
            and value_kind(c.name) == kind
            and parsed.span(c) is not None
            and parsed.text[slice(*parsed.span(c))].endswith(c.name)
        }
    )
    if not names:
        return None
    return f"{node.table}.{names[0]}" if node.table else names[0]


_POINT_IN_TIME = re.compile(r"(^|_)(date|dt|time|timestamp|ts|at|datetime)$|^(date|dt)_", re.IGNORECASE)


def looks_like_a_point_in_time(name: str) -> bool:
    """A column named like a date or timestamp (``*_at``, ``*_date``), not like a calendar part
    (``*_year``, ``day_of_week``), which is usually an integer."""
    return bool(_POINT_IN_TIME.search(name or ""))


def looks_temporal(node: exp.Expression) -> bool:
    """A name-based guess: is this a date/time value (a *_at / *_date column, current_date…)?"""
    if isinstance(node, _TEMPORAL_NODES):
        return True
    if isinstance(node, exp.Cast) and node.to.is_type("date", "timestamp", "timestamptz", "datetime"):
        return True
    if isinstance(node, exp.Column):
        return bool(_TEMPORAL.search(node.name or ""))
    if isinstance(node, (exp.Add, exp.Sub, exp.Paren)):
        return any(looks_temporal(c) for c in node.iter_expressions())
    return False


def drop_conjunct_edit(
    parsed: Any, clause: str, owner: exp.Expression, items: list[exp.Expression], index: int
) -> Edit | None:
    """The edit over the original text that removes one conjunct (or the whole lone WHERE/HAVING)."""
    if len(items) >= 2:
        span = list_drop(parsed, items, index)
        return None if span is None else Edit(span[0], span[1], "")
    if clause in ("where", "having", "qualify"):
        span = parsed.span(owner)
        return None if span is None else Edit(span[0], span[1], "")
    return None


def enclosing_select(node: exp.Expression) -> exp.Select | None:
    found = node.find_ancestor(exp.Select)
    return found if isinstance(found, exp.Select) else None


def add_distinct_edit(parsed: Any, select: exp.Select | None, edit: Edit) -> Edit | None:
    """Over the mutated text: ``select`` → ``select distinct`` (the hurried fix for duplicates)."""
    if select is None or select.args.get("distinct"):
        return None
    span = parsed.span(select)
    if span is None:
        return None
    first = select.expressions[0] if select.expressions else None
    first_span = parsed.span(first) if first is not None else None
    tok = token_between(parsed, span[0], first_span[0] if first_span else span[1], ["SELECT"])
    if tok is None or tok.end + 1 > edit.start and tok.start < edit.end:
        return None
    pos = edit.shift(tok.end + 1)
    word = parsed.text[tok.start : tok.end + 1]
    return Edit(pos, pos, " " + same_case(word, "distinct"))


def column_names(tree: exp.Expression) -> dict[str, set[str]]:
    """Column names seen in the file, grouped by qualifier ('' for unqualified)."""
    out: dict[str, set[str]] = {}
    for col in tree.find_all(exp.Column):
        if col.name:
            out.setdefault(col.table or "", set()).add(col.name)
    return out

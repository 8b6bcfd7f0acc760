"""Parse masked SQL with sqlglot while recording where every node starts and ends in the text.

sqlglot gives positions only to leaves (identifiers, literals, function names); composite nodes carry
none. A subclass of the dialect's parser wraps every ``_parse_*`` method and stamps the node it
returns with the offsets of the first and last token it consumed; a node's span is then the widest
start and the innermost end over itself and its children. Parser offsets equal file offsets because
the masked text has the file's length, character for character.
"""

from __future__ import annotations

import functools
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token

#: dialects tried in order; the first one that parses the masked file wins. DuckDB first because
#: the harvester builds with dbt-duckdb.
DIALECTS: tuple[str, ...] = ("duckdb", "snowflake", "bigquery", "postgres", "databricks", "redshift")

_SPAN_PARSERS: dict[type, type] = {}


def _span_parser(dialect: Dialect) -> type:
    base = dialect.parser_class
    cached = _SPAN_PARSERS.get(base)
    if cached is not None:
        return cached
    namespace: dict[str, Any] = {}
    for name in dir(base):
        if not name.startswith("_parse"):
            continue
        raw = getattr(base, name)
        if not callable(raw) or isinstance(base.__dict__.get(name), (staticmethod, classmethod)):
            continue
        namespace[name] = _stamping(raw)
    cls = type(f"Span{base.__name__}", (base,), namespace)
    _SPAN_PARSERS[base] = cls
    return cls


def _stamping(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        index = self._index
        result = method(self, *args, **kwargs)
        if isinstance(result, exp.Expression) and self._index > index and self._prev is not None:
            meta = result.meta
            start = self._tokens[index].start
            if "_s" not in meta:
                meta["_s"] = start
                meta["_e"] = self._prev.end + 1
            elif start < meta["_s"]:
                # an outer parse method returned the same node (``cast(`` … ``)`` around what ``_parse_cast``
                # read): the node spans all it consumed, its closing parenthesis included
                meta["_s"] = start
                meta["_e"] = max(meta["_e"], self._prev.end + 1)
        return result

    return wrapper


def parse_with_spans(sql: str, dialect_name: str) -> tuple[exp.Expression, list[Token]]:
    """Parse one statement; raise sqlglot's error when it does not parse."""
    dialect = Dialect.get_or_raise(dialect_name)
    tokens = dialect.tokenize(sql)
    parser = _span_parser(dialect)(dialect=dialect, error_level=sqlglot.ErrorLevel.RAISE)
    trees = [t for t in parser.parse(tokens, sql) if t is not None]
    if len(trees) != 1:
        raise ValueError(f"expected one SQL statement, found {len(trees)}")
    return trees[0], tokens


def first_parse(sql: str) -> tuple[str, exp.Expression, list[Token]] | tuple[None, str, None]:
    """Try each dialect in DIALECTS; return (dialect, tree, tokens) or (None, first error, None)."""
    first_error = ""
    for name in DIALECTS:
        try:
            tree, tokens = parse_with_spans(sql, name)
        except Exception as exc:  # sqlglot raises ParseError, TokenError and a few others
            if not first_error:
                first_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        return name, tree, tokens
    return None, first_error or "no dialect parsed it", None


def compute_spans(tree: exp.Expression, text: str) -> dict[int, tuple[int, int]]:
    """Span (start, end exclusive) of every node with any position, keyed by ``id(node)``."""
    spans: dict[int, tuple[int, int]] = {}
    # post-order without recursion (deep CTE chains would hit the recursion limit)
    order: list[exp.Expr] = list(tree.walk(bfs=True))
    for node in reversed(order):
        meta = node._meta or {}
        start = end = None
        if "_s" in meta:
            start, end = meta["_s"], meta["_e"]
        if "start" in meta and "end" in meta:
            s, e = meta["start"], meta["end"] + 1
            start = s if start is None else min(start, s)
            end = e if end is None else max(end, e)
        for child in node.iter_expressions():
            got = spans.get(id(child))
            if got:
                start = got[0] if start is None else min(start, got[0])
                end = got[1] if end is None else max(end, got[1])
        if start is not None and end is not None:
            spans[id(node)] = _balanced(text, start, end)
    return spans


def _balanced(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop opening parentheses a wrapper consumed in front of a node whose closer it kept."""
    while start < end and text[start] == "(" and _depth(text, start, end) > 0:
        start += 1
        while start < end and text[start].isspace():
            start += 1
    return start, end


def _depth(text: str, start: int, end: int) -> int:
    depth = 0
    quote = ""
    for ch in text[start:end]:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
    return depth

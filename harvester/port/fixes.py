"""sqlglot's DuckDB output, with the calls it passes through unported written as DuckDB runs them.

sqlglot writes some warehouse calls into DuckDB SQL unchanged although DuckDB has no such function, so the
model is "ported" and then fails at build. Each rewrite here keeps the call's meaning:
- BigQuery ``current_datetime([zone])``: the wall-clock time in ``zone`` (default UTC) as a DATETIME, which
  is DuckDB's ``cast(current_timestamp at time zone zone as timestamp)``;
- BigQuery ``current_time(zone)``: sqlglot drops the zone, so the time is read in the session's zone
  instead; written as ``cast(current_timestamp at time zone zone as time)``;
- BigQuery ``date_trunc(date, part)``: a DATE (its timestamp forms are ``timestamp_trunc`` and
  ``datetime_trunc``), where DuckDB's ``date_trunc`` gives a TIMESTAMP, so an enforced contract's ``date`` or
  a comparison with a date string saw another type; written as ``cast(date_trunc(part, date) as date)``;
- BigQuery ``safe_add``, ``safe_subtract``, ``safe_multiply`` and ``safe_negate``: NULL where the operation
  overflows, otherwise its value; written as the plain operation (DuckDB raises on an overflow instead, so
  a build shows it).
- BigQuery ``extract(isoweek from d)``, a part DuckDB does not name: DuckDB's ``week`` is the ISO week;
- BigQuery ``extract(date from ts)`` (``time``, ``datetime``): the timestamp's date, time or wall-clock
  datetime, which DuckDB's extract cannot give; written as a cast to DATE, TIME or TIMESTAMP;
- BigQuery ``array_agg(x [order by ...] limit n)``, which DuckDB cannot write (the limit inside the
  aggregate): the whole ordered list's first ``n`` items, ``(array_agg(x order by ...))[1:n]``;
- BigQuery ``format_date('%Q', d)`` (``%Q`` anywhere in a format): DuckDB's strftime has no quarter, so the
  quarter is ``quarter(d)`` as text, joined with the rest of the format as strftime writes it;
- Snowflake ``to_timestamp_ntz(x)`` (``_ltz``, ``_tz``), which sqlglot passes through: seconds since 1970
  where ``x`` is a number (arithmetic, a function, a cast; ``to_timestamp(x)`` in DuckDB), else the text or
  timestamp cast, as ``TIMESTAMP`` (``TIMESTAMPTZ`` for the zoned two);
- Snowflake ``to_char(x, '<format>')`` whose format holds only date and time parts (``'YYYY-MM'``, ``'Mon
  YYYY'``): sqlglot cannot write it for DuckDB and the model was refused; written as ``strftime(x, ...)``
  with the format in strftime's terms, as sqlglot already writes Postgres' ``to_char``. A number format
  stays unported, and the model is refused by name.

- Postgres and Redshift name a projection that casts a column after the column (``select zipcode::text``
  gives ``zipcode``), where DuckDB names it after the expression: such a projection gets the column's name
  as its alias, so the models that read it find it.

The rewrites apply only to SQL read in a warehouse dialect: SQL read as DuckDB is written as sqlglot writes
it, so a model that reads the same in DuckDB as in its dialect is still told apart from one that needs them.
Pure: text in, text out.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel
from sqlglot.time import format_time


def _zoned_now(zone: exp.Expr, to: str) -> exp.Expr:
    return exp.cast(exp.AtTimeZone(this=exp.CurrentTimestamp(), zone=zone), to)


#: BigQuery's overflow-safe arithmetic: NULL where the plain operation overflows, else the same value
_SAFE_ARITHMETIC: dict[type[exp.Expr], type[exp.Binary]] = {
    exp.SafeAdd: exp.Add,
    exp.SafeSubtract: exp.Sub,
    exp.SafeMultiply: exp.Mul,
}


def _operand(node: exp.Expr) -> exp.Expr:
    """``node`` as an operand: parenthesized unless it is one term (``safe_multiply(a + 1, b)``)."""
    return node if isinstance(node, exp.Column | exp.Literal | exp.Func | exp.Paren) else exp.paren(node, copy=False)


#: Snowflake's typed timestamp constructors sqlglot passes through, and the DuckDB type each gives
_SNOWFLAKE_TIMESTAMPS = {
    "TO_TIMESTAMP_NTZ": "TIMESTAMP",
    "TO_TIMESTAMP_LTZ": "TIMESTAMPTZ",
    "TO_TIMESTAMP_TZ": "TIMESTAMPTZ",
}
#: what is left of a format once its time parts are taken out: separators only
_FORMAT_REST = re.compile(r"%.")


def _time_format(fmt: str, read: str) -> str | None:
    """A ``to_char`` format of ``read`` as strftime's, when every letter of it is a date or time part (a
    number format, ``'999.99'``, is None)."""
    dialect = Dialect.get_or_raise(read)
    mapped = format_time(fmt, dialect.TIME_MAPPING, dialect.TIME_TRIE)
    if not mapped or "%" not in mapped or re.search(r"[A-Za-z0-9]", _FORMAT_REST.sub("", mapped)):
        return None
    return mapped


def _with_quarter(value: exp.Expr, fmt: str) -> exp.Expr:
    """``strftime(value, fmt)`` where ``fmt`` holds BigQuery's ``%Q`` (the quarter, 1-4), which DuckDB's
    strftime lacks: the format's other pieces formatted as before, joined with ``quarter(value)`` as text."""
    parts: list[exp.Expr] = []
    for i, piece in enumerate(fmt.split("%Q")):
        if i:
            parts.append(exp.cast(exp.func("quarter", value.copy()), "TEXT"))
        if piece:
            parts.append(exp.TimeToStr(this=value.copy(), format=exp.Literal.string(piece)))
    out = parts[0]
    for part in parts[1:]:
        out = exp.DPipe(this=out, expression=part, safe=True)
    return exp.paren(out, copy=False) if len(parts) > 1 else out


#: BigQuery's ``extract(date | time | datetime from ts)``: the part of a timestamp as a value of that type,
#: which DuckDB's extract does not name (it refused "extract specifier date not recognized")
_EXTRACT_AS_CAST = {"DATE": "DATE", "TIME": "TIME", "DATETIME": "TIMESTAMP"}


def _rewrite(node: exp.Expr, read: str) -> exp.Expr:
    new: exp.Expr
    fmt = node.args.get("format") if isinstance(node, exp.ToChar) else None
    if isinstance(fmt, exp.Literal) and fmt.is_string and (strftime := _time_format(fmt.name, read)):
        new = exp.TimeToStr(this=node.this.copy(), format=exp.Literal.string(strftime))
    elif (
        isinstance(node, exp.TimeToStr) and isinstance(fmt := node.args.get("format"), exp.Literal) and "%Q" in fmt.name
    ):
        new = _with_quarter(node.this, fmt.name)
    elif isinstance(node, exp.Anonymous) and node.name.upper() in _SNOWFLAKE_TIMESTAMPS and len(node.expressions) == 1:
        (arg,) = node.expressions
        to = _SNOWFLAKE_TIMESTAMPS[node.name.upper()]
        numeric = isinstance(arg, exp.Binary | exp.Extract | exp.Anonymous) and not isinstance(arg, exp.DPipe)
        numeric = numeric or (isinstance(arg, exp.Literal) and not arg.is_string) or isinstance(arg, exp.Cast)
        new = exp.cast(exp.func("to_timestamp", arg.copy()) if numeric else arg.copy(), to)
    elif isinstance(node, exp.Extract) and isinstance(node.this, exp.Var) and node.this.name.upper() == "ISOWEEK":
        new = exp.Extract(this=exp.var("WEEK"), expression=node.expression.copy())  # DuckDB's week is ISO's
    elif (
        read == "bigquery"
        and isinstance(node, exp.Extract)
        and isinstance(node.this, exp.Var)
        and node.this.name.upper() in _EXTRACT_AS_CAST
    ):
        new = exp.cast(node.expression.copy(), _EXTRACT_AS_CAST[node.this.name.upper()])
    elif isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Limit):
        limit = node.this
        aggregate = node.copy()
        aggregate.set("this", limit.this.copy())
        new = exp.Bracket(
            this=exp.paren(aggregate, copy=False),
            expressions=[exp.Slice(this=exp.Literal.number(1), expression=limit.expression.copy())],
        )
    elif read == "bigquery" and isinstance(node, exp.DateTrunc):
        inner = node.copy()
        inner.comments = None
        new = exp.cast(inner, "DATE")
    elif type(node) in _SAFE_ARITHMETIC:
        operation = _SAFE_ARITHMETIC[type(node)](this=_operand(node.this), expression=_operand(node.expression))
        new = exp.paren(operation, copy=False)
    elif isinstance(node, exp.SafeNegate):
        new = exp.paren(exp.Neg(this=_operand(node.this)), copy=False)
    elif isinstance(node, exp.CurrentDatetime):
        new = _zoned_now(node.this or exp.Literal.string("UTC"), "TIMESTAMP")
    elif isinstance(node, exp.CurrentTime) and node.this is not None:
        new = _zoned_now(node.this, "TIME")
    else:
        return node
    new.add_comments(node.comments)  # a Jinja block's marker may be attached to the call: it must stay
    return new


#: characters a line-based patch reads as a line break although the SQL holds them inside a string
_BREAKS = re.compile("([\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029])")
_STRING = re.compile(r"'(?:[^']|'')*'")


def _spelled(literal: str) -> str:
    """A quoted string holding line-break characters other than ``\\n`` as the same string built with
    ``chr()``, in parentheses."""
    pieces = [p for p in _BREAKS.split(literal[1:-1]) if p]
    parts = [f"CHR({ord(p)})" if _BREAKS.fullmatch(p) else f"'{p}'" for p in pieces]
    return "(" + " || ".join(parts) + ")"


def spell_breaks(sql: str) -> str:
    """``sql`` (DuckDB text sqlglot wrote) with each string literal that holds a line break other than
    ``\\n`` spelled with ``chr()``. sqlglot writes BigQuery's ``initcap`` for DuckDB with a literal carriage
    return and form feed, and a patch, split into lines as git and Python split them, cannot carry those
    whole: the port of a real project's model was a truncated hunk."""
    return _STRING.sub(lambda m: _spelled(m.group(0)) if _BREAKS.search(m.group(0)) else m.group(0), sql)


#: dialects where a projection that casts a column (``zipcode::text``, ``cast(zipcode as text)``) is named
#: after the column, as Postgres names it; DuckDB names it ``CAST(zipcode AS VARCHAR)``
_CAST_KEEPS_NAME = ("postgres", "redshift")


def _name_casts(tree: exp.Expr) -> None:
    """Give each unaliased projection that casts a column the column's name, as the source dialect does: a
    model downstream reads ``zipcode`` where DuckDB's output named it ``CAST(zipcode AS VARCHAR)``."""
    for select in tree.find_all(exp.Select):
        for projection in list(select.expressions):
            if isinstance(projection, exp.Cast) and isinstance(projection.this, exp.Column):
                projection.replace(exp.alias_(projection.copy(), projection.this.name, quoted=False))


def fix(tree: exp.Expr, read: str) -> exp.Expr:
    """``tree`` (parsed as ``read``) with the calls DuckDB lacks rewritten; unchanged when ``read`` is DuckDB."""
    if read == "duckdb":
        return tree
    for node in reversed(list(tree.walk(bfs=False))):  # innermost first: a rewritten call's arguments are done
        new = _rewrite(node, read)
        if new is not node:
            if node is tree:
                return new
            node.replace(new)
    if read in _CAST_KEEPS_NAME:
        _name_casts(tree)
    return tree


def transpile(
    sql: str, read: str, *, pretty: bool = False, unsupported_level: ErrorLevel = ErrorLevel.IGNORE
) -> list[str]:
    """``sqlglot.transpile(sql, read=read, write="duckdb")`` with ``fix`` applied to each statement."""
    return [
        spell_breaks(fix(tree, read).sql(dialect="duckdb", pretty=pretty, unsupported_level=unsupported_level))
        if tree
        else ""
        for tree in sqlglot.parse(sql, read=read)
    ]


def canonical(sql: str, read: str) -> str | None:
    """One statement read as ``read`` and written as DuckDB without comments; None when it does not parse."""
    try:
        tree = sqlglot.parse_one(sql, read=read)
        return fix(tree, read).sql(dialect="duckdb", comments=False) if tree is not None else None
    except Exception:  # sqlglot raises more than its own errors on some SQL
        return None


__all__ = ["canonical", "fix", "spell_breaks", "transpile"]

"""One model's SQL ported from another warehouse's dialect to DuckDB with sqlglot, its Jinja kept.

A dbt model is SQL with Jinja in it. The Jinja is the project's (refs, sources, macros, config) and is kept
byte for byte: the leading and trailing lines that are Jinja alone (``{{ config(...) }}``, ``{% set %}``)
stay where they are, and each ``{{ ... }}`` inside the SQL is masked as a placeholder identifier while
sqlglot transpiles the SQL around it, then put back. Comment lines around the SQL stay too. A model whose SQL reads the same in DuckDB is left
untouched (no edit), so a port only rewrites what does not run there. sqlglot's DuckDB reader is lenient: it
reads calls DuckDB lacks as ones it has (Snowflake's ``nvl`` as ``coalesce``), so SQL that calls a name its
DuckDB text does not hold is ported.

Jinja blocks inside the SQL (``{% if is_incremental() %}``) are left out only to tell whether the SQL needs
porting (both branches read as SQL); a model whose SQL then reads the same in DuckDB, or cannot be read as one
statement, is left as it is (its build decides). SQL that needs porting across ``{% if %}`` blocks is ported
whole and proved rendered both ways (``blocks.py``). A model is refused (``PortRefused``, naming it) when:
- a Jinja block sits inside SQL that needs porting and the port cannot be proved (another block shape, or
  no place for the block in the ported SQL reads as the original);
- sqlglot cannot parse it in the source dialect;
- sqlglot reports a construct it cannot express in DuckDB (``unsupported_level=RAISE``): porting it would
  change its meaning;
- a masked Jinja expression does not come back exactly once.

Pure: text in, text out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot.errors import ErrorLevel, ParseError, TokenError, UnsupportedError
from sqlglot.tokens import Token, TokenType

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.task_record import PORT_DIALECTS
from dbt_harvest.harvester.port.blocks import BlockPortError, port_blocks
from dbt_harvest.harvester.port.fixes import transpile

#: the dialects a project can be ported from (sqlglot's names)
DIALECTS = PORT_DIALECTS

_PLACEHOLDER = "__harvest_jinja_{}__"
_CLOSE = {"{{": "}}", "{%": "%}", "{#": "#}"}
#: an expression that renders no SQL where it stands: it may frame the SQL as a statement does
_CONFIG = re.compile(r"^\{\{-?\s*config\s*\(", re.S)


def tags(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of every Jinja tag in ``text``. A ``{{ }}`` or ``{% %}`` ends, as Jinja's lexer
    ends it, at the first closing marker outside a quoted string and outside brackets, so a string holding
    ``{{ this }}`` (a hook in a config) and a nested mapping closing ``}}`` (BigQuery's ``partition_by``) stay
    inside their tag; a ``{# #}`` ends at the first ``#}``. An unclosed tag runs to the end."""
    out: list[tuple[int, int]] = []
    i = 0
    while True:
        start = min((j for j in (text.find(o, i) for o in _CLOSE) if j >= 0), default=-1)
        if start < 0:
            return out
        close = _CLOSE[text[start : start + 2]]
        j, quote, depth = start + 2, "", 0
        while j < len(text):
            c = text[j]
            if close != "#}" and quote:
                quote = "" if c == quote else quote
            elif close != "#}" and c in "'\"":
                quote = c
            elif text.startswith(close, j) and depth == 0:
                j += 2
                break
            elif close != "#}" and c in "([{":
                depth += 1
            elif close != "#}" and c in ")]}":
                depth = max(0, depth - 1)
            j += 1
        out.append((start, min(j, len(text))))
        i = j


def _sub_tags(text: str, replace: Callable[[str], str]) -> str:
    pieces, last = [], 0
    for start, end in tags(text):
        pieces += [text[last:start], replace(text[start:end])]
        last = end
    return "".join(pieces) + text[last:]


def _is_block(tag: str) -> bool:
    return tag.startswith("{%")


_OPENS = re.compile(r"^\{%-?\s*(if|for|macro|call|filter|raw)\b")
_CLOSES = re.compile(r"^\{%-?\s*end(if|for|macro|call|filter|raw)\b")


def _balance(text: str) -> int:
    """Blocks ``text`` opens minus blocks it closes."""
    spans = [text[a:b] for a, b in tags(text)]
    return sum(1 for t in spans if _OPENS.match(t)) - sum(1 for t in spans if _CLOSES.match(t))


class PortRefused(HarvestError):
    """A model that cannot be ported without changing what it means (the message names it and why)."""


@dataclass(frozen=True)
class Masked:
    """A model split into its Jinja-only head and tail and the SQL between, with each ``{{ }}`` masked."""

    head: str
    sql: str
    tail: str
    jinja: tuple[str, ...]  # the masked expressions, in placeholder order

    def unmask(self, sql: str, model: str) -> str:
        out = sql
        for i, text in enumerate(self.jinja):
            name = _PLACEHOLDER.format(i)
            # found as a substring: an expression inside a name (``nb_{{ field }}s``) is masked inside one
            # identifier; the placeholders' digits are closed by underscores, so one never holds another.
            # A copy is kept: an expression renders the same SQL wherever it stands, and sqlglot writes some
            # calls DuckDB lacks with their argument repeated (``initcap({{ clean_text('city') }})``)
            if out.count(name) < 1:
                raise PortRefused(f"{model}: porting lost a Jinja expression ({text[:60]})")
            # an expression after a table (``from {{ ref('x') }} {{ incremental_filter() }}``) reads as its
            # alias, and sqlglot writes ``AS`` before it: the SQL it renders would follow an ``AS``
            aliased = re.compile(rf"\bAS\s+{name}", re.IGNORECASE)
            if aliased.search(out) and not aliased.search(self.sql):
                out = aliased.sub(name, out)
            out = out.replace(name, text)
        return self.head + out + self.tail


def _frame_lines(lines: list[str], start: int, step: int, stop: int) -> int:
    """How far from ``start`` (towards ``stop``, by ``step``) the lines hold no SQL: blank (their Jinja blanked
    out by the caller, so a tag over several lines counts), or comments (``--`` lines, ``/* */`` blocks), which
    stay as they are; the index of the first SQL line."""
    i = start
    in_block = False
    while i != stop:
        text = lines[i].strip()
        if in_block:
            in_block = ("*/" not in text) if step > 0 else ("/*" not in text)
        elif not text or text.startswith("--"):
            pass
        elif step > 0 and text.startswith("/*"):
            in_block = "*/" not in text
        elif step < 0 and text.endswith("*/"):
            in_block = "/*" not in text
        else:
            break
        i += step
    return i


def mask(text: str) -> Masked:
    """Split ``text`` (see ``Masked``). The head and tail hold lines without SQL: blank, comments, blocks
    (``{% %}``), Jinja comments and ``config()``; an expression that renders SQL (``{{ ref() }}`` on a
    line of its own) belongs to the SQL. Inside the SQL, Jinja comments are dropped (they render nothing)
    and blocks are left as they are."""
    lines = text.splitlines(keepends=True)

    def frame(tag: str) -> str:  # a tag that renders no SQL, blanked but for its line breaks
        renders = tag.startswith("{{") and not _CONFIG.match(tag)
        return tag if renders else re.sub(r"[^\n]", " ", tag)

    blank = _sub_tags(text, frame).splitlines(keepends=True)
    start = _frame_lines(blank, 0, 1, len(blank))
    end = _frame_lines(blank, len(blank) - 1, -1, start - 1) + 1
    # a block opened in the SQL and closed in the frame (or the other way) belongs to the SQL with its pair
    while end < len(lines) and _balance("".join(lines[start:end])) > 0:
        end += 1
    while start > 0 and _balance("".join(lines[start:end])) < 0:
        start -= 1
    head, body, tail = "".join(lines[:start]), "".join(lines[start:end]), "".join(lines[end:])
    jinja: list[str] = []

    def placeholder(tag: str) -> str:
        if tag.startswith("{#"):
            return ""
        if not tag.startswith("{{"):
            return tag
        jinja.append(tag)
        return _PLACEHOLDER.format(len(jinja) - 1)

    return Masked(head, _sub_tags(body, placeholder), tail, tuple(jinja))


def _read(sql: str, dialect: str) -> str | None:
    """``sql`` read in ``dialect`` and written as DuckDB; None when it does not parse there."""
    try:
        statements = transpile(sql, dialect)
    except Exception:  # sqlglot raises more than its own errors on SQL it reads wrongly (an AttributeError)
        return None
    return ";\n".join(statements)


def _token_pairs(sql: str, dialect: str) -> list[tuple[Token, Token]]:
    """Each pair of neighbouring tokens of ``sql`` read with ``dialect``'s tokenizer; none when it cannot
    read it (unreadable SQL is refused by the transpile itself)."""
    try:
        return list(itertools.pairwise(sqlglot.Dialect.get_or_raise(dialect).tokenize(sql)))
    except Exception:
        return []


def called_names(sql: str, dialect: str) -> set[str]:
    """The names ``sql`` calls (a word before ``(``), upper-cased, read with ``dialect``'s tokenizer."""
    return {a.text.upper() for a, b in _token_pairs(sql, dialect) if b.token_type == TokenType.L_PAREN}


def cast_type_names(sql: str, dialect: str) -> set[str]:
    """The type names ``sql`` casts to with ``::`` (the word after it), upper-cased."""
    return {b.text.upper() for a, b in _token_pairs(sql, dialect) if a.token_type == TokenType.DCOLON}


#: type names DuckDB itself reads (a cast to one of them needs no port)
DUCKDB_TYPE_NAMES = frozenset(
    [
        "BIGINT",
        "BIT",
        "BLOB",
        "BOOL",
        "BOOLEAN",
        "BPCHAR",
        "BYTEA",
        "CHAR",
        "DATE",
        "DATETIME",
        "DECIMAL",
        "DOUBLE",
        "FLOAT",
        "FLOAT4",
        "FLOAT8",
        "HUGEINT",
        "INT",
        "INT1",
        "INT2",
        "INT4",
        "INT8",
        "INTEGER",
        "INTERVAL",
        "JSON",
        "LONG",
        "NUMERIC",
        "REAL",
        "SHORT",
        "SIGNED",
        "SMALLINT",
        "STRING",
        "TEXT",
        "TIME",
        "TIMESTAMP",
        "TIMESTAMPTZ",
        "TINYINT",
        "UBIGINT",
        "UHUGEINT",
        "UINTEGER",
        "USMALLINT",
        "UTINYINT",
        "UUID",
        "VARBINARY",
        "VARCHAR",
    ]
)


def _words(sql: str) -> set[str]:
    return {word.upper() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}


def port_model(text: str, dialect: str, model: str) -> str | None:
    """``text`` ported from ``dialect`` to DuckDB, or None when it already reads the same in DuckDB."""
    if dialect not in DIALECTS:
        raise PortRefused(f"cannot port from {dialect!r}: one of {', '.join(DIALECTS)}")
    masked = mask(text)
    if not masked.sql.strip():
        return None
    blocks = any(_is_block(masked.sql[a:b]) for a, b in tags(masked.sql))
    # a block's branches both read as SQL: only to tell what needs porting
    sql = _sub_tags(masked.sql, lambda tag: " " if _is_block(tag) else tag)
    try:  # read as the source dialect first: a construct sqlglot cannot express in DuckDB is refused
        statements = transpile(sql, dialect, pretty=True, unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as exc:
        raise PortRefused(f"{model}: sqlglot cannot express it in DuckDB ({str(exc).splitlines()[0]})") from None
    except (ParseError, TokenError, ValueError, AttributeError, TypeError, KeyError) as exc:
        if blocks:
            return None  # its blocks' branches do not read as one statement: left as it is, the build decides
        raise PortRefused(f"{model}: sqlglot cannot read it as {dialect} ({str(exc).splitlines()[0][:120]})") from None
    native = _read(sql, "duckdb")
    # DuckDB reads it as the source dialect does: nothing to port, unless sqlglot's DuckDB reader took a call
    # DuckDB lacks for one it has (Snowflake's ``nvl`` reads as ``coalesce`` there; BigQuery's
    # ``current_timestamp()`` as the keyword DuckDB calls without parentheses): a name the SQL calls that the
    # DuckDB text does not call is ported
    # the same holds for a type: it reads Snowflake's ``::timestampntz`` as a TIMESTAMP, a type DuckDB
    # itself does not name
    if (
        native is not None
        and native == _read(sql, dialect)
        and called_names(sql, dialect) <= called_names(native, "duckdb")
        and cast_type_names(sql, dialect) - DUCKDB_TYPE_NAMES <= _words(native)
    ):
        return None
    if blocks:
        spans = [(a, b) for a, b in tags(masked.sql) if _is_block(masked.sql[a:b])]
        try:
            ported = port_blocks(masked.sql, spans, dialect, model)
        except BlockPortError as exc:
            raise PortRefused(
                f"{model}: a Jinja block inside SQL that needs porting from {dialect}: {exc} (port it by hand)"
            ) from None
        return masked.unmask(ported + ("\n" if masked.sql.endswith("\n") else ""), model)
    if len(statements) != 1:
        raise PortRefused(f"{model}: {len(statements)} statements where a model holds one")
    ported = statements[0] + ("\n" if masked.sql.endswith("\n") else "")
    return masked.unmask(ported, model)


__all__ = ["DIALECTS", "Masked", "PortRefused", "called_names", "mask", "port_model", "tags"]

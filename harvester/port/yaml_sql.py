"""The SQL a project's YAML holds for its tests, ported to DuckDB, the rest of the file kept.

A project written for a warehouse writes that warehouse's SQL into its test arguments too: an
``expression_is_true`` expression, a test's ``where`` or ``row_condition``, an ``accepted_range`` bound
(``min_value: "date_sub(current_date(), interval 1 year)"``), a snapshot's ``dbt_valid_to_current``
(``"to_date('9999-12-31')"``). Porting the models alone left these to fail on
DuckDB, so the project's own tests failed on data that meets them. Each single-line value of those keys that
reads as an expression of the source dialect and reads otherwise in DuckDB (or calls a function DuckDB lacks)
is rewritten to sqlglot's DuckDB text for it (``fixes`` applied). Only the value changes; its key,
indentation and any comment stay, and it is quoted so that YAML reads back exactly the ported text. A value
holding Jinja, a number, a block scalar or text sqlglot cannot read is left as written.

Pure: text in, text out.
"""

from __future__ import annotations

import re

import sqlglot

from dbt_harvest.harvester.port.fixes import canonical, fix
from dbt_harvest.harvester.port.transpile import called_names

#: test arguments and configs whose value is SQL
SQL_KEYS = ("expression", "where", "row_condition", "condition", "min_value", "max_value", "dbt_valid_to_current")
_LINE = re.compile(
    r"^(?P<head>\s*(?:-\s+)?(?:" + "|".join(SQL_KEYS) + r"):[ \t]+)"
    r"(?:(?P<q>['\"])(?P<quoted>.*)(?P=q)|(?P<plain>[^'\"\s#|>{\[&*!%@`][^#\r\n]*?))"
    r"(?P<tail>[ \t]*(?:#.*)?\r?\n?)$"
)
_NUMBER = re.compile(r"[-+]?\d+(\.\d*)?([eE][-+]?\d+)?")
_PLAIN_SAFE = re.compile(r"[^:#'\"]*")


def port_expression(value: str, dialect: str) -> str | None:
    """``value`` (an expression written for ``dialect``) as DuckDB reads it, or None when it needs no port."""
    if "{{" in value or "{%" in value or _NUMBER.fullmatch(value.strip()):
        return None
    try:
        tree = sqlglot.parse_one(value, read=dialect)
    except Exception:  # sqlglot raises more than its own errors on text that is no expression
        return None
    if tree is None:
        return None
    try:
        ported = fix(tree, dialect).sql(dialect="duckdb")
    except Exception:
        return None
    if canonical(value, "duckdb") == ported and called_names(value, dialect) <= called_names(ported, "duckdb"):
        return None
    return ported


def _unquote(quote: str, raw: str) -> str | None:
    if quote == "'":
        return raw.replace("''", "'")
    if quote == '"':
        return None if "\\" in raw else raw
    return raw


def _requote(text: str, quote: str) -> str:
    """``text`` as a YAML scalar that reads back as ``text``, in the value's own quotes where they can hold it."""
    if quote == "'":
        return "'" + text.replace("'", "''") + "'"
    if quote == '"' and '"' not in text and "\\" not in text:
        return f'"{text}"'
    if _PLAIN_SAFE.fullmatch(text) and text == text.strip() and not text.startswith(("-", "?", "[", "{", "%", "@")):
        return text
    if '"' not in text and "\\" not in text:
        return f'"{text}"'
    return "'" + text.replace("'", "''") + "'"


def port_test_sql(text: str, dialect: str) -> str | None:
    """``text`` (a YAML file) with the SQL of its tests' arguments ported from ``dialect``; None when none
    changes."""
    out, changed = [], False
    for line in text.splitlines(keepends=True):
        match = _LINE.match(line)
        if match:
            quote = match["q"] or ""
            value = _unquote(quote, match["quoted"] if quote else match["plain"])
            ported = port_expression(value, dialect) if value else None
            if ported is not None:
                line = f"{match['head']}{_requote(ported, quote)}{match['tail']}"
                changed = True
        out.append(line)
    return "".join(out) if changed else None


__all__ = ["SQL_KEYS", "port_expression", "port_test_sql"]

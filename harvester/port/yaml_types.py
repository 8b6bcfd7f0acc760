"""The ``data_type`` values of a project's YAML ported to DuckDB's type names, the rest of the file kept.

A model with an enforced contract is built by dbt around ``cast(null as <data_type>)``, so a contract written
for BigQuery (``data_type: float64``) fails on DuckDB, which has no such type, although the model's SQL is
ported. Each ``data_type:`` line whose value is a type sqlglot reads in the source dialect is rewritten to
sqlglot's DuckDB name for it, when that name does not hold the value's words already (``float64`` becomes
``DOUBLE``, Snowflake's ``number(38, 0)`` becomes ``DECIMAL(38, 0)``; ``date`` stays as written). Only the
value changes: its key, quotes, indentation and any comment stay byte for byte, and a value holding Jinja or
one sqlglot cannot read is left as written.

Pure: text in, text out.
"""

from __future__ import annotations

import re

from sqlglot import exp

_LINE = re.compile(
    r"^(?P<head>\s*(?:-\s+)?data_type:[ \t]*)(?P<quote>['\"]?)(?P<value>[^'\"#{}\r\n]*?[^'\"#{}\s])"
    r"(?P=quote)(?P<tail>[ \t]*(?:#.*)?\r?\n?)$"
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def port_type(value: str, dialect: str) -> str | None:
    """``value`` (a type written for ``dialect``) as DuckDB names it, or None when it needs no port."""
    try:
        ported = exp.DataType.build(value, dialect=dialect).sql(dialect="duckdb")
    except Exception:  # sqlglot raises more than its own errors on text that is no type
        return None
    words = {word.upper() for word in _WORD.findall(value)}
    return None if words <= {word.upper() for word in _WORD.findall(ported)} else ported


def port_data_types(text: str, dialect: str) -> str | None:
    """``text`` (a YAML file) with its ``data_type`` values ported from ``dialect``; None when none changes."""
    out, changed = [], False
    for line in text.splitlines(keepends=True):
        match = _LINE.match(line)
        ported = port_type(match["value"], dialect) if match else None
        if match and ported is not None:
            line = f"{match['head']}{match['quote']}{ported}{match['quote']}{match['tail']}"
            changed = True
        out.append(line)
    return "".join(out) if changed else None


__all__ = ["port_data_types", "port_type"]

"""Permission statements a warehouse project runs from its hooks, dropped for DuckDB.

Projects written for Postgres, Snowflake or Redshift grant their readers access after each build: a
``post-hook: "grant select on {{ this }} to reporting"``, an ``on-run-end`` that grants usage on every schema
the run built, or a project macro that does either through ``run_query``. DuckDB has no roles and no
``GRANT``, so the first such hook failed the whole build ("syntax error at or near grant"), and since dbt
runs ``on-run-end`` after ``dbt seed`` too, synthesis could not even compile the models to read their SQL.
A permission changes who may read a relation, never what it holds, so dropping it changes no data.

``drop_permissions`` rewrites a file's quoted (or plain YAML) strings, and ``drop_permission_macros`` the
bodies of a macro file, that hold permission statements and nothing else (Jinja tags aside: a ``{% for %}``
over the run's schemas still only grants), to ``select 1``: a hook that runs and does nothing. A string or
body that holds anything else besides (``analyze {{ this }}; grant ...``) is left as written for the build
to decide, since cutting a statement out of it could change what the rest does.

Pure: text in, text out.
"""

from __future__ import annotations

import re

#: what a dropped hook or macro runs instead: valid SQL everywhere, and nothing happens
NO_OP = "select 1"

_JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)
_JINJA_STATEMENT = re.compile(r"\{%.*?%\}", re.DOTALL)
_JINJA_EXPRESSION = re.compile(r"\{\{.*?\}\}", re.DOTALL)
#: a statement that changes who may do what, and nothing else
_PERMISSION = re.compile(
    r"^grant\s.*?\b(?:on|role)\b.*\sto\s+\S"
    r"|^revoke\s.*?\b(?:on|role)\b.*\sfrom\s+\S"
    r"|^alter\s+(?:table|view|schema|database|materialized\s+view|sequence|function)\s.*\sowner\s+to\s",
    re.IGNORECASE | re.DOTALL,
)
#: a quoted string on one line (the content holds neither its quote nor a line break)
_QUOTED = re.compile(r"(?P<q>[\"'])(?P<body>[^\"'\r\n]+)(?P=q)")
#: a YAML line whose value is a plain (unquoted) scalar: ``post-hook: grant ...`` or ``- grant ...``
_PLAIN = re.compile(r"^(?P<head>\s*(?:-\s+|[+\w-]+:\s+))(?P<body>[^\"'\s#][^#\r\n]*?)(?P<tail>\s*(?:#.*)?)$")
#: a macro block of a macro file: head, body and end
_MACRO = re.compile(
    r"(?P<head>\{%-?\s*macro\s+\w+\s*\(.*?\)\s*-?%\})(?P<body>.*?)(?P<end>\{%-?\s*endmacro\s*-?%\})", re.DOTALL
)


def permissions_only(sql: str) -> bool:
    """Whether ``sql`` (a hook or a macro body, Jinja and all) holds one or more permission statements and no
    other SQL. Jinja statements separate statements; a Jinja expression stands for a name."""
    text = _JINJA_COMMENT.sub(" ", sql)
    text = _JINJA_STATEMENT.sub(";", text)
    text = _JINJA_EXPRESSION.sub("harvest_name", text)
    parts = [part.strip() for part in text.split(";") if part.strip()]
    return bool(parts) and all(_PERMISSION.match(part) for part in parts)


def drop_permissions(text: str) -> str | None:
    """``text`` (dbt_project.yml, a properties YAML or a model file) with every string that holds permission
    statements alone made ``select 1``; None when there is none. Everything else stays byte for byte."""
    out = _QUOTED.sub(lambda m: m["q"] + NO_OP + m["q"] if permissions_only(m["body"]) else m[0], text)
    lines = []
    for line in out.splitlines(keepends=True):
        end = len(line.rstrip("\r\n"))
        m = _PLAIN.match(line[:end])
        if m and permissions_only(m["body"]):
            line = m["head"] + NO_OP + m["tail"] + line[end:]
        lines.append(line)
    out = "".join(lines)
    return out if out != text else None


def drop_permission_macros(text: str) -> str | None:
    """``text`` (a macro file) with the body of each macro that only grants (a ``{% set sql %}grant ...
    {% endset %}{% do run_query(sql) %}`` included) made ``select 1``; None when there is none."""
    out = _MACRO.sub(lambda m: m["head"] + NO_OP + m["end"] if permissions_only(m["body"]) else m[0], text)
    return out if out != text else None


__all__ = ["NO_OP", "drop_permission_macros", "drop_permissions", "permissions_only"]

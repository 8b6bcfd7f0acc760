"""Tables a warehouse model reads by name, made declared sources, so that synthesized data can hold them.

A model written for a warehouse often reads its raw tables by their qualified name (``from
LOGISTICS.RAW.CUSTOMERS``) instead of through ``source()``. On a pin's one DuckDB database that name is a
catalog that does not exist, and synthesis, which makes data for declared sources, never hears of the
table. Each such name (two or three parts, read as a table by sqlglot in the model's dialect, never a CTE)
is written as ``{{ source('<name>', '<table>') }}``, and one new properties file declares those sources
(``SOURCES_FILE``), a source per schema. The project's own names are kept: the source is named by the
schema (``<database>_<schema>`` where two databases share a schema name, ``harvest_`` before it where the
project has a source of that name already) and its table by the name the model used, lower-cased, as
DuckDB reads an unquoted name.

Pure: text in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import sqlglot
from sqlglot import exp

from dbt_harvest.harvester.port.transpile import mask

SOURCES_FILE = "_harvest_port_sources.yml"
_PART = r"(?:\"[^\"]+\"|`[^`]+`|[A-Za-z_][\w$]*)"
_NAMED = re.compile(rf"(?i)\b(?P<kw>from|join)(?P<gap>\s+)(?P<name>{_PART}(?:\.{_PART}){{1,2}})(?![\w.$(\"`])")


def _unquote(part: str) -> str:
    return part[1:-1] if part[:1] in '"`' else part


def _parts(name: str) -> tuple[str, ...]:
    return tuple(_unquote(p).lower() for p in re.findall(_PART, name))


def read_tables(text: str, dialect: str) -> set[tuple[str, ...]]:
    """The qualified tables (``(database, schema, table)`` or ``(schema, table)``, lower-cased) the model
    reads by name; empty when its SQL does not parse."""
    masked = mask(text)
    try:
        tree = sqlglot.parse_one(re.sub(r"\{%.*?%\}", " ", masked.sql, flags=re.S), read=dialect)
    except Exception:  # sqlglot raises more than its own errors on SQL it reads wrongly
        return set()
    if tree is None:
        return set()
    found = set()
    for table in tree.find_all(exp.Table):
        if table.args.get("db") is not None and not table.name.startswith("__harvest_jinja_"):
            parts = [table.catalog, table.db, table.name] if table.catalog else [table.db, table.name]
            found.add(tuple(p.lower() for p in parts))
    return found


def source_names(tables: Iterable[tuple[str, ...]], taken: Iterable[str] = ()) -> dict[tuple[str, ...], str]:
    """The source each table is declared under: its schema's name, or ``<database>_<schema>`` where two
    databases hold that schema, prefixed ``harvest_`` where the project already has a source of that name."""
    tables = sorted(set(tables))
    databases: dict[str, set[str]] = {}
    for parts in tables:
        databases.setdefault(parts[-2], set()).add(parts[0] if len(parts) == 3 else "")
    used = {t.lower() for t in taken}
    out = {}
    for parts in tables:
        schema = parts[-2]
        name = f"{parts[0]}_{schema}" if len(databases[schema]) > 1 and len(parts) == 3 else schema
        name = re.sub(r"[^a-z0-9_]+", "_", name)
        out[parts] = f"harvest_{name}" if name in used else name
    return out


def as_sources(text: str, tables: set[tuple[str, ...]], names: dict[tuple[str, ...], str]) -> str | None:
    """``text`` with each ``from``/``join`` of a name in ``tables`` written as ``source()``; None when none."""

    def sub(m: re.Match[str]) -> str:
        parts = _parts(m["name"])
        if parts not in tables:
            return m.group(0)
        return f"{m['kw']}{m['gap']}{{{{ source('{names[parts]}', '{parts[-1]}') }}}}"

    out = _NAMED.sub(sub, text)
    return out if out != text else None


def sources_yaml(names: dict[tuple[str, ...], str]) -> str:
    """The properties file declaring every source ``names`` maps to (its schema and, for a three-part
    name, its database as the model named them)."""
    by_source: dict[str, list[tuple[str, ...]]] = {}
    for parts, name in sorted(names.items()):
        by_source.setdefault(name, []).append(parts)
    lines = ["version: 2", "sources:"]
    for name, tables in sorted(by_source.items()):
        lines += [f"  - name: {name}", f"    schema: {tables[0][-2]}", "    tables:"]
        lines += [f"      - name: {parts[-1]}" for parts in sorted(set(tables), key=lambda p: p[-1])]
    return "\n".join(lines) + "\n"


__all__ = ["SOURCES_FILE", "as_sources", "read_tables", "source_names", "sources_yaml"]

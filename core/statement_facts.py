"""Facts a completion statement states about the expected table, and whether a table contradicts them.

A completion task's statement was the project's own documentation, and real projects' documentation leaves
open what is graded: a filter nobody wrote down decides the row set, a left join keeps parents without
children, a name is ``concat(name, ' ', surname)`` in an order no sentence gives. The facts close that gap
the way a colleague handing the work over would, from the expected table itself (the gold and the
manifest, never the SQL text):

- its row count, and its grain (columns that are unique together);
- each graded column's type (a family: integer, number, text, date, timestamp, boolean) and whether it
  holds nulls;
- a few example rows chosen to show boundary cases (a null, a zero, the smallest and largest values, a
  text value with separators);
- the values the project's ``accepted_values`` tests allow.

This module holds the record (frozen, JSON round-trip), its words, and the pure check that a table (its
rows as Python values) contradicts a fact: the mint uses it to prove that every informative wrong
completion is ruled out by the statement (``harvester.mint.facts`` reads the tables), and
``harvest tasks verify`` re-checks that the gold satisfies every fact.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the scorer's absolute tolerance: an example's number matches a value within it
ABS_TOL = 0.01
#: the type families a fact names
_FAMILIES = (
    (re.compile(r"^(U?TINYINT|U?SMALLINT|U?INTEGER|U?BIGINT|U?HUGEINT|INT\d*|UINT\d*)$", re.I), "integer"),
    (re.compile(r"^(DOUBLE|FLOAT|REAL|DECIMAL.*|NUMERIC.*)$", re.I), "number"),
    (re.compile(r"^(VARCHAR.*|TEXT|STRING|CHAR.*)$", re.I), "text"),
    (re.compile(r"^DATE$", re.I), "date"),
    (re.compile(r"^TIMESTAMP.*$", re.I), "timestamp"),
    (re.compile(r"^(BOOLEAN|BOOL)$", re.I), "boolean"),
)
_ARTICLE = {"integer": "an integer", "number": "a number", "text": "text", "date": "a date", "timestamp": "a timestamp"}

#: the facts' fixed sentences (the contamination lint discounts them, as the statement templates')
HEADING = "Facts about the expected `{model}` table (from the project's own build of it):"
ROWS = "- It has exactly {rows} rows."
GRAIN_ONE = "- No two rows share `{column}`: one row per `{column}`."
GRAIN_MANY = "- No two rows share the combination of {columns}."
COLUMN = "- `{name}`: {type}, {nulls}."
EXAMPLES = "Example rows (every one of them must be in your table; values of the graded columns):"
ACCEPTED = "- `{name}` only holds {values}."


def type_family(duckdb_type: str) -> str:
    """The family a DuckDB type belongs to (``integer``, ``number``, ``text``, ...; else the type, lowered)."""
    for pattern, family in _FAMILIES:
        if pattern.match(duckdb_type.strip()):
            return family
    return duckdb_type.strip().lower()


def cell(value: Any) -> str | None:
    """One value as the facts write it: None stays None; numbers rounded to 4 places; dates in ISO form."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | decimal.Decimal):
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            return str(number)
        text = f"{round(number, 4):.4f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    if isinstance(value, _dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, _dt.date):
        return value.isoformat()
    return str(value)


def cells_match(stated: str | None, found: Any) -> bool:
    """Whether a value ``found`` in a table is the example's ``stated`` value (numbers within ``ABS_TOL``)."""
    text = cell(found)
    if stated is None or text is None:
        return stated is None and text is None
    if stated == text:
        return True
    try:
        return math.isclose(float(stated), float(text), abs_tol=ABS_TOL)
    except ValueError:
        return False


@dataclass(frozen=True)
class ColumnFact:
    """A graded column: its type family and whether the expected table holds a null in it."""

    name: str
    type: str
    nulls: bool


@dataclass(frozen=True)
class TableFacts:
    """What a completion statement states about one graded table (module docstring)."""

    table: str  # the graded name (the grading spec's condition_tabs entry)
    model: str  # the model's name, as the statement calls it
    rows: int
    grain: tuple[str, ...]  # columns unique together in the expected table (empty: none found)
    columns: tuple[ColumnFact, ...]  # the graded columns, in table order
    examples: tuple[tuple[str | None, ...], ...]  # rows over ``columns``, values as ``cell`` writes them
    accepted: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (column, values its accepted_values test allows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "model": self.model,
            "rows": self.rows,
            "grain": list(self.grain),
            "columns": [{"name": c.name, "type": c.type, "nulls": c.nulls} for c in self.columns],
            "examples": [list(row) for row in self.examples],
            "accepted": [[name, list(values)] for name, values in self.accepted],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableFacts:
        return cls(
            table=str(data["table"]),
            model=str(data["model"]),
            rows=int(data["rows"]),
            grain=tuple(str(c) for c in data.get("grain", ())),
            columns=tuple(ColumnFact(str(c["name"]), str(c["type"]), bool(c["nulls"])) for c in data["columns"]),
            examples=tuple(tuple(None if v is None else str(v) for v in row) for row in data.get("examples", ())),
            accepted=tuple((str(name), tuple(str(v) for v in values)) for name, values in data.get("accepted", ())),
        )


def _escape(value: str | None) -> str:
    return "null" if value is None else value.replace("|", "\\|").replace("\n", " ")


def render(facts: TableFacts) -> str:
    """The facts in words, as a statement section (no trailing newline)."""
    lines = [HEADING.format(model=facts.model), ROWS.format(rows=facts.rows)]
    if len(facts.grain) == 1:
        lines.append(GRAIN_ONE.format(column=facts.grain[0]))
    elif facts.grain:
        lines.append(GRAIN_MANY.format(columns=", ".join(f"`{c}`" for c in facts.grain)))
    for column in facts.columns:
        kind = _ARTICLE.get(column.type, column.type)
        nulls = "some rows hold null" if column.nulls else "never null"
        lines.append(COLUMN.format(name=column.name, type=kind, nulls=nulls))
    for name, values in facts.accepted:
        lines.append(ACCEPTED.format(name=name, values=", ".join(f"'{v}'" for v in values)))
    if facts.examples:
        names = [c.name for c in facts.columns]
        lines += ["", EXAMPLES, "", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
        lines += ["| " + " | ".join(_escape(v) for v in row) + " |" for row in facts.examples]
    return "\n".join(lines)


def templates() -> tuple[str, ...]:
    """Every fixed sentence of the facts (what the contamination lint discounts)."""
    return (HEADING, ROWS, GRAIN_ONE, GRAIN_MANY, COLUMN, EXAMPLES, ACCEPTED)


@dataclass(frozen=True)
class Observed:
    """A table as the check reads it: its column types (by name, lowercased) and its rows over ``names``."""

    types: Mapping[str, str]  # lowercased column name -> DuckDB type
    names: tuple[str, ...]  # the columns ``rows`` hold, lowercased
    rows: Sequence[tuple[Any, ...]]


def contradictions(facts: TableFacts, table: Observed | None) -> tuple[str, ...]:
    """Every stated fact ``table`` contradicts, one short line each (empty: it satisfies all of them).
    ``table`` None: the table is absent, which contradicts the row count."""
    if table is None:
        return (f"`{facts.model}` is absent (stated: {facts.rows} rows)",)
    found: list[str] = []
    if len(table.rows) != facts.rows:
        found.append(f"{len(table.rows)} rows (stated: {facts.rows})")
    index = {name: i for i, name in enumerate(table.names)}
    missing = [c.name for c in facts.columns if c.name.lower() not in index]
    found += [f"no column `{name}`" for name in missing]
    for column in facts.columns:
        i = index.get(column.name.lower())
        if i is None:
            continue
        family = type_family(table.types.get(column.name.lower(), ""))
        if family != column.type:
            found.append(f"`{column.name}` is {family} (stated: {column.type})")
        has_null = any(row[i] is None for row in table.rows)
        if has_null != column.nulls:
            found.append(f"`{column.name}` {'holds' if has_null else 'has no'} nulls (stated otherwise)")
    if facts.grain and all(c.lower() in index for c in facts.grain):
        at = [index[c.lower()] for c in facts.grain]
        keys = [tuple(cell(row[i]) for i in at) for row in table.rows]
        if len(set(keys)) != len(keys):
            found.append(f"rows share {', '.join(facts.grain)} (stated: unique)")
    for name, values in facts.accepted:
        i = index.get(name.lower())
        allowed = set(values)
        if i is not None and any(row[i] is not None and cell(row[i]) not in allowed for row in table.rows):
            found.append(f"`{name}` holds a value outside {', '.join(values)}")
    if not missing:
        at = [index[c.name.lower()] for c in facts.columns]
        for example in facts.examples:
            if not any(all(cells_match(v, row[i]) for v, i in zip(example, at)) for row in table.rows):
                found.append("example row (" + ", ".join(_escape(v) for v in example) + ") is absent")
    return tuple(found)


__all__ = [
    "ABS_TOL",
    "ColumnFact",
    "Observed",
    "TableFacts",
    "cell",
    "cells_match",
    "contradictions",
    "render",
    "templates",
    "type_family",
]

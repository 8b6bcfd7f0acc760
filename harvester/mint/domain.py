"""Wrong repairs that restore a filter with ANOTHER value the data really holds.

"Restore the filter with the wrong value" is the most common wrong fix of a broken status filter, and the
value a person reaches for is one they have seen in the data ('shipped' where 'completed' was meant), not
one the model file happens to spell. The mutators are pure text functions and never read data, so the
mint adds these: for a mutation that removes or rewrites a comparison of a column with a string literal
(``status = 'completed'``), it offers the same comparison with another value of a column of that name in
the pin's gold (sorted, at most ``MAX_VALUES``). Screening then keeps only those that are informative.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from dbt_harvest.core.locked_duckdb import connect_locked
from dbt_harvest.mutators import Mutation, WrongRepair

MAX_VALUES = 2
_COMPARISON = re.compile(r"(?P<col>\b[A-Za-z_][\w.]*)\s*(?P<op>=|!=|<>)\s*'(?P<lit>[^'{}]*)'")
_LEFT_SIDE = re.compile(r"(?P<col>\b[A-Za-z_][\w.]*)\s*(?:=|!=|<>)\s*$")
_RESTORING_OPERATORS = ("filter.drop_conjunct", "filter.change_literal")


def gold_values(gold: Path) -> Callable[[str], tuple[str, ...]]:
    """``values(column)``: distinct non-empty text values of every gold table column named ``column``
    (case-insensitive), sorted; read once per column name from the gold file (read-only)."""

    @lru_cache(maxsize=256)
    def values(column: str) -> tuple[str, ...]:
        # locked like every other reader of gold in this process (the screening engine holds one open: DuckDB
        # refuses a second connection to the same file under another configuration)
        con = connect_locked(str(gold), read_only=True)
        try:
            found = con.execute(
                "SELECT schema_name, table_name, column_name FROM duckdb_columns() "
                "WHERE lower(column_name) = lower(?) AND data_type = 'VARCHAR'",
                [column],
            ).fetchall()
            out: set[str] = set()
            for schema, table, name in found[:20]:
                rows = con.execute(
                    f'SELECT DISTINCT "{name}" FROM "{schema}"."{table}" WHERE "{name}" IS NOT NULL LIMIT 50'
                ).fetchall()
                out.update(str(r[0]) for r in rows if str(r[0]).strip())
            return tuple(sorted(out))
        finally:
            con.close()

    return values


def with_data_values(mutation: Mutation, original: str, values: Callable[[str], tuple[str, ...]]) -> Mutation:
    """``mutation`` with wrong repairs that restore its string comparison with other values of the column."""
    if mutation.operator not in _RESTORING_OPERATORS:
        return mutation
    edit = mutation.edit
    extra: list[WrongRepair] = []
    if mutation.operator == "filter.drop_conjunct":
        removed = original[edit.start : edit.end]
        matches = list(_COMPARISON.finditer(removed))
        if len(matches) != 1:
            return mutation
        match = matches[0]
        for other in _others(values, match.group("col"), match.group("lit")):
            restored = removed[: match.start("lit")] + other.replace("'", "''") + removed[match.end("lit") :]
            extra.append(
                WrongRepair(edit.start, edit.start, restored, "restore the filter with another value of the column")
            )
    else:  # change_literal: the literal restored as another real value instead of the right one
        literal = original[edit.start : edit.end]
        before = _LEFT_SIDE.search(original[max(0, edit.start - 120) : edit.start])
        if before is None or not (literal.startswith("'") and literal.endswith("'")):
            return mutation
        for other in _others(values, before.group("col"), literal[1:-1]):
            quoted = "'" + other.replace("'", "''") + "'"
            extra.append(
                WrongRepair(
                    edit.start,
                    edit.start + len(edit.replacement),
                    quoted,
                    "restore the filter with another value of the column",
                )
            )
    if not extra:
        return mutation
    known = {(w.start, w.end, w.replacement) for w in mutation.wrong_repairs}
    broken = edit.apply(original)
    fresh = tuple(
        w for w in extra if (w.start, w.end, w.replacement) not in known and w.apply(broken) not in (original, broken)
    )
    return replace(mutation, wrong_repairs=mutation.wrong_repairs + fresh)


def _others(values: Callable[[str], tuple[str, ...]], column: str, literal: str) -> list[str]:
    name = column.rsplit(".", 1)[-1]
    return [v for v in values(name) if v.lower() != literal.lower()][:MAX_VALUES]


__all__ = ["MAX_VALUES", "gold_values", "with_data_values"]

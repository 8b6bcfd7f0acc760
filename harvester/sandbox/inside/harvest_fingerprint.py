"""The SQL of a table's fingerprint: one definition shared by the sandboxed capture and every caller.

A fingerprint must not depend on row order (DuckDB gives none without ORDER BY) but must see duplicate
rows, every value, and the column names and types. It is md5 over: the row type (`typeof` of the row as
a struct: names and types, in column order), the row count, and the sum (not XOR: duplicates must not
cancel) of each row's 64-bit hash, summed as HUGEINT so it cannot overflow.

Stdlib only: this module is imported inside the sandbox.
"""

from __future__ import annotations

# The row is bound as a struct through the table alias. DuckDB resolves a column before a table alias of
# the same name, so the alias is chosen to be one no real column uses; a relation that does have a column
# of this name is refused by the capture (see ``alias_collides``).
ROW_ALIAS = "__harvest_fingerprint_row__"


def quote_identifier(name: str) -> str:
    """Quote one DuckDB identifier (double quotes, embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def quote_relation(*parts: str) -> str:
    """Quote a dotted relation name from its parts, e.g. ``quote_relation("main", "orders")``."""
    return ".".join(quote_identifier(part) for part in parts)


def alias_collides(column_names: list[str]) -> bool:
    """True when a relation has a column named like the row alias, which would break the fingerprint."""
    return any(name.lower() == ROW_ALIAS for name in column_names)


def fingerprint_sql(relation: str) -> str:
    """A query returning one row, one column ``fingerprint`` (32 hex chars) for ``relation``.

    ``relation`` is inserted verbatim: pass an already-quoted name (see ``quote_relation``).
    """
    row = ROW_ALIAS
    return (
        "SELECT md5("
        f"typeof(any_value({row})) || '|' || count(*)::VARCHAR || '|' || "
        f"coalesce(sum(hash({row})::HUGEINT), 0)::VARCHAR"
        f") AS fingerprint FROM {relation} AS {row}"
    )

"""Rows for a contract: deterministic, small, and shaped so that every rule the SQL states is exercised.

The rows are not realistic; they are distinguishing. Every value the SQL compares a column with is present,
with its neighbours on the other side of the comparison (``amount > 0`` gets 0, -1 and 1; ``status = 'open'``
gets 'open' and another status); every accepted value appears; a column the SQL coalesces holds nulls; a
foreign key draws from its parent's keys but leaves some parents childless, and adds an orphan only where
the SQL keeps unmatched rows. Mutants of filters, null handling, grain, time windows and joins then change
the output, which is what makes a task out of them. A range or length test (``accepted_range``,
dbt_expectations' between and length tests) bounds every value drawn, the comparisons' neighbours included.

Pure and deterministic: the same contract and seed give the same rows on every machine (``random.Random``
seeded with text, independent of ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from dbt_harvest.harvester.synth.contract import Contract, SynthColumn, SynthTable, has_word
from dbt_harvest.harvester.synth.usage import ColumnRef, Literal

#: rows per synthesized table
ROWS = 30
#: the first day synthesized dates spread from (a year of them)
BASE_DAY = date(2024, 1, 1)
#: names of numeric columns that hold a fraction (drawn between 0 and 1, as a discount or a tax rate is)
_FRACTION = frozenset({"discount", "rate", "pct", "percent", "ratio", "share", "tax"})
#: values of a foreign key that no parent holds, where no test forbids them
ORPHANS = 3
#: distinct values of a free text column (low, so that group-bys make groups)
TEXT_POOL = 5
#: a text column named as a time zone holds zone names: ``convert_timezone(time_zone, ts)`` failed on
#: ``time_zone_5`` (a real Snowflake project, ported)
_TIME_ZONE = re.compile(r"(time_?zone|timezone|(^|_)tz)$", re.I)
TIME_ZONES = ("UTC", "America/New_York", "Europe/Berlin", "Asia/Tokyo", "Australia/Sydney")


@dataclass(frozen=True)
class Table:
    relation: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]  # SQL-text values; None is NULL


def _rng(seed: int, *parts: str) -> random.Random:
    return random.Random(":".join([str(seed), *parts]))


def _parse_date(text: str) -> date | None:
    try:
        return datetime.fromisoformat(text.strip()[:19]).date()
    except ValueError:
        return None


def _number(text: str) -> Decimal | None:
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def _fmt_number(value: Decimal, family: str) -> str:
    if family == "integer":
        return str(int(value))
    return format(value.quantize(Decimal("0.01")), "f")


def _neighbours(col: SynthColumn, lit: Literal) -> list[str]:
    """The literal and, for an ordered comparison, the values just either side of it."""
    ordered = lit.op in {">", ">=", "<", "<=", "between", "!=", "="}
    if col.type in {"integer", "numeric"}:
        n = _number(lit.value)
        if n is None:
            return []
        step = Decimal(1) if col.type == "integer" or n == n.to_integral_value() else Decimal("0.01")
        values = [n, n - step, n + step] if ordered else [n]
        return [_fmt_number(v, col.type) for v in values]
    if col.type in {"date", "timestamp"}:
        d = _parse_date(lit.value)
        if d is None:
            return []
        days = [d, d - timedelta(days=1), d + timedelta(days=1)] if ordered else [d]
        return [_fmt_day(x, col.type, 0) for x in days]
    if col.type == "boolean":
        return ["true", "false"]
    if lit.op == "like":
        return [lit.value.replace("%", "x").replace("_", "y"), f"not {lit.value.replace('%', '').replace('_', '')}"]
    return [lit.value, f"{lit.value}_other"]


def _as_order(col: SynthColumn, text: str) -> Decimal | date | None:
    """``text`` as the column's type orders it (a number or a day), None when it is neither."""
    if col.type in {"date", "timestamp"}:
        return _parse_date(text)
    return _number(text)


def within(col: SynthColumn, value: str | None) -> bool:
    """Whether ``value`` meets the column's range and length tests (a NULL always does: those tests skip it)."""
    b = col.bounds
    if value is None or not b:
        return True
    if b.min_len is not None and len(value) < b.min_len:
        return False
    if b.max_len is not None and len(value) > b.max_len:
        return False
    v = _as_order(col, value)
    for side, text in ((1, b.low), (-1, b.high)):
        edge = _as_order(col, text) if text is not None else None
        if isinstance(v, Decimal) and isinstance(edge, Decimal):
            diff = (v - edge) * side
        elif isinstance(v, date) and isinstance(edge, date):
            diff = Decimal((v - edge).days * side)
        else:
            continue
        if diff < 0 or (b.strict and diff == 0):
            return False
    return True


def _fit_length(col: SynthColumn, text: str, k: int) -> str:
    """``text`` made as long as the column's length tests allow (distinct per ``k``)."""
    b = col.bounds
    if b.max_len is not None and len(text) > b.max_len:
        tag = str(k)
        text = tag[-b.max_len :] if b.max_len < len(tag) + 1 else (text[: b.max_len - len(tag)] + tag)
    if b.min_len is not None and len(text) < b.min_len:
        text = text + "x" * (b.min_len - len(text))
    return text


def _span(col: SynthColumn) -> tuple[Decimal, Decimal] | tuple[date, date] | None:
    """The closed interval a bounded number or day is drawn from (strict sides stepped in)."""
    b = col.bounds
    if col.type in {"integer", "numeric"}:
        step = Decimal(1) if col.type == "integer" else Decimal("0.01")
        low = _number(b.low) if b.low is not None else None
        high = _number(b.high) if b.high is not None else None
        if low is None and high is None:
            return None
        if low is not None and col.type == "integer":
            low = low.to_integral_value(rounding="ROUND_CEILING")
        if high is not None and col.type == "integer":
            high = high.to_integral_value(rounding="ROUND_FLOOR")
        if b.strict:
            low, high = (low + step if low is not None else None), (high - step if high is not None else None)
        low = low if low is not None else (high - 100 if high is not None else Decimal(0))
        high = high if high is not None else low + 100
        return (low, high) if low <= high else None
    if col.type in {"date", "timestamp"}:
        lo = _parse_date(b.low) if b.low is not None else None
        hi = _parse_date(b.high) if b.high is not None else None
        if lo is None and hi is None:
            return None
        if b.strict:
            lo, hi = (lo + timedelta(days=1) if lo else None), (hi - timedelta(days=1) if hi else None)
        lo = lo or (hi - timedelta(days=364) if hi else BASE_DAY)
        hi = hi or lo + timedelta(days=364)
        return (lo, hi) if lo <= hi else None
    return None


def _bounded(col: SynthColumn, rng: random.Random, i: int) -> str | None:
    """A value drawn inside the column's range, None when it has none (or an empty one)."""
    span = _span(col)
    if span is None:
        return None
    low, high = span
    if isinstance(low, date) and isinstance(high, date):
        day = low + timedelta(days=rng.randint(0, (high - low).days))
        return _fmt_day(day, col.type, rng.randint(0, 86399) if col.type == "timestamp" else 0)
    assert isinstance(low, Decimal) and isinstance(high, Decimal)
    if col.type == "integer":
        return str(rng.randint(int(low), int(high)))
    cents = rng.randint(int(low * 100), int(high * 100))
    return _fmt_number(Decimal(cents) / 100, "numeric")


def _fmt_day(day: date, family: str, seconds: int) -> str:
    if family == "date":
        return day.isoformat()
    return (datetime(day.year, day.month, day.day) + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")


def _free(col: SynthColumn, table: SynthTable, rng: random.Random, i: int) -> str:
    """A value with no constraint but the column's type (and its range and length tests)."""
    value = _unbounded(col, rng)
    if within(col, value):
        return value
    return _bounded(col, rng, i) or _fit_length(col, value, i)


def _unbounded(col: SynthColumn, rng: random.Random) -> str:
    if col.type == "integer":
        return str(rng.randint(0, 100))
    if col.type == "numeric":
        if has_word(col.name, _FRACTION):  # a rate, a discount, a share: between 0 and 1
            return f"{rng.randint(0, 99) / 100:.2f}"
        return f"{rng.randint(0, 50000) / 100:.2f}"
    if col.type in {"date", "timestamp"}:
        return _fmt_day(BASE_DAY + timedelta(days=rng.randint(0, 364)), col.type, rng.randint(0, 86399))
    if col.type == "boolean":
        return rng.choice(["true", "false"])
    if col.text_of:  # text the SQL also casts to a number or a date: a value of that type
        return _unbounded(replace(col, type=col.text_of, text_of=""), rng)
    if _TIME_ZONE.search(col.name):  # a zone the SQL converts with: a name DuckDB knows
        return rng.choice(TIME_ZONES)
    return f"{col.name}_{rng.randint(1, TEXT_POOL)}"


def _unique(col: SynthColumn, table: SynthTable, i: int) -> str:
    span = _span(col)
    if col.type in {"integer", "numeric"}:
        start = span[0] if span is not None and isinstance(span[0], Decimal) else Decimal(1)
        return _fmt_number(start + i, "integer") if col.type == "integer" else str(start + i)
    if col.type in {"date", "timestamp"}:
        first = span[0] if span is not None and isinstance(span[0], date) else BASE_DAY
        return _fmt_day(first + timedelta(days=i), col.type, 0)
    if col.text_of:
        return _unique(replace(col, type=col.text_of, text_of=""), table, i)
    short = table.table.lower()[:12] or "row"
    return _fit_length(col, f"{short}_{i + 1:03d}", i + 1)


class _Generator:
    def __init__(self, contract: Contract, seed: int, rows: int) -> None:
        self.contract = contract
        self.seed = seed
        self.rows = rows
        self.done: dict[ColumnRef, list[str | None]] = {}
        self.busy: set[ColumnRef] = set()

    def column(self, table: SynthTable, col: SynthColumn) -> list[str | None]:
        ref = ColumnRef(table.relation, col.name)
        if ref in self.done:
            return self.done[ref]
        self.busy.add(ref)
        rng = _rng(self.seed, table.relation, col.name)
        n = self.rows
        parent_values = self._parent_values(col)
        if col.unique:
            values: list[str | None] = [_unique(col, table, i) for i in range(n)]
        elif parent_values and col.one_to_one:
            values = self._one_to_one(col, parent_values, rng)
        elif parent_values:
            # leave the last parents without children (a group with none), one orphan where it is kept
            usable = parent_values[: max(1, (len(parent_values) * 4) // 5)]
            usable = [v for v in usable if within(col, v)] or usable
            values = [rng.choice(usable) for _ in range(n)]
            if col.orphans:  # a few (one alone may be filtered out before the join)
                for k, i in enumerate(rng.sample(range(n), k=min(n, ORPHANS))):
                    orphan = self._orphan(col, k)
                    if within(col, orphan):
                        values[i] = orphan
        else:
            pool: list[str] = []
            if col.values:
                pool = list(col.values)
            for lit in col.literals:
                for v in _neighbours(col, lit):
                    if v not in pool and within(col, v):  # a value a range test forbids is never drawn
                        pool.append(v)
            if col.values:
                allowed = set(col.values)
                pool = [v for v in pool if v in allowed] or list(col.values)
            values = [pool[i] if i < len(pool) else None for i in range(n)]
            rest = [i for i in range(n) if values[i] is None]
            for i in rest:
                values[i] = rng.choice(col.values) if col.values else _free(col, table, rng, i)
            order = list(range(n))
            rng.shuffle(order)
            values = [values[i] for i in order]
        if col.nulls and not (col.not_null or col.unique):
            for i in rng.sample(range(n), k=max(1, n // 6)):
                values[i] = None
        self.busy.discard(ref)
        self.done[ref] = values
        return values

    def _parent_values(self, col: SynthColumn) -> list[str]:
        if col.parent is None or col.parent in self.busy:
            return []
        table = self.contract.table(col.parent.table)
        parent = table.column(col.parent.column) if table else None
        if table is None or parent is None:
            return []
        seen: list[str] = []
        for v in self.column(table, parent):
            if v is not None and v not in seen:
                seen.append(v)
        return seen

    def _one_to_one(self, col: SynthColumn, parent_values: list[str], rng: random.Random) -> list[str | None]:
        """A child drawn from its parent's keys, each at most once: the first 80% of them, so that some
        parents have no child; the other rows an orphan where they are kept, else NULL where allowed, else
        the remaining parents."""
        usable = [v for v in parent_values[: max(1, (len(parent_values) * 4) // 5)] if within(col, v)]
        spare = [v for v in parent_values if v not in usable]
        values: list[str | None] = list(usable)
        rng.shuffle(values)
        values = values[: self.rows]
        k = 0
        while len(values) < self.rows:
            if col.orphans or (col.not_null and not spare):
                values.append(self._orphan(col, k))
                k += 1
            elif not col.not_null:
                values.append(None)
            else:
                values.append(spare.pop(0))
        order = list(range(self.rows))
        rng.shuffle(order)
        return [values[i] for i in order]

    @staticmethod
    def _orphan(col: SynthColumn, k: int) -> str:
        kind = col.text_of or col.type
        if kind in {"integer", "numeric"}:
            return str(9999 - k)
        if kind in {"date", "timestamp"}:
            return _fmt_day(date(2099, 1, 1) + timedelta(days=k), kind, 0)
        return f"orphan_{k + 1}"


def generate(contract: Contract, seed: int, rows: int = ROWS) -> tuple[Table, ...]:
    """The rows of every table of ``contract`` (``rows`` each) for ``seed``."""
    gen = _Generator(contract, seed, rows)
    out = []
    for table in contract.tables:
        cols = [gen.column(table, c) for c in table.columns]
        out.append(Table(table.relation, tuple(c.name for c in table.columns), tuple(zip(*cols, strict=True))))
    return tuple(out)


def as_mapping(tables: tuple[Table, ...]) -> Mapping[str, Table]:
    return {t.relation: t for t in tables}


__all__ = ["BASE_DAY", "ROWS", "Table", "as_mapping", "generate", "within"]

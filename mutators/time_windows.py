"""Time-window operators: an interval of the wrong length or unit, a truncation to the wrong grain,
an inclusive boundary made exclusive, a shifted 'today', the wrong timestamp column."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlglot import exp

from dbt_harvest.mutators.edits import Edit, WrongRepair
from dbt_harvest.mutators.filters import comparison_token, drop_mutated_conjunct
from dbt_harvest.mutators.masking import MaskedFile
from dbt_harvest.mutators.operator import Operator, Site
from dbt_harvest.mutators.sqlfacts import keeps_output_name, looks_like_a_point_in_time, looks_temporal, same_case

#: unit → the unit a mutation turns it into, and the unit a wrong repair picks.
_UNITS: dict[str, tuple[str, str]] = {
    "day": ("week", "month"),
    "week": ("month", "day"),
    "month": ("week", "year"),
    "quarter": ("month", "year"),
    "year": ("month", "quarter"),
    "hour": ("day", "minute"),
    "minute": ("hour", "second"),
    "second": ("minute", "hour"),
}
_UNIT_WORD = re.compile(r"\b(day|week|month|quarter|year|hour|minute|second)(s?)\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_STRICTNESS = {">": ">=", ">=": ">", "<": "<=", "<=": "<"}


_UNIT_RANK = {"second": 0, "minute": 1, "hour": 2, "day": 3, "week": 4, "month": 5, "quarter": 6, "year": 7}
_LOWER = (exp.GTE, exp.GT)
_UPPER = (exp.LTE, exp.LT)


def window_effect(node: exp.Expression, bound_moves_earlier: bool) -> str:
    """The row effect of moving a time bound, when ``node`` sits in one side of a filter comparison.

    Walks up to the comparison, noting whether the node is subtracted on the way and which side of the
    comparison it is on. A lower bound (``col >= X``) that moves earlier keeps more rows; an upper bound
    that moves earlier keeps fewer. '' when the node is not in such a comparison (a projection: values).
    """
    earlier = bound_moves_earlier
    child: exp.Expr = node
    parent = node.parent
    while parent is not None and not isinstance(parent, (exp.Select, exp.Where, exp.Having, exp.Join)):
        if isinstance(parent, exp.Sub) and child.arg_key == "expression":
            earlier = not earlier
        if isinstance(parent, _LOWER + _UPPER):
            on_right = child.arg_key == "expression"
            lower = isinstance(parent, _LOWER) == on_right  # col >= X, or X <= col
            return "more_rows" if lower == earlier else "fewer_rows"
        child, parent = parent, parent.parent
    return ""


def bound_dropped(parsed: MaskedFile, node: exp.Expression, edit: Edit) -> WrongRepair | None:
    """Over the mutated text: remove the whole condition the edited node sits in (the time bound), the
    hurried fix for a window that keeps the wrong rows."""
    current: exp.Expr | None = node
    while current is not None and not isinstance(current, (exp.Select, exp.Where, exp.Having, exp.Join)):
        drop = drop_mutated_conjunct(parsed, current, edit)
        if drop is not None:
            return WrongRepair(drop.start, drop.end, drop.replacement, "remove the time bound instead of fixing it")
        current = current.parent
    return None


class IntervalAmount(Operator):
    id = "time.interval_amount"
    family = "time"
    effect = "changed_values"
    explanation = "Change the amount of an interval by one (7 days → 8 days)."
    wrong_intent = "move the window's length the wrong way"
    node_types = (exp.Interval,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        span = parsed.span(node)
        if span is None:
            return []
        match = _NUMBER.search(parsed.text, span[0], span[1])
        if match is None:
            return []
        value = int(match.group(0))
        edit = Edit(match.start(), match.end(), str(value + 1))
        wrong = [
            Edit(match.start(), match.start() + len(edit.replacement), str(max(value - 1, 0))),
            bound_dropped(parsed, node, edit),
        ]
        # a longer interval added to a bound moves it later; subtracted, earlier (window_effect flips it)
        return self.site(parsed, edit.start, edit.end, edit.replacement, wrong, effect=window_effect(node, False))


class IntervalUnit(Operator):
    id = "time.interval_unit"
    family = "time"
    effect = "changed_values"
    explanation = "Change the unit of an interval (day → week, month → week…)."
    wrong_intent = "put the interval in another wrong unit"
    node_types = (exp.Interval,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        span = parsed.span(node)
        if span is None:
            return []
        return _unit_site(self, parsed, span, node)


def _unit_site(
    op: Operator, parsed: MaskedFile, span: tuple[int, int], node: exp.Expression | None = None
) -> list[Site]:
    match = _UNIT_WORD.search(parsed.text, span[0], span[1])
    if match is None:
        return []
    unit, plural = match.group(1), match.group(2)
    first, second = _UNITS[unit.lower()]
    new = same_case(unit, first) + plural
    wrong: list[Edit | WrongRepair | None] = [
        Edit(match.start(), match.start() + len(new), same_case(unit, second) + plural)
    ]
    if node is not None:
        wrong.append(bound_dropped(parsed, node, Edit(match.start(), match.end(), new)))
    effect = ""
    if node is not None:  # an interval of a longer unit moves an added bound later
        effect = window_effect(node, _UNIT_RANK[first] < _UNIT_RANK[unit.lower()])
    return op.site(parsed, match.start(), match.end(), new, wrong, effect=effect)


class TruncUnit(Operator):
    id = "time.date_trunc_unit"
    family = "time"
    effect = "changed_grain"
    explanation = "Change the unit of a date_trunc (month → week): rows land in other periods."
    wrong_intent = "truncate to another wrong period"
    node_types = (exp.DateTrunc, exp.TimestampTrunc)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        span = parsed.span(node)
        if span is None:
            return []
        return _unit_site(self, parsed, span)


class Boundary(Operator):
    id = "time.boundary"
    family = "time"
    effect = "fewer_rows"
    explanation = "Make an inclusive time boundary exclusive or the reverse (>= ↔ >, < ↔ <=)."
    wrong_intent = "remove the time bound instead of fixing it"
    node_types = (exp.GT, exp.GTE, exp.LT, exp.LTE)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        if not (looks_temporal(node.this) or looks_temporal(node.expression)):
            return []
        tok = comparison_token(parsed, node, _STRICTNESS)
        if tok is None:
            return []
        old = parsed.text[tok.start : tok.end + 1]
        edit = Edit(tok.start, tok.end + 1, _STRICTNESS[old])
        wrong = [drop_mutated_conjunct(parsed, node, edit)]
        return self.site(parsed, edit.start, edit.end, edit.replacement, wrong)


class ShiftAnchor(Operator):
    id = "time.shift_anchor"
    family = "time"
    effect = "changed_values"
    explanation = "Shift a current_date / now() anchor back by one day."
    wrong_intent = "move the anchor the wrong way"
    node_types = (exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentDatetime)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        span = parsed.span(node)
        if span is None:
            return []
        raw = parsed.text[span[0] : span[1]]
        if not re.fullmatch(r"[A-Za-z_]+(\(\s*\))?", raw):
            return []
        new = f"({raw} - interval '1 day')"
        wrong = [
            Edit(span[0], span[0] + len(new), f"({raw} + interval '1 day')"),
            bound_dropped(parsed, node, Edit(span[0], span[1], new)),
        ]
        return self.site(parsed, *span, new, wrong, effect=window_effect(node, True))


class SwapTimestampColumns(Operator):
    id = "time.swap_timestamp_columns"
    family = "time"
    effect = "changed_values"
    explanation = "Use another timestamp column of the same relation (created_at → updated_at)."
    wrong_intent = "switch to yet another timestamp column"
    node_types = (exp.Column,)
    clauses = frozenset({"projection", "where", "on", "having", "group"})

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        assert isinstance(node, exp.Column)  # node_types
        assert parsed.tree is not None  # sites() looks only into a parsed file
        if not looks_like_a_point_in_time(node.name) or not node.table:
            return []
        ident = node.this
        meta = ident.meta if isinstance(ident, exp.Identifier) else {}
        if "start" not in meta:
            return []
        start, end = meta["start"], meta["end"] + 1
        if parsed.text[start:end] != node.name:
            return []  # quoted identifiers: leave alone
        siblings = sorted(
            {
                c.name
                for c in parsed.tree.find_all(exp.Column)
                if c.table == node.table and c.name != node.name and looks_like_a_point_in_time(c.name)
            }
        )
        if not siblings:
            return []
        wrong = [Edit(start, start + len(siblings[0]), siblings[1])] if len(siblings) > 1 else []
        return self.site(parsed, start, end, keeps_output_name(node, siblings[0]), wrong)


OPERATORS: tuple[Operator, ...] = (
    IntervalAmount(),
    IntervalUnit(),
    TruncUnit(),
    Boundary(),
    ShiftAnchor(),
    SwapTimestampColumns(),
)

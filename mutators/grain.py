"""Grain and aggregation operators: counts that double-count, the wrong aggregate, a window whose
partition or dedup order is off, DISTINCT or UNION that no longer removes duplicates."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlglot import exp
from sqlglot.tokens import Token

from dbt_harvest.mutators.edits import Edit, WrongRepair
from dbt_harvest.mutators.masking import MaskedFile
from dbt_harvest.mutators.operator import Operator, Site
from dbt_harvest.mutators.sqlfacts import (
    add_distinct_edit,
    enclosing_select,
    known_spans,
    list_drop,
    looks_temporal,
    same_case,
    sibling_column,
    token_between,
    tokens_in,
)

_SWAPS: dict[type[exp.Expression], tuple[str, str]] = {
    exp.Sum: ("avg", "max"),
    exp.Avg: ("sum", "max"),
    exp.Min: ("max", "avg"),
    exp.Max: ("min", "avg"),
}


def _delete_word(parsed: MaskedFile, tok: Token) -> Edit:
    """Delete a keyword token and the whitespace after it."""
    end = tok.end + 1
    while end < len(parsed.text) and parsed.text[end] in " \t":
        end += 1
    return Edit(tok.start, end, "")


_NOT_NUMERIC = re.compile(r"(name|status|type|code|email|label|category|description|flag|^is_|^has_)", re.I)


def _numeric_looking(node: exp.Expression) -> bool:
    """A name-based guess: could this aggregate argument be a number (not text, not a flag)?"""
    if isinstance(node, exp.Column):
        return not _NOT_NUMERIC.search(node.name or "")
    return not isinstance(node, (exp.Literal,)) or node.is_number


def _sibling(parsed: MaskedFile, node: exp.Expression) -> str | None:
    return sibling_column(parsed, node)


def _other_column(parsed: MaskedFile, node: exp.Expression, name: str, new: str) -> WrongRepair | None:
    """Over the mutated text: the right aggregate restored, but over another column of the same kind."""
    span, other = parsed.span(node), _sibling(parsed, node.this)
    if span is None or other is None:
        return None
    end = span[1] + len(new) - len(name)
    return WrongRepair(span[0], end, f"{name}({other})", "the right aggregate over another column")


class CountDistinctToCount(Operator):
    id = "grain.count_distinct_to_count"
    family = "grain"
    effect = "changed_values"
    explanation = "Turn `count(distinct x)` into `count(x)`: duplicates are counted."
    wrong_intent = "remove duplicate rows instead of counting distinct values"
    node_types = (exp.Count,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        distinct = node.this
        if not isinstance(distinct, exp.Distinct) or len(distinct.expressions) != 1:
            return []
        span, arg = parsed.span(node), parsed.span(distinct.expressions[0])
        if span is None or arg is None:
            return []
        tok = token_between(parsed, span[0], arg[0], ["DISTINCT"])
        if tok is None:
            return []
        edit = _delete_word(parsed, tok)
        wrong: list[Edit | WrongRepair | None] = [add_distinct_edit(parsed, enclosing_select(node), edit)]
        other = _sibling(parsed, distinct.expressions[0])
        if other is not None:  # count distinct values again, of another key of the same relation
            col_span = parsed.span(distinct.expressions[0])
            assert col_span is not None
            at = col_span[0] + edit.delta
            wrong.append(
                WrongRepair(
                    edit.start,
                    at + (col_span[1] - col_span[0]),
                    f"distinct {other}",
                    "count distinct values of another key",
                )
            )
        return self.site(parsed, edit.start, edit.end, "", wrong)


class SwapAggregate(Operator):
    id = "grain.swap_aggregate"
    family = "grain"
    effect = "changed_values"
    explanation = "Swap sum and avg, or min and max."
    wrong_intent = "re-aggregate with another aggregate"
    node_types = tuple(_SWAPS)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        span = parsed.span(node)
        if span is None:
            return []
        toks = tokens_in(parsed, *span)
        if not toks or isinstance(node.parent, exp.Window):
            return []
        start, end = toks[0].start, toks[0].end + 1
        name = parsed.text[start:end]
        if name.lower() not in ("sum", "avg", "min", "max"):
            return []
        first, second = _SWAPS[type(node)]
        if second == "avg" and (looks_temporal(node.this) or not _numeric_looking(node.this)):
            second = ""  # an average of dates or of text is no repair anyone would write
        new = same_case(name, first)
        wrong: list[Edit | WrongRepair | None] = (
            [Edit(start, start + len(new), same_case(name, second))] if second else []
        )
        if span[0] == start:  # the call starts with its name: `max(x)`, not `x.max()`
            wrong.append(_other_column(parsed, node, name, new))
        return self.site(parsed, start, end, new, wrong)


class DropPartitionKey(Operator):
    id = "grain.drop_partition_key"
    family = "grain"
    effect = "changed_grain"
    explanation = "Drop one PARTITION BY key of a window: the window spans several groups."
    wrong_intent = "remove duplicate rows instead of restoring the window's grain"
    node_types = (exp.Window,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        keys = node.args.get("partition_by") or []
        if len(keys) < 2:
            return []
        out: list[Site] = []
        spans = known_spans(parsed, keys)
        for index in range(len(keys)):
            span = list_drop(parsed, keys, index)
            if span is None or spans is None:
                continue
            edit = Edit(span[0], span[1], "")
            wrong: list[Edit | WrongRepair | None] = [add_distinct_edit(parsed, enclosing_select(node), edit)]
            first, last = spans[0][0], spans[-1][1]
            dropped = parsed.text[spans[index][0] : spans[index][1]]
            # the dropped key restored, the others lost: the window at another wrong grain
            wrong.append(WrongRepair(first, last + edit.delta, dropped, "partition by the other key instead"))
            out += self.site(parsed, *span, "", wrong)
        return out


class FlipDedupOrder(Operator):
    id = "grain.flip_dedup_order"
    family = "grain"
    effect = "changed_values"
    explanation = "Flip the ORDER BY direction of a row_number() window: the dedup keeps the other row."
    wrong_intent = "change where missing values sort instead of the direction"
    node_types = (exp.Window,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        order = node.args.get("order")
        if not isinstance(node.this, exp.RowNumber) or not isinstance(order, exp.Order) or not order.expressions:
            return []
        first = order.expressions[0]
        span = parsed.span(first)
        inner = parsed.span(first.this) if isinstance(first, exp.Ordered) else span
        if span is None or inner is None:
            return []
        tail = tokens_in(parsed, inner[1], span[1])
        words = [parsed.text[t.start : t.end + 1] for t in tail]
        if words and words[0].upper() in ("ASC", "DESC"):
            tok = tail[0]
            new = same_case(words[0], "asc" if words[0].upper() == "DESC" else "desc")
            edit = Edit(tok.start, tok.end + 1, new)
        else:
            edit = Edit(inner[1], inner[1], " desc")
        wrong_pos = edit.start + len(edit.replacement)
        wrong: list[Edit | WrongRepair | None] = [Edit(wrong_pos, wrong_pos, " nulls last")]
        sort_key = first.this if isinstance(first, exp.Ordered) else first
        other = _sibling(parsed, sort_key)
        if other is not None and edit.start >= inner[1]:  # the right direction, on another timestamp
            wrong.append(
                WrongRepair(
                    inner[0],
                    wrong_pos,
                    other + parsed.text[inner[1] : edit.end],
                    "keep the direction, sort on another timestamp",
                )
            )
        return self.site(parsed, edit.start, edit.end, edit.replacement, wrong)


class DropSelectDistinct(Operator):
    id = "grain.drop_select_distinct"
    family = "grain"
    effect = "more_rows"
    explanation = "Drop the DISTINCT of a SELECT DISTINCT: duplicate rows come back."
    node_types = (exp.Select,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        distinct = node.args.get("distinct")
        if not isinstance(distinct, exp.Distinct) or distinct.args.get("on") or not node.expressions:
            return []
        span, first = parsed.span(node), parsed.span(node.expressions[0])
        if span is None or first is None:
            return []
        tok = token_between(parsed, max(0, span[0] - 200), first[0], ["DISTINCT"])
        if tok is None:
            return []
        edit = _delete_word(parsed, tok)
        return self.site(parsed, edit.start, edit.end, "", [])


class _UnionToggle(Operator):
    node_types = (exp.Union,)
    drop_all: bool = False

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        is_distinct = bool(node.args.get("distinct"))
        if is_distinct == self.drop_all:
            return []
        left, right = parsed.span(node.this), parsed.span(node.expression)
        if left is None or right is None:
            return []
        tok = token_between(parsed, left[1], right[0], ["UNION"])
        if tok is None:
            return []
        if self.drop_all:
            all_tok = token_between(parsed, tok.end + 1, right[0], ["ALL"])
            if all_tok is None:
                return []
            edit = Edit(tok.end + 1, all_tok.end + 1, "")
        else:
            word = parsed.text[tok.start : tok.end + 1]
            edit = Edit(tok.end + 1, tok.end + 1, " " + same_case(word, "all"))
        return self.site(parsed, edit.start, edit.end, edit.replacement, [])


class UnionToUnionAll(_UnionToggle):
    id = "grain.union_to_union_all"
    family = "grain"
    effect = "more_rows"
    explanation = "Turn UNION into UNION ALL: rows present in both inputs are duplicated."
    drop_all = False


class UnionAllToUnion(_UnionToggle):
    id = "grain.union_all_to_union"
    family = "grain"
    effect = "fewer_rows"
    explanation = "Turn UNION ALL into UNION: legitimately repeated rows collapse into one."
    drop_all = True


OPERATORS: tuple[Operator, ...] = (
    CountDistinctToCount(),
    SwapAggregate(),
    DropPartitionKey(),
    FlipDedupOrder(),
    DropSelectDistinct(),
    UnionToUnionAll(),
    UnionAllToUnion(),
)

"""Join operators: a LEFT join that silently drops unmatched rows, an inner join that keeps them, a
multi-key join that loses a key and fans out, a right-side filter moved from ON to WHERE."""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from dbt_harvest.mutators.edits import Edit, WrongRepair
from dbt_harvest.mutators.filters import is_join_key
from dbt_harvest.mutators.masking import MaskedFile
from dbt_harvest.mutators.operator import Operator, Site
from dbt_harvest.mutators.sqlfacts import (
    add_distinct_edit,
    conjuncts,
    enclosing_select,
    list_drop,
    same_case,
    sibling_column,
    text_of,
    tokens_in,
)


def _join_words(parsed: MaskedFile, node: exp.Join) -> tuple[int, int, list[str]] | None:
    """Span and upper-cased words of the join keywords (``left outer join``) before the table."""
    span, table = parsed.span(node), parsed.span(node.this)
    if span is None or table is None:
        return None
    toks = tokens_in(parsed, span[0], table[0])
    words = [parsed.text[t.start : t.end + 1] for t in toks]
    if not words or words[-1].upper() != "JOIN":
        return None
    return toks[0].start, toks[-1].end + 1, words


def _retype(parsed: MaskedFile, node: exp.Join, new_words: str) -> tuple[int, int, str] | None:
    found = _join_words(parsed, node)
    if found is None:
        return None
    start, end, words = found
    return start, end, same_case(words[0], new_words)


class LeftToInner(Operator):
    id = "join.left_to_inner"
    family = "join"
    effect = "fewer_rows"
    explanation = "Turn a LEFT JOIN into an INNER JOIN: rows without a match disappear."
    wrong_intent = "change the join type, but to one that keeps the other side's unmatched rows"
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        assert isinstance(node, exp.Join)  # node_types
        if node.side != "LEFT" or not node.args.get("on"):
            return []
        got = _retype(parsed, node, "inner join")
        if got is None:
            return []
        start, end, new = got
        wrong = [Edit(start, start + len(new), same_case(new, w)) for w in ("right join", "full outer join")]
        return self.site(parsed, start, end, new, wrong)


class InnerToLeft(Operator):
    id = "join.inner_to_left"
    family = "join"
    effect = "more_rows"
    explanation = "Turn an INNER JOIN into a LEFT JOIN: rows without a match come back with NULLs."
    wrong_intent = "change the join type, but to one that keeps the other side's unmatched rows"
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        assert isinstance(node, exp.Join)  # node_types
        if node.side or node.kind not in (None, "", "INNER") or not node.args.get("on"):
            return []
        got = _retype(parsed, node, "left join")
        if got is None:
            return []
        start, end, new = got
        wrong = [Edit(start, start + len(new), same_case(new, w)) for w in ("right join", "full outer join")]
        return self.site(parsed, start, end, new, wrong)


class DropJoinKey(Operator):
    id = "join.drop_on_key"
    family = "join"
    effect = "more_rows"
    explanation = "Drop one key of a multi-key join condition: the join fans out."
    wrong_intent = "remove the duplicates with DISTINCT instead of restoring the join key"
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        assert isinstance(node, exp.Join)  # node_types
        on = node.args.get("on")
        if not isinstance(on, exp.Expression):
            return []
        items = conjuncts(on)
        if sum(is_join_key(i) for i in items) < 2:
            return []
        out: list[Site] = []
        select = enclosing_select(node)
        for index, item in enumerate(items):
            if not is_join_key(item):
                continue
            span = list_drop(parsed, items, index)
            if span is None:
                continue
            edit = Edit(span[0], span[1], "")
            wrong: list[Edit | WrongRepair | None] = [add_distinct_edit(parsed, select, edit)]
            wrong.append(_key_against_another_column(parsed, item, edit))
            retyped = _retype(parsed, node, "inner join" if node.side == "LEFT" else "left join")
            if retyped is not None and retyped[1] <= edit.start:  # fix the join's type, not its key
                wrong.append(WrongRepair(*retyped, "change the join type instead of restoring the key"))
            out += self.site(parsed, *span, "", wrong)
        return out


def _key_against_another_column(parsed: MaskedFile, item: exp.Expression, edit: Edit) -> WrongRepair | None:
    """Over the mutated text: the dropped key put back, but compared with another key column of the
    joined relation (``a.email_id = b.member_id``): the join key restored against the wrong column."""
    right = item.expression if isinstance(item, exp.EQ) else None
    right_span = parsed.span(right) if right is not None else None
    other = sibling_column(parsed, right) if right is not None else None
    if right_span is None or other is None or not (edit.start <= right_span[0] and right_span[1] <= edit.end):
        return None
    removed = parsed.text[edit.start : edit.end]
    at = right_span[0] - edit.start
    restored = removed[:at] + other + removed[at + right_span[1] - right_span[0] :]
    return WrongRepair(edit.start, edit.start, restored, "restore the join key against the wrong column")


class OnToWhere(Operator):
    id = "join.on_to_where"
    family = "join"
    effect = "fewer_rows"
    explanation = "Move a right-table predicate from a LEFT JOIN's ON into WHERE: unmatched rows are filtered out."
    wrong_intent = "keep the unmatched rows in WHERE instead of moving the condition back into the join"
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        assert isinstance(node, exp.Join)  # node_types
        on = node.args.get("on")
        select = node.parent
        if node.side != "LEFT" or not isinstance(on, exp.Expression) or not isinstance(select, exp.Select):
            return []
        where = select.args.get("where")
        right = node.this.alias_or_name
        items = conjuncts(on)
        out: list[Site] = []
        for index, item in enumerate(items):
            cols = list(item.find_all(exp.Column))
            if is_join_key(item) or not cols or any(c.table != right for c in cols):
                continue
            drop, pred = list_drop(parsed, items, index), text_of(parsed, item)
            if drop is None or pred is None:
                continue
            if where is not None:
                cond = parsed.span(where.this)
                if cond is None or any(isinstance(c, exp.Or) for c in [where.this]):
                    continue
                start, end = drop[0], cond[0]
                middle = parsed.text[drop[1] : cond[0]]
                new = middle + f"{pred} and "
                moved = f"({pred} or {text_of(parsed, cols[0])} is null) and "
            elif node is select.args.get("joins", [None])[-1]:
                join_span = parsed.span(node)
                if join_span is None:
                    continue
                on_span = parsed.span(on)
                assert on_span is not None  # the parser stamped the ON condition with the tokens it read
                if join_span[1] != on_span[1]:
                    continue
                start, end = drop[0], join_span[1]
                middle = parsed.text[drop[1] : join_span[1]]
                new = middle + f"\nwhere {pred}"
                moved = f"\nwhere ({pred} or {text_of(parsed, cols[0])} is null)"
            else:
                continue
            head = new[: len(middle)]
            wrong = [Edit(start, start + len(new), head + moved)]
            out += self.site(parsed, start, end, new, wrong)
        return out


OPERATORS: tuple[Operator, ...] = (LeftToInner(), InnerToLeft(), DropJoinKey(), OnToWhere())

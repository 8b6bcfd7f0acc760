"""Join operators: a LEFT join that silently drops unmatched rows, an inner join that keeps them, a
multi-key join that loses a key and fans out, a right-side filter moved from ON to WHERE."""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from mutators.edits import Edit
from mutators.filters import is_join_key
from mutators.masking import MaskedFile
from mutators.operator import Operator, Site
from mutators.sqlfacts import (
    add_distinct_edit, conjuncts, enclosing_select, list_drop, same_case, text_of, tokens_in,
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
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
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
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
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
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
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
            out += self.site(parsed, *span, "", [add_distinct_edit(parsed, select, edit)])
        return out


class OnToWhere(Operator):
    id = "join.on_to_where"
    family = "join"
    effect = "fewer_rows"
    explanation = "Move a right-table predicate from a LEFT JOIN's ON into WHERE: unmatched rows are filtered out."
    node_types = (exp.Join,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
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
                if join_span is None or join_span[1] != parsed.span(on)[1]:
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

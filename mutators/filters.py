"""Filter operators: the business rule in a WHERE / HAVING / QUALIFY / JOIN ON predicate goes missing
or goes wrong (a dropped status filter, a negated condition, a boundary off by one comparison)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlglot import exp
from sqlglot.tokens import Token

from dbt_harvest.mutators.edits import Edit, WrongRepair
from dbt_harvest.mutators.masking import MaskedFile
from dbt_harvest.mutators.operator import Operator, Site
from dbt_harvest.mutators.sqlfacts import (
    conjuncts,
    drop_conjunct_edit,
    known_spans,
    looks_temporal,
    predicate_clauses,
    same_case,
    text_of,
    token_between,
)

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_STRICTNESS = {">": ">=", ">=": ">", "<": "<=", "<=": "<"}


def _first_column(node: exp.Expression) -> exp.Column | None:
    col = node.find(exp.Column)
    return col if isinstance(col, exp.Column) else None


def _conjunct_context(node: exp.Expr) -> tuple[str, exp.Expression, list[exp.Expression], int] | None:
    """(clause, owner, conjuncts, index) when ``node`` is a top-level conjunct of a predicate clause."""
    parent = node.parent
    while isinstance(parent, exp.And):
        parent = parent.parent
    for clause, owner, cond in _clauses_of(parent):
        items = conjuncts(cond)
        for i, item in enumerate(items):
            if item is node:
                return clause, owner, items, i
    return None


def _clauses_of(parent: exp.Expr | None) -> Iterable[tuple[str, exp.Expression, exp.Expression]]:
    if isinstance(parent, (exp.Where, exp.Having, exp.Qualify)):
        name = {exp.Where: "where", exp.Having: "having", exp.Qualify: "qualify"}[type(parent)]
        yield name, parent, parent.this
    elif isinstance(parent, exp.Join) and isinstance(parent.args.get("on"), exp.Expression):
        yield "on", parent, parent.args["on"]


def drop_mutated_conjunct(parsed: MaskedFile, node: exp.Expr, edit: Edit) -> Edit | None:
    """Over the mutated text: remove the conjunct the mutation rewrote (the 'just delete it' fix)."""
    ctx = _conjunct_context(node)
    if ctx is None:
        return None
    clause, owner, items, index = ctx
    drop = drop_conjunct_edit(parsed, clause, owner, items, index)
    if drop is None:
        return None
    start = drop.start if drop.start <= edit.start else drop.start + edit.delta
    end = drop.end + edit.delta if drop.end >= edit.end else drop.end
    return Edit(start, end, "")


def is_join_key(node: exp.Expression) -> bool:
    return (
        isinstance(node, exp.EQ)
        and isinstance(node.this, exp.Column)
        and isinstance(node.expression, exp.Column)
        and node.this.table != node.expression.table
    )


class DropConjunct(Operator):
    id = "filter.drop_conjunct"
    family = "filter"
    effect = "more_rows"
    explanation = "Drop one top-level AND conjunct of a WHERE, HAVING, QUALIFY or JOIN ON predicate."
    node_types = (exp.Where, exp.Having, exp.Qualify, exp.Join)

    def sites(self, parsed: MaskedFile) -> list[Site]:
        if not parsed.parsed or parsed.tree is None:
            return []
        found: list[Site] = []
        for clause, owner, cond in predicate_clauses(parsed.tree):
            items = conjuncts(cond)
            for index, item in enumerate(items):
                if clause == "on" and is_join_key(item):
                    continue  # the join family owns dropped keys
                edit = drop_conjunct_edit(parsed, clause, owner, items, index)
                if edit is None or not parsed.editable(edit.start, edit.end):
                    continue
                found += self.site(parsed, edit.start, edit.end, "", self._wrong(parsed, item, edit))
        return found

    def _wrong(self, parsed: MaskedFile, item: exp.Expression, edit: Edit) -> list[WrongRepair | None]:
        """Re-insert the dropped rule, but wrong: with another value, the boundary on the other side, one
        value of its list missing, or only its weakest part (the column is not null)."""
        item_text = text_of(parsed, item)
        span = parsed.span(item)
        if item_text is None or span is None:
            return []
        removed = parsed.text[edit.start : edit.end]
        if not removed:
            return []
        head, tail = parsed.text[edit.start : span[0]], parsed.text[span[1] : edit.end]
        col = _first_column(item)
        col_text = text_of(parsed, col) if col is not None else None
        guesses: list[tuple[str, str]] = []
        other = _other_literal(parsed, item, col) if col is not None else None
        if col_text and other is not None and isinstance(item, (exp.EQ, exp.NEQ, exp.In)):
            word = "!=" if isinstance(item, exp.NEQ) else "="
            guesses.append((f"{col_text} {word} {other}", "restore the filter with another value"))
            literal = next((text_of(parsed, lit) for lit in item.find_all(exp.Literal) if lit.is_string), None)
            if isinstance(item, exp.EQ) and literal:
                guesses.append((f"{col_text} in ({literal}, {other})", "restore the filter with one value too many"))
        bound = _other_side(parsed, item, span)
        if bound is not None:
            guesses.append((bound, "restore the filter with its boundary on the other side"))
        fewer = _one_value_less(parsed, item, span)
        if fewer is not None:
            guesses.append((fewer, "restore the filter with one of its values missing"))
        if col_text and not guesses:
            guesses.append((f"{col_text} is not null", "restore only a weaker filter (the column is set)"))
        return [WrongRepair(edit.start, edit.start, head + guess + tail, intent) for guess, intent in guesses]


def _other_side(parsed: MaskedFile, item: exp.Expression, span: tuple[int, int]) -> str | None:
    """The conjunct's text with a strict comparison made inclusive or the reverse (``>`` ↔ ``>=``)."""
    if not isinstance(item, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
        return None
    tok = comparison_token(parsed, item, _STRICTNESS)
    if tok is None:
        return None
    text = parsed.text[span[0] : span[1]]
    old = parsed.text[tok.start : tok.end + 1]
    at = tok.start - span[0]
    return text[:at] + _STRICTNESS[old] + text[at + len(old) :]


def _one_value_less(parsed: MaskedFile, item: exp.Expression, span: tuple[int, int]) -> str | None:
    """The conjunct's text with the last element of its literal IN list left out."""
    if not isinstance(item, exp.In) or len(item.expressions) < 2:
        return None
    spans = known_spans(parsed, item.expressions)
    if spans is None:
        return None
    cut = (spans[-2][1] - span[0], spans[-1][1] - span[0])
    text = parsed.text[span[0] : span[1]]
    return text[: cut[0]] + text[cut[1] :]


def _other_literal(parsed: MaskedFile, item: exp.Expression, col: exp.Column) -> str | None:
    """Another string literal the file compares the same column name with (e.g. 'cancelled')."""
    used = {lit.this for lit in item.find_all(exp.Literal) if lit.is_string}
    assert parsed.tree is not None  # only a parsed file has sites
    for cmp in parsed.tree.find_all(exp.EQ, exp.NEQ, exp.In):
        cols = [c for c in cmp.find_all(exp.Column) if c.name == col.name]
        if not cols:
            continue
        for lit in cmp.find_all(exp.Literal):
            if lit.is_string and lit.this not in used and lit.this:
                return text_of(parsed, lit)
    return None


class NegateConjunct(Operator):
    id = "filter.negate_conjunct"
    family = "filter"
    effect = "fewer_rows"
    explanation = "Negate one top-level conjunct of a WHERE, HAVING or QUALIFY predicate."
    wrong_intent = "remove the condition instead of restoring it"

    def sites(self, parsed: MaskedFile) -> list[Site]:
        if not parsed.parsed or parsed.tree is None:
            return []
        found: list[Site] = []
        for clause, _owner, cond in predicate_clauses(parsed.tree):
            if clause == "on":
                continue
            for item in conjuncts(cond):
                span, body = parsed.span(item), text_of(parsed, item)
                if span is None or body is None or isinstance(item, exp.Not):
                    continue
                if not parsed.editable(*span):
                    continue
                edit = Edit(span[0], span[1], f"not ({body})")
                found += self.site(parsed, *span, edit.replacement, [drop_mutated_conjunct(parsed, item, edit)])
        return found


class ChangeLiteral(Operator):
    id = "filter.change_literal"
    family = "filter"
    effect = "fewer_rows"
    explanation = "Change the literal a predicate compares with: a string's letter case, a number by one."
    wrong_intent = "remove the condition instead of restoring its value"
    node_types = (exp.Literal,)
    clauses = frozenset({"where", "having", "qualify", "on"})

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        parent = node.parent
        if isinstance(parent, (exp.In, _COMPARISONS)):
            parent_cmp = parent
        else:
            return []
        if any(looks_temporal(c) for c in parent_cmp.iter_expressions()):
            return []
        span = parsed.span(node)
        if span is None:
            return []
        raw = parsed.text[span[0] : span[1]]
        if node.is_string:
            inner = raw[1:-1]
            if not re.search("[A-Za-z]", inner) or "{" in inner:
                return []
            new_inner = inner.capitalize() if inner != inner.capitalize() else inner.lower()
            if new_inner == inner:
                new_inner = inner.upper()
            new = raw[0] + new_inner + raw[-1]
        elif re.fullmatch(r"\d+", raw):
            new = str(int(raw) + 1)
        else:
            return []
        edit = Edit(span[0], span[1], new)
        owner = parent_cmp.parent if isinstance(parent_cmp.parent, exp.Not) else parent_cmp
        wrong: list[Edit | WrongRepair | None] = [drop_mutated_conjunct(parsed, owner, edit)]
        if re.fullmatch(r"\d+", raw) and int(raw) >= 1:
            wrong.append(
                WrongRepair(span[0], span[0] + len(new), str(int(raw) - 1), "move the value back, past the right one")
            )
        return self.site(parsed, *span, new, wrong)


class DropInElement(Operator):
    id = "filter.drop_in_element"
    family = "filter"
    effect = "fewer_rows"
    explanation = "Drop one element of a literal IN (…) list in a predicate."
    wrong_intent = "remove the list condition instead of restoring the value"
    node_types = (exp.In,)
    clauses = frozenset({"where", "having", "qualify", "on"})

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        items = node.expressions
        if len(items) < 2 or not all(isinstance(i, exp.Literal) for i in items):
            return []
        spans = known_spans(parsed, items)
        if spans is None:
            return []
        out: list[Site] = []
        owner = node.parent if isinstance(node.parent, exp.Not) else node
        for k in range(len(items)):
            start, end = (spans[k - 1][1], spans[k][1]) if k else (spans[0][0], spans[1][0])
            edit = Edit(start, end, "")
            out += self.site(parsed, start, end, "", [drop_mutated_conjunct(parsed, owner, edit)])
        return out


class _SwapConnective(Operator):
    source: str = "AND"
    target: str = "or"

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        kind = type(node)
        if isinstance(node.this, kind) or isinstance(node.expression, kind):
            return []  # only two-operand groups: a ∘ b
        parent = node.parent
        if not isinstance(parent, (exp.Paren, exp.Where, exp.Having, exp.Qualify, exp.Join)):
            return []
        left, right = parsed.span(node.this), parsed.span(node.expression)
        if left is None or right is None:
            return []
        tok = token_between(parsed, left[1], right[0], [self.source])
        if tok is None:
            return []
        word = parsed.text[tok.start : tok.end + 1]
        edit = Edit(tok.start, tok.end + 1, same_case(word, self.target))
        keep_left = Edit(left[1], right[1] + edit.delta, "")
        keep_right = Edit(left[0], right[0] + edit.delta, "")
        return self.site(parsed, edit.start, edit.end, edit.replacement, [keep_left, keep_right])


class AndToOr(_SwapConnective):
    id = "filter.and_to_or"
    family = "filter"
    effect = "more_rows"
    explanation = "Turn the AND of a two-condition predicate group into OR."
    wrong_intent = "keep only one of the two conditions"
    node_types = (exp.And,)
    clauses = frozenset({"where", "having", "qualify", "on"})
    source, target = "AND", "or"


class OrToAnd(_SwapConnective):
    id = "filter.or_to_and"
    family = "filter"
    effect = "fewer_rows"
    explanation = "Turn the OR of a two-condition predicate group into AND."
    wrong_intent = "keep only one of the two conditions"
    node_types = (exp.Or,)
    clauses = frozenset({"where", "having", "qualify", "on"})
    source, target = "OR", "and"


def comparison_token(parsed: MaskedFile, node: exp.Expression, words: Iterable[str]) -> Token | None:
    """The first of ``words`` among the tokens between a comparison's two operands (its operator)."""
    left, right = parsed.span(node.this), parsed.span(node.expression)
    if left is None or right is None:
        return None
    return token_between(parsed, left[1], right[0], words)


class FlipStrictness(Operator):
    id = "filter.flip_strictness"
    family = "filter"
    effect = "fewer_rows"
    explanation = "Flip < and <=, > and >= in a predicate on a non-temporal value."
    wrong_intent = "remove the comparison instead of fixing its boundary"
    node_types = (exp.GT, exp.GTE, exp.LT, exp.LTE)
    clauses = frozenset({"where", "having", "qualify", "on"})

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        if looks_temporal(node.this) or looks_temporal(node.expression):
            return []
        tok = comparison_token(parsed, node, _STRICTNESS)
        if tok is None:
            return []
        edit = Edit(tok.start, tok.end + 1, _STRICTNESS[parsed.text[tok.start : tok.end + 1]])
        return self.site(parsed, edit.start, edit.end, edit.replacement, [drop_mutated_conjunct(parsed, node, edit)])


class FlipEquality(Operator):
    id = "filter.flip_equality"
    family = "filter"
    effect = "fewer_rows"
    explanation = "Flip = and != (<>) in a predicate that compares with a literal."
    wrong_intent = "remove the comparison instead of fixing it"
    node_types = (exp.EQ, exp.NEQ)
    clauses = frozenset({"where", "having", "qualify", "on"})

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        if not any(isinstance(c, (exp.Literal, exp.Boolean)) for c in (node.this, node.expression)):
            return []
        tok = comparison_token(parsed, node, ["=", "!=", "<>"])
        if tok is None:
            return []
        old = parsed.text[tok.start : tok.end + 1]
        new = "!=" if old == "=" else "="
        edit = Edit(tok.start, tok.end + 1, new)
        return self.site(parsed, edit.start, edit.end, new, [drop_mutated_conjunct(parsed, node, edit)])


OPERATORS: tuple[Operator, ...] = (
    DropConjunct(),
    NegateConjunct(),
    ChangeLiteral(),
    DropInElement(),
    AndToOr(),
    OrToAnd(),
    FlipStrictness(),
    FlipEquality(),
)

"""NULL-vs-FALSE operators: three-valued logic mistakes (``not x`` for ``x is not true``, ``<>`` for
``is distinct from``, a dropped ``coalesce`` default, ``count(col)`` for ``count(*)``)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from dbt_harvest.mutators.edits import Edit, WrongRepair
from dbt_harvest.mutators.filters import drop_mutated_conjunct
from dbt_harvest.mutators.masking import MaskedFile
from dbt_harvest.mutators.operator import Operator, Site
from dbt_harvest.mutators.sqlfacts import clause_of, is_positive_predicate, same_case, text_of, token_between, wrapped

_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div)


def _filters(node: exp.Expression) -> bool:
    """The node decides which rows a WHERE/HAVING/QUALIFY or an inner join keeps."""
    if not is_positive_predicate(node):
        return False
    join = node.find_ancestor(exp.Join)
    return join is None or not join.side


class IsNotTrueToNot(Operator):
    id = "null.is_not_true_to_not"
    family = "null"
    effect = "fewer_rows"
    explanation = "Rewrite `x is not true` as `not x` (and `x is not false` as `x`): NULLs stop counting."
    wrong_intent = "handle the missing values with the wrong default"
    node_types = (exp.Not,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        inner = node.this
        if not (isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Boolean)):
            return []
        # the operand's text, and the same wrapped in parentheses unless it is a column, literal or call
        span, operand, value = parsed.span(node), text_of(parsed, inner.this), wrapped(parsed, inner.this)
        if span is None or operand is None or value is None:
            return []
        raw = parsed.text[span[0] : span[1]]
        truth = inner.expression.this
        new = f"{same_case(raw[-4:], 'not')} {value}" if truth else value
        fill = "true" if truth else "false"
        wrong = [
            Edit(span[0], span[0] + len(new), f"not coalesce({operand}, {fill})")
            if truth
            else Edit(span[0], span[0] + len(new), f"coalesce({value}, {fill})"),
            Edit(span[0], span[0] + len(new), f"{value} = {'false' if truth else 'true'}"),
        ]
        # it drops rows only where it filters; in a select list or a LEFT JOIN's ON it changes values
        return self.site(parsed, *span, new, wrong, effect="" if _filters(node) else "changed_values")


class DistinctFromToNeq(Operator):
    id = "null.distinct_from_to_neq"
    family = "null"
    effect = "fewer_rows"
    explanation = "Rewrite `a is [not] distinct from b` as `a <> b` / `a = b`: NULL pairs drop out."
    wrong_intent = "handle a missing value on one side only"
    node_types = (exp.NullSafeNEQ, exp.NullSafeEQ)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        span, left, right = parsed.span(node), text_of(parsed, node.this), text_of(parsed, node.expression)
        if span is None or left is None or right is None:
            return []
        op = "<>" if isinstance(node, exp.NullSafeNEQ) else "="
        new = f"{left} {op} {right}"
        wrong = [Edit(span[0], span[0] + len(new), f"({left} {op} {right} or {left} is null)")]
        # it drops rows only where it filters; in a select list or a LEFT JOIN's ON it changes values
        return self.site(parsed, *span, new, wrong, effect="" if _filters(node) else "changed_values")


class DropCoalesceBool(Operator):
    id = "null.drop_coalesce_bool"
    family = "null"
    effect = "changed_values"
    explanation = "Drop a boolean coalesce default, `coalesce(b, false)` → `b`, where NULL then differs from FALSE."
    wrong_intent = "coalesce to the wrong default"
    node_types = (exp.Coalesce,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        rest = node.expressions
        if len(rest) != 1 or not isinstance(rest[0], exp.Boolean):
            return []
        default = rest[0].this
        if is_positive_predicate(node) and default is False:
            return []  # NULL and FALSE filter alike in a plain positive WHERE: equivalent
        span, value = parsed.span(node), wrapped(parsed, node.this)
        if span is None or value is None:
            return []
        arg = text_of(parsed, node.this)
        flipped = "true" if default is False else "false"
        wrong = [Edit(span[0], span[0] + len(value), f"coalesce({arg}, {flipped})")]
        return self.site(parsed, *span, value, wrong)


class FlipIsNull(Operator):
    id = "null.flip_is_null"
    family = "null"
    effect = "changed_values"
    explanation = "Flip `is null` and `is not null`."
    wrong_intent = "remove the null check instead of fixing it"
    node_types = (exp.Is,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        if not isinstance(node.expression, exp.Null):
            return []
        span = parsed.span(node)
        left = parsed.span(node.this)
        if span is None or left is None:
            return []
        if isinstance(node.parent, exp.Not) and parsed.span(node.parent) == span:
            tok = token_between(parsed, left[1], span[1], ["NOT"])
            if tok is None:
                return []
            end = tok.end + 1
            while end < span[1] and parsed.text[end].isspace():
                end += 1
            edit = Edit(tok.start, end, "")
            owner: exp.Expression = node.parent
        else:
            tok = token_between(parsed, left[1], span[1], ["NULL"])
            if tok is None:
                return []
            word = parsed.text[tok.start : tok.end + 1]
            edit = Edit(tok.start, tok.start, same_case(word, "not") + " ")
            owner = node
        # in a filter the flip swaps the rows kept (more or fewer); elsewhere it changes values
        effect = "changed_rows" if is_positive_predicate(owner) else ""
        return self.site(
            parsed, edit.start, edit.end, edit.replacement, [drop_mutated_conjunct(parsed, owner, edit)], effect=effect
        )


class DropCoalesceDefault(Operator):
    id = "null.drop_coalesce_default"
    family = "null"
    effect = "changed_values"
    explanation = "Drop a numeric coalesce default inside arithmetic or an aggregate: NULL now propagates."
    wrong_intent = "coalesce the whole result instead of the missing input"
    node_types = (exp.Coalesce,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        rest = node.expressions
        if len(rest) != 1 or not (isinstance(rest[0], exp.Literal) and rest[0].is_number):
            return []
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        if not isinstance(parent, (*_ARITHMETIC, exp.AggFunc)):
            return []
        span, value = parsed.span(node), wrapped(parsed, node.this)
        outer = parsed.span(parent)
        if span is None or value is None or outer is None:
            return []
        edit = Edit(span[0], span[1], value)
        mutated_outer = parsed.text[outer[0] : span[0]] + value + parsed.text[span[1] : outer[1]]
        default = text_of(parsed, rest[0])
        wrong: list[Edit | WrongRepair] = [
            Edit(outer[0], outer[1] + edit.delta, f"coalesce({mutated_outer}, {default})")
        ]
        other = "1" if default != "1" else "0"
        wrong.append(
            WrongRepair(
                span[0],
                span[0] + len(value),
                f"coalesce({text_of(parsed, node.this)}, {other})",
                "coalesce to the wrong default",
            )
        )
        return self.site(parsed, *span, value, wrong)


class CountStarToColumn(Operator):
    id = "null.count_star_to_column"
    family = "null"
    effect = "changed_values"
    explanation = "Replace `count(*)` by `count(col)` of a column the same SELECT uses: NULL rows stop counting."
    wrong_intent = "count distinct values instead of rows"
    node_types = (exp.Count,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        if not isinstance(node.this, exp.Star):
            return []
        select = node.find_ancestor(exp.Select)
        star = parsed.span(node.this)
        if not isinstance(select, exp.Select) or star is None:
            return []
        column = _plain_column(parsed, select)
        if column is None:
            return []
        wrong = [Edit(star[0], star[0] + len(column), f"distinct {column}")]
        return self.site(parsed, *star, column, wrong)


def _plain_column(parsed: MaskedFile, select: exp.Select) -> str | None:
    """The first column a projection uses outside any aggregate."""
    for proj in select.expressions:
        for col in proj.find_all(exp.Column):
            outside_aggregates = (
                col.find_ancestor(exp.AggFunc, exp.Select) is select or col.find_ancestor(exp.AggFunc) is None
            )
            if outside_aggregates and clause_of(col) == "projection" and col.find_ancestor(exp.Select) is select:
                return text_of(parsed, col)
    return None


class CountColumnToStar(Operator):
    id = "null.count_column_to_star"
    family = "null"
    effect = "changed_values"
    explanation = "Replace `count(col)` by `count(*)`: rows where the column is NULL start counting."
    wrong_intent = "count distinct values instead of the set ones"
    node_types = (exp.Count,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        arg = node.this
        if not isinstance(arg, exp.Column):
            return []
        span = parsed.span(arg)
        if span is None:
            return []
        column = parsed.text[span[0] : span[1]]
        wrong = [Edit(span[0], span[0] + 1, f"distinct {column}")]
        return self.site(parsed, *span, "*", wrong)


OPERATORS: tuple[Operator, ...] = (
    IsNotTrueToNot(),
    DistinctFromToNeq(),
    DropCoalesceBool(),
    FlipIsNull(),
    DropCoalesceDefault(),
    CountStarToColumn(),
    CountColumnToStar(),
)

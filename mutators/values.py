"""Value operators: a CASE that maps to the wrong branch or loses its ELSE, arithmetic with the wrong
operator, a column swapped for a sibling of the same kind from the same relation."""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from dbt_harvest.mutators.edits import Edit, WrongRepair
from dbt_harvest.mutators.masking import MaskedFile
from dbt_harvest.mutators.operator import Operator, Site
from dbt_harvest.mutators.sqlfacts import keeps_output_name, sibling_column, token_between, value_kind

_ARITH: dict[type[exp.Expression], tuple[str, str, str]] = {
    # node: (operator text, replacement, the non-commutative one of the pair)
    exp.Add: ("+", "-", "-"),
    exp.Sub: ("-", "+", "-"),
    exp.Mul: ("*", "/", "/"),
    exp.Div: ("/", "*", "/"),
}


class SwapThenBranches(Operator):
    id = "values.swap_then_branches"
    family = "values"
    effect = "changed_values"
    explanation = "Swap the results of two adjacent WHEN branches (or of the only WHEN and the ELSE)."
    wrong_intent = "restore one branch, leave the other"
    node_types = (exp.Case,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        ifs = node.args.get("ifs") or []
        values = [i.args.get("true") for i in ifs]
        conds = [i.this for i in ifs]
        default = node.args.get("default")
        pairs: list[tuple[exp.Expression, exp.Expression, tuple[exp.Expression, exp.Expression] | None]] = [
            (values[k], values[k + 1], (conds[k], conds[k + 1])) for k in range(len(values) - 1)
        ]
        if len(values) == 1 and default is not None:
            pairs.append((values[0], default, None))
        out: list[Site] = []
        for a, b, _cond in pairs:
            sa, sb = parsed.span(a), parsed.span(b)
            if sa is None or sb is None or sa[1] > sb[0]:
                continue
            ta, tb = parsed.text[sa[0] : sa[1]], parsed.text[sb[0] : sb[1]]
            middle = parsed.text[sa[1] : sb[0]]
            new = tb + middle + ta
            # restore one branch and leave the other: the first result back in place, the second still
            # holding it too (a person who fixed the first rows they looked at)
            wrong: list[Edit | WrongRepair] = [
                WrongRepair(sa[0], sa[0] + len(tb), ta, "restore one branch, leave the other")
            ]
            out += self.site(parsed, sa[0], sb[1], new, wrong)
        return out


class DropElse(Operator):
    id = "values.drop_else"
    family = "values"
    effect = "changed_values"
    explanation = "Drop the ELSE of a CASE: unmatched rows get NULL."
    wrong_intent = "give unmatched rows the wrong default"
    node_types = (exp.Case,)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        default, ifs = node.args.get("default"), node.args.get("ifs") or []
        if default is None or not ifs or isinstance(default, exp.Null):
            return []
        last, dspan = parsed.span(ifs[-1]), parsed.span(default)
        if last is None or dspan is None:
            return []
        tok = token_between(parsed, last[1], dspan[0], ["ELSE"])
        if tok is None:
            return []
        start = last[1]
        guess = "0" if not (isinstance(default, exp.Literal) and default.this == "0") else "null"
        if isinstance(default, exp.Literal) and default.is_string:
            guess = "''" if default.this else "null"
        wrong = [Edit(start, start, f" else {guess}")]
        return self.site(parsed, start, dspan[1], "", wrong)


class SwapArithmetic(Operator):
    id = "values.swap_arithmetic"
    family = "values"
    effect = "changed_values"
    explanation = "Swap + and -, or * and /."
    wrong_intent = "restore the operator with its operands the wrong way round"
    node_types = tuple(_ARITH)

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        if any(isinstance(c, exp.Literal) and c.is_string for c in (node.this, node.expression)):
            return []
        left, right = parsed.span(node.this), parsed.span(node.expression)
        if left is None or right is None:
            return []
        old, new, noncomm = _ARITH[type(node)]
        tok = token_between(parsed, left[1], right[0], [old])
        if tok is None:
            return []
        lt, rt = parsed.text[left[0] : left[1]], parsed.text[right[0] : right[1]]
        gap_end = right[1] + (len(new) - len(old))
        # swapping the operands of a difference is a slip people make; of a division by a constant
        # (`100 / amount`) or a product, it is no repair anyone would write
        plausible = noncomm == "-" and not any(isinstance(c, exp.Literal) for c in (node.this, node.expression))
        wrong: list[Edit | WrongRepair] = [Edit(left[0], gap_end, f"{rt} {noncomm} {lt}")] if plausible else []
        # the operator restored, over another column of the right operand's kind; never `a - a`, and never
        # against a constant (`1 - discount` is a rate: `1 - unit_price` is no repair anyone would write)
        other = None if isinstance(node.this, exp.Literal) else sibling_column(parsed, node.expression)
        if other is not None and other.rsplit(".", 1)[-1] != getattr(node.this, "name", None):
            between = parsed.text[left[1] : tok.start]
            after = parsed.text[tok.end + 1 : right[0]]
            wrong.append(
                WrongRepair(
                    left[0],
                    gap_end,
                    f"{lt}{between}{old}{after}{other}",
                    "restore the operator, over another column of the same kind",
                )
            )
        return self.site(parsed, tok.start, tok.end + 1, new, wrong)


class SwapSiblingColumn(Operator):
    id = "values.swap_sibling_column"
    family = "values"
    effect = "changed_values"
    explanation = "Select a sibling column of the same kind from the same relation (an amount for an amount)."
    wrong_intent = "switch to yet another column of the same kind"
    node_types = (exp.Column,)
    clauses = frozenset({"projection"})

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        assert isinstance(node, exp.Column)  # node_types
        assert parsed.tree is not None  # sites() looks only into a parsed file
        if not node.table or node.find_ancestor(exp.Window):
            return []
        kind = _kind(node.name)
        ident = node.this
        meta = ident.meta if isinstance(ident, exp.Identifier) else {}
        if kind is None or "start" not in meta:
            return []
        start, end = meta["start"], meta["end"] + 1
        if parsed.text[start:end] != node.name:
            return []
        # only siblings spelled in the file itself: a name made of a Jinja placeholder is no column
        siblings = sorted(
            {
                c.name
                for c in parsed.tree.find_all(exp.Column)
                if c.table == node.table and c.name != node.name and _kind(c.name) == kind and _spelled(parsed, c)
            }
        )
        if not siblings:
            return []
        wrong = [Edit(start, start + len(siblings[0]), siblings[1])] if len(siblings) > 1 else []
        return self.site(parsed, start, end, keeps_output_name(node, siblings[0]), wrong)


def _spelled(parsed: MaskedFile, column: exp.Column) -> bool:
    ident = column.this
    meta = ident.meta if isinstance(ident, exp.Identifier) else {}
    if "start" not in meta:
        return False
    return parsed.text[meta["start"] : meta["end"] + 1] == column.name


def _kind(name: str) -> str | None:
    return value_kind(name)


OPERATORS: tuple[Operator, ...] = (SwapThenBranches(), DropElse(), SwapArithmetic(), SwapSiblingColumn())

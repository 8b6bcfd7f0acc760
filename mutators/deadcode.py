"""Dead code: parts of a model no mutation may touch because no data can ever reach them.

A constant predicate (``1 = 0``, ``1 = 1``, ``true``, ``{{ var('flag') }} = 1``) decides nothing about a
row: flipping it, negating it or changing its literal is not a business rule gone wrong but a
placeholder switched on (Fivetran packages select typed NULLs ``from dummy_cte where 1 = 0`` when a source
is disabled; turning that into ``1 != 0`` adds a row of NULLs no real project would produce). A SELECT
whose WHERE is constant false (or that ends in ``limit 0``) produces no rows, so nothing inside it is a
site either. A predicate made only of literals and Jinja values (``{{ var(…) }}``, rendered into a
constant) counts as constant: what it says is fixed before any row is read.

Pure functions over a parsed file (``MaskedFile``); ``dead_regions`` returns the half-open ranges, and a
site is dead when its edit touches one of them.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

from dbt_harvest.mutators.masking import MaskedFile, Region
from dbt_harvest.mutators.sqlfacts import predicate_clauses

#: Nodes that make a predicate depend on the rows (or on something outside the text): never constant.
_ROW_DEPENDENT: tuple[type[exp.Expr], ...] = (
    exp.Column,
    exp.Subquery,
    exp.Select,
    exp.Exists,
    exp.AggFunc,
    exp.Window,
    exp.CurrentDate,
    exp.CurrentTimestamp,
    exp.CurrentDatetime,
    exp.CurrentTime,
    exp.Rand,
    exp.Anonymous,
)
#: Boolean-valued nodes inside a predicate that are checked for constancy one by one.
_PREDICATE_NODES: tuple[type[exp.Expression], ...] = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.In,
    exp.Is,
    exp.Boolean,
    exp.Not,
    exp.Paren,
    exp.And,
    exp.Or,
    exp.Like,
    exp.ILike,
    exp.Between,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
)

#: Parents that make a node a condition of its own.
_CONNECTIVES: tuple[type[exp.Expression], ...] = (exp.And, exp.Or, exp.Not, exp.Paren)


def is_placeholder(parsed: MaskedFile, node: exp.Expression) -> bool:
    """True when ``node`` is the masked stand-in of a Jinja expression (``{{ var('x') }}``)."""
    span = parsed.span(node)
    if span is None:
        return False
    return any(tag.kind == "expr" and tag.start <= span[0] and span[1] <= tag.end for tag in parsed.tags)


def is_constant(parsed: MaskedFile, node: exp.Expression) -> bool:
    """True when ``node`` reads no row: only literals, operators and Jinja values."""
    for inner in node.walk():
        if isinstance(inner, exp.Column):
            if not is_placeholder(parsed, inner):
                return False
        elif isinstance(inner, _ROW_DEPENDENT):
            return False
    return True


def always_false(parsed: MaskedFile, condition: exp.Expression) -> bool:
    """True when a condition without Jinja values simplifies to FALSE (``1 = 0``, ``false``, ``1 = 2``)."""
    if not is_constant(parsed, condition) or any(isinstance(n, exp.Column) for n in condition.walk()):
        return False
    try:
        simplified = simplify(condition.copy())
    except Exception:
        return False
    return isinstance(simplified, exp.Boolean) and simplified.this is False


def _empty_by_limit(select: exp.Select) -> bool:
    limit = select.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    return isinstance(value, exp.Literal) and value.is_int and int(value.this) == 0


def dead_regions(parsed: MaskedFile) -> tuple[Region, ...]:
    """Ranges of the file that only dead code occupies: constant predicates, and every SELECT whose
    WHERE is always false or whose LIMIT is 0."""
    if not parsed.parsed or parsed.tree is None:
        return ()
    found: list[Region] = []
    for clause, owner, cond in predicate_clauses(parsed.tree):
        for node in cond.walk():
            # a condition in its own right (not an operand such as the TRUE of `x is not true`)
            in_condition_position = node is cond or isinstance(node.parent, _CONNECTIVES)
            if in_condition_position and isinstance(node, _PREDICATE_NODES) and is_constant(parsed, node):
                span = parsed.span(node)
                if span is not None:
                    found.append(Region(span[0], span[1], "constant predicate"))
        if clause == "where" and always_false(parsed, cond):
            select = owner.parent
            span = parsed.span(select) if isinstance(select, exp.Select) else None
            if span is not None:
                found.append(Region(span[0], span[1], "SELECT whose WHERE is always false"))
    for select in parsed.tree.find_all(exp.Select):
        if _empty_by_limit(select):
            span = parsed.span(select)
            if span is not None:
                found.append(Region(span[0], span[1], "SELECT with LIMIT 0"))
    return tuple(sorted(set(found), key=lambda r: (r.start, r.end, r.why)))


def touches_dead_code(regions: tuple[Region, ...], start: int, end: int) -> str:
    """Why an edit of [start, end) touches dead code ('' when it does not)."""
    for region in regions:
        if region.overlaps(start, end):
            return region.why
    return ""


__all__ = ["always_false", "dead_regions", "is_constant", "is_placeholder", "touches_dead_code"]

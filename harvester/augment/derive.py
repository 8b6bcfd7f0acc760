"""Distinguishing data, the pure part: which seed row would make an invisible mutant visible.

For a candidate that screening rejected as ``equivalent`` or ``invisible`` (the pin's seeds never
exercise the mutated node), derive the condition under which mutant and original differ at that node,
and the fewest seed rows (one per candidate) that make it true:

- ``null``: a NULL in a column the mutated node reads (``coalesce(bonus, 0)`` dropped: a row whose
  ``bonus`` is NULL);
- ``time``: a value of the compared column on which the original and the mutated comparison disagree,
  relative to the pinned clock (found by ``probe``: the caller evaluates both comparisons over a range
  of days, hours and minutes around the clock, in the locked-down DuckDB);
- ``filter`` (value): the same, probing the comparison's own literals (a row with the filtered value);
- ``join``: a left-input row whose key matches nothing (``left join`` -> ``join`` drops it);
- ``grain``: a twin of a real row (only its key is fresh), the duplicate a DISTINCT or grain hides.

A row is made by cloning an existing row of the seed that holds the column (types, accepted values and
foreign keys then stay those of real rows), setting the column, and giving its key column (``id``, or
the first unique ``…id`` column) a value no row has. Nothing here reads files or runs SQL: seeds arrive
as parsed ``SeedTable``s and the probe as a function.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlglot
from sqlglot import exp

from dbt_harvest.core.patching import make_patch
from dbt_harvest.harvester.augment.trace import Lineage, trace

#: families whose distinguishing condition this module can derive
FAMILIES = ("null", "time", "filter", "join", "grain")
#: join operators whose mutant and original differ on a left row without a match
UNMATCHED_JOIN_OPERATORS = ("join.left_to_inner", "join.inner_to_left", "join.on_to_where")
#: null operators that swap ``count(*)`` and ``count(col)``: they differ only on a counted row whose ``col`` is
#: NULL, and their wrong repair (``count(distinct col)``) only where a value repeats within a group
COUNT_OPERATORS = ("null.count_star_to_column", "null.count_column_to_star")
#: screening reasons that mean "the data cannot tell the mutant from the original"
INVISIBLE_REASONS = ("equivalent", "invisible")
#: screening/confirm reasons that mean "visible, but no wrong repair is informative on this data"
WEAK_REASONS = ("no_wrong_repair",)
#: a SeedRow value meaning "a value no row of any seed in the patch has in this column" (assigned by render)
FRESH = "\x00fresh"
#: join operators whose wrong repairs (right / full outer join) differ from the mutant only when the joined
#: side also has a row without a match
ORPHAN_WRONG_REPAIR_OPERATORS = ("join.left_to_inner", "join.inner_to_left")
#: how far around the clock the time probe looks, in days (the past first)
PROBE_DAYS = (-1200, 2)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")
_LOOSE_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{1,2}:\d{2}(:\d{2})?\S*)?$")
_COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ, exp.NEQ, exp.Between, exp.In, exp.Like, exp.ILike)


@dataclass(frozen=True)
class SeedTable:
    """One seed CSV: its repo-relative path, header and rows (strings as the file holds them)."""

    name: str  # the seed's dbt name (lower-case)
    path: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    text: str  # the file's text, for the patch

    @classmethod
    def parse(cls, name: str, path: str, text: str) -> SeedTable:
        records = list(csv.reader(io.StringIO(text)))
        if not records:
            return cls(name.lower(), path, (), (), text)
        header = tuple(records[0])
        rows = tuple(tuple(r) for r in records[1:] if r and len(r) == len(header))
        return cls(name.lower(), path, header, rows, text)

    def column(self, name: str) -> int | None:
        lowered = [h.strip().lower() for h in self.header]
        return lowered.index(name.lower()) if name.lower() in lowered else None


@dataclass(frozen=True)
class SeedRow:
    """One row to add: cloned from ``template`` (a row index of ``seed``), with ``values`` set."""

    seed: str
    template: int
    values: tuple[tuple[str, str], ...]  # (column, value as the CSV writes it; '' is NULL)


@dataclass(frozen=True)
class Proposal:
    """The distinguishing condition of one candidate and the seed row that makes it true; ``extra``: rows
    that make the operator's wrong repairs differ from the mutant too (an orphan on the joined side,
    where a wrong repair swaps the join type), never needed for the mutant itself to be visible."""

    key: str
    family: str
    operator: str
    condition: str
    row: SeedRow
    extra: tuple[SeedRow, ...] = ()
    for_wrong_repair: bool = False  # the mutant is visible already: only ``extra`` serves the candidate

    @property
    def rows(self) -> tuple[SeedRow, ...]:
        return (self.row, *self.extra)


class NoProposal(Exception):
    """Why no distinguishing row could be derived for a candidate (one line, for the report)."""


Probe = Callable[[str, str, str, tuple[str, ...]], str | None]
"""``probe(original_comparison, mutated_comparison, placeholder, values)`` -> a value of ``placeholder``
on which the two comparisons disagree, or None. ``values`` are SQL literals to try; empty: days around
the pinned clock (the answer is then an ISO timestamp)."""


def _parse(sql: str) -> exp.Expression | None:
    try:
        tree = sqlglot.parse_one(sql, dialect="duckdb")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return None
    return tree if isinstance(tree, exp.Expression) else None  # sqlglot types it as its Expr trait


def _fragment_columns(fragment: str) -> list[str]:
    tree = _parse(f"select {fragment}")
    return [] if tree is None else [c.name for c in tree.find_all(exp.Column) if c.name]


def _comparisons(tree: exp.Expression) -> list[exp.Expression]:
    return [n for n in tree.walk() if isinstance(n, _COMPARISONS)]


def changed_comparison(original_sql: str, mutated_sql: str) -> tuple[exp.Expression, exp.Expression] | None:
    """The first comparison whose text differs between the two compiled statements (same position)."""
    a, b = _parse(original_sql), _parse(mutated_sql)
    if a is None or b is None:
        return None
    left, right = _comparisons(a), _comparisons(b)
    if len(left) != len(right):
        return None
    for x, y in zip(left, right):
        if x.sql(dialect="duckdb") != y.sql(dialect="duckdb"):
            return x, y
    return None


def seed_with_column(
    column: str, seeds: Sequence[SeedTable], upstream: frozenset[str], choose: int = 0
) -> SeedTable | None:
    """The ``choose``-th seed holding ``column``, those upstream of the model first (None past the last)."""
    holders = [s for s in seeds if s.column(column) is not None and s.rows]
    holders.sort(key=lambda s: (s.name not in upstream, s.name))
    return holders[choose] if choose < len(holders) else None


def _format_like(existing: Sequence[str], stamp: str) -> str:
    sample = next((v for v in existing if v), "")
    if _DATE.match(sample):
        return stamp[:10]
    if _STAMP.match(sample):
        return stamp[:10] + sample[10] + stamp[11:19] + sample[19:]
    if _LOOSE_STAMP.match(sample) and len(sample) > 10:  # 2021-12-23 6:20:04: a time of day, written whole
        return stamp[:10] + sample[10] + stamp[11:19]
    return stamp[:10]


#: the name a probed comparison reads its compared column by
_PLACEHOLDER = "__harvest_probe"


@dataclass(frozen=True)
class _Edit:
    """One candidate's edit as the derivations read it: its identity, the mutated text before and after,
    and the model's whole compiled SQL before and after."""

    key: str
    family: str
    operator: str
    original_span: str
    replacement: str
    original_sql: str
    mutated_sql: str

    def proposal(self, condition: str, row: SeedRow, extra: tuple[SeedRow, ...] = ()) -> Proposal:
        """A proposal for this candidate."""
        return Proposal(self.key, self.family, self.operator, condition, row, extra)

    def columns(self) -> list[str]:
        """The columns the mutated text reads, before then after the edit."""
        return _fragment_columns(self.original_span) + _fragment_columns(self.replacement)

    def qualified_columns(self) -> list[tuple[str, str]]:
        """The (table, column) pairs the mutated text reads, before then after the edit."""
        return _qualified_columns(self.original_span) + _qualified_columns(self.replacement)


def _bind(node: exp.Expression, column: str) -> str:
    """The comparison's SQL with ``column`` read as the probe's placeholder."""
    bound = node.copy().transform(
        lambda n: exp.column(_PLACEHOLDER) if isinstance(n, exp.Column) and n.name == column else n
    )
    return bound.sql(dialect="duckdb")


def propose(
    key: str,
    family: str,
    operator: str,
    original_span: str,
    replacement: str,
    original_sql: str,
    mutated_sql: str,
    seeds: Sequence[SeedTable],
    upstream: frozenset[str],
    probe: Probe,
    choose: int = 0,
    lineage: Lineage | None = None,
) -> Proposal:
    """The row that distinguishes one candidate, or NoProposal saying why there is none.

    ``original_span``/``replacement``: the mutated text before and after (in the compiled SQL);
    ``original_sql``/``mutated_sql``: the model's whole compiled SQL before and after the edit.
    ``choose``: which alternative to use (0: the likeliest; the caller tries the next ones when a screen
    says the row does not reach the mutated node). With ``lineage``, the alternatives traced through the
    models' SELECT expressions back to seed columns (``traced``) come first, then those found by name.
    """
    edit = _Edit(key, family, operator, original_span, replacement, original_sql, mutated_sql)
    if lineage is not None:
        alternatives = _traced(edit, {s.name: s for s in seeds}, lineage, probe)
        if choose < len(alternatives):
            return alternatives[choose]
        choose -= len(alternatives)
        _refuse_untraced(edit, alternatives)
    if family == "null":
        return _null_by_name(edit, seeds, upstream, choose)
    if family in ("time", "filter"):
        return _comparison_by_name(edit, seeds, upstream, probe, choose)
    if family == "join":
        return _join_by_name(edit, seeds, upstream, choose)
    if family == "grain":
        return _grain_by_name(edit, seeds, upstream, choose)
    raise NoProposal(f"family {family} has no derivation yet")


def _refuse_untraced(edit: _Edit, alternatives: Sequence[Proposal]) -> None:
    """NoProposal for the operators whose column found by name never reaches the node (a dropped join key,
    a counted column): past the traced alternatives, none is left."""
    if edit.family == "join" and edit.operator == "join.drop_on_key":
        raise NoProposal(
            "the dropped key traces to no seed column (a constant, or SQL lineage cannot follow)"
            if not alternatives
            else "no traced seed column left to try"
        )
    if edit.operator in COUNT_OPERATORS:  # a same-named column of another seed never reaches this count
        raise NoProposal(
            "the counted column traces to no seed column (a constant such as source_relation, "
            "or SQL lineage cannot follow): count(col) equals count(*) on any data"
            if not alternatives
            else "no traced seed column left to try"
        )


def _null_by_name(edit: _Edit, seeds: Sequence[SeedTable], upstream: frozenset[str], choose: int) -> Proposal:
    """``null`` by name: a NULL in the first column of the mutated node that a seed holds."""
    columns = edit.columns()
    if not columns:
        raise NoProposal("the mutated node reads no column")
    for column in columns:
        seed = seed_with_column(column, seeds, upstream, choose)
        if seed is not None:
            return edit.proposal(f"{column} is NULL", SeedRow(seed.name, _template_row(seed, column), ((column, ""),)))
    raise NoProposal(f"no seed holds {', '.join(sorted(set(columns)))}")


def _comparison_by_name(
    edit: _Edit, seeds: Sequence[SeedTable], upstream: frozenset[str], probe: Probe, choose: int
) -> Proposal:
    """``time``/``filter`` by name: the probed value on which the changed comparison and the original
    disagree, in the seed column named like the one column it reads."""
    pair = changed_comparison(edit.original_sql, edit.mutated_sql)
    if pair is None:
        raise NoProposal("no comparison changed (the time node is not in a predicate)")
    original, mutated = pair
    columns = sorted({c.name for c in original.find_all(exp.Column) if c.name})
    if len(columns) != 1:
        raise NoProposal(f"the comparison reads {len(columns)} columns, not one")
    column = columns[0]
    seed = seed_with_column(column, seeds, upstream, choose)
    if seed is None:
        raise NoProposal(f"no seed holds {column}")
    index = seed.column(column)
    assert index is not None
    if edit.family == "filter":
        values = literal_probes(original, mutated)
        if not values:
            raise NoProposal("the comparison holds no literal to try")
        found = probe(_bind(original, column), _bind(mutated, column), _PLACEHOLDER, values)
        if found is None:
            raise NoProposal("no literal of the comparison separates it from the mutant")
        value = found
    else:
        found = probe(_bind(original, column), _bind(mutated, column), _PLACEHOLDER, ())
        if found is None:
            raise NoProposal(
                f"no day within {PROBE_DAYS} of the clock (nor hour or minute near it) separates the comparisons"
            )
        value = _format_like([r[index] for r in seed.rows], found)
    return edit.proposal(
        f"{column} = {found[:19]}", SeedRow(seed.name, _template_row(seed, column), ((column, value),))
    )


def _join_by_name(edit: _Edit, seeds: Sequence[SeedTable], upstream: frozenset[str], choose: int) -> Proposal:
    """``join`` by name (unmatched operators): a row of the left input's seed whose key matches nothing."""
    if edit.operator not in UNMATCHED_JOIN_OPERATORS:
        raise NoProposal(f"{edit.operator} has no derivation yet")
    found_join = unmatched_join_column(edit.original_sql, edit.mutated_sql)
    if found_join is None:
        raise NoProposal("no changed join with a column = column key on its left input")
    column, outer, joined = found_join
    # the left input's seed: named like the left relation, never the joined one
    holders = [s for s in seeds if s.column(column) is not None and s.rows and s.name != joined]
    holders.sort(key=lambda s: (outer not in s.name, s.name not in upstream, s.name))
    seed = holders[choose] if choose < len(holders) else None
    if seed is None:
        raise NoProposal(f"no seed holds {column}")
    index = seed.column(column)
    assert index is not None
    existing = [r[index] for r in seed.rows]
    return edit.proposal(
        f"{column} has no match",
        SeedRow(seed.name, _template_row(seed, column), ((column, _fresh(existing, set(existing))),)),
    )


def _grain_by_name(edit: _Edit, seeds: Sequence[SeedTable], upstream: frozenset[str], choose: int) -> Proposal:
    """``grain`` by name: a twin of a real row (a fresh key only), the duplicate the grain hides."""
    columns = edit.columns()
    for column in columns:
        seed = seed_with_column(column, seeds, upstream, choose)
        if seed is not None:
            return edit.proposal(f"two rows share {column}", SeedRow(seed.name, _template_row(seed, column), ()))
    raise NoProposal("no seed holds a column of the mutated node" if columns else "the mutated node reads no column")


def _qualified_columns(fragment: str) -> list[tuple[str, str]]:
    tree = _parse(f"select {fragment}")
    return [] if tree is None else [(c.table, c.name) for c in tree.find_all(exp.Column) if c.name]


def _aggregate_group_columns(tree: exp.Expression | None, fragment: str) -> list[tuple[str, str]] | None:
    """Where ``fragment`` (the mutated coalesce) is the argument of a SUM, MIN or MAX of a grouped SELECT of
    ``tree``: the columns that SELECT's GROUP BY keys read (``group by 1`` resolved to its projection);
    None elsewhere (arithmetic, an ungrouped aggregate)."""
    target = _parse(f"select {fragment}")
    if tree is None or not isinstance(target, exp.Select) or not target.expressions:
        return None
    wanted = target.expressions[0].sql(dialect="duckdb")
    for node in tree.find_all(exp.Coalesce):
        if node.sql(dialect="duckdb") != wanted:
            continue
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        select = node.find_ancestor(exp.Select)
        group = select.args.get("group") if isinstance(select, exp.Select) else None
        if (
            not isinstance(parent, (exp.Sum, exp.Min, exp.Max))
            or not isinstance(select, exp.Select)
            or not isinstance(group, exp.Group)
        ):
            continue
        out: list[tuple[str, str]] = []
        for key in group.expressions:
            if isinstance(key, exp.Literal) and key.is_int:
                index = int(key.this) - 1
                if not 0 <= index < len(select.expressions):
                    continue
                key = select.expressions[index]
                key = key.this if isinstance(key, exp.Alias) else key
            out += [(c.table, c.name) for c in key.find_all(exp.Column) if c.name]
        return out
    return None


def changed_join(original_sql: str, mutated_sql: str) -> tuple[exp.Join, exp.Join | None] | None:
    """The first join the edit changed (original, mutated; the mutated one None when it was removed)."""
    a, b = _parse(original_sql), _parse(mutated_sql)
    if a is None or b is None:
        return None
    left, right = list(a.find_all(exp.Join)), list(b.find_all(exp.Join))
    for x, y in zip(left, right):
        if x.sql(dialect="duckdb") != y.sql(dialect="duckdb"):
            return x, y
    return (left[-1], None) if len(left) > len(right) else None


def _join_keys(join: exp.Join) -> list[tuple[exp.Column, exp.Column]]:
    """(outer side, joined side) of every ``column = column`` key of the join's ON."""
    joined = join.this.alias_or_name if isinstance(join.this, exp.Expression) else ""
    condition = join.args.get("on")
    out = []
    for eq in condition.find_all(exp.EQ) if isinstance(condition, exp.Expression) else ():
        sides = [eq.this, eq.expression]
        if all(isinstance(c, exp.Column) for c in sides):
            inner = [c for c in sides if c.table == joined]
            outer = [c for c in sides if c.table and c.table != joined]
            if inner and outer:
                out.append((outer[0], inner[0]))
    return out


def _traced_rows(
    sql: str, table: str, column: str, value: str, seeds: Mapping[str, SeedTable], lineage: Lineage
) -> list[SeedRow]:
    """One row per seed column ``table.column`` is computed from, that column set to ``value``."""
    out = []
    for seed_name, seed_column in trace(sql, table, column, lineage):
        seed = seeds.get(seed_name)
        if seed is not None and seed.rows and seed.column(seed_column) is not None:
            out.append(SeedRow(seed.name, _template_row(seed, seed_column), ((seed_column, value),)))
    return out


def traced(
    key: str,
    family: str,
    operator: str,
    original_span: str,
    replacement: str,
    original_sql: str,
    mutated_sql: str,
    seeds: Mapping[str, SeedTable],
    lineage: Lineage,
    probe: Probe,
) -> list[Proposal]:
    """The alternatives found by tracing the columns the node reads back to seed columns, likeliest first:

    - ``null``: where the column belongs to the joined side of a LEFT JOIN, an outer row whose join key
      matches nothing (the NULL an unmatched join makes); then a NULL in each seed column it is computed from;
      for ``count(*)`` <-> ``count(col)`` (``COUNT_OPERATORS``) a NULL in the seed column the counted column
      comes from, and (``extra``) a twin of that row, for the ``count(distinct col)`` wrong repair; for a
      default dropped inside SUM/MIN/MAX of a grouped SELECT (which skip a NULL) the NULL row first with
      fresh values in the seed columns its GROUP BY keys come from: a group whose only row is NULL;
    - ``join`` (unmatched operators): an outer row whose traced key matches nothing, and, for the join-type
      operators, an orphan of the joined side too (``extra``: the right / full outer wrong repairs then
      differ from the mutant);
    - ``join.drop_on_key``: a twin of a row of the joined side whose dropped key (traced) is fresh: the
      remaining keys match it too, so the mutant fans out;
    - ``time.swap_timestamp_columns``: a twin of a row of the seed both columns come from, with the
      column the mutant reads instead moved a day on, and (``extra``) a twin whose date and timestamp
      columns are all set apart (``spread_timestamps``), for wrong repairs that read a third column;
    - ``time``/``filter``: the probed value in the seed column the compared column is computed from, and
      (``extra``) a value both comparisons reject, so that removing the bound (the operators' wrong repair)
      differs from the mutant as well as from the original.
    """
    edit = _Edit(key, family, operator, original_span, replacement, original_sql, mutated_sql)
    return _traced(edit, seeds, lineage, probe)


def _traced(edit: _Edit, seeds: Mapping[str, SeedTable], lineage: Lineage, probe: Probe) -> list[Proposal]:
    """``traced`` over one edit: the derivation its operator and family call for, once each."""
    family, operator = edit.family, edit.operator
    if operator in COUNT_OPERATORS:
        out = _traced_count(edit, seeds, lineage)
    elif family == "null":
        out = _traced_null(edit, seeds, lineage)
    elif family == "join" and operator in UNMATCHED_JOIN_OPERATORS:
        out = _traced_unmatched_join(edit, seeds, lineage)
    elif family == "join" and operator == "join.drop_on_key":
        out = _traced_dropped_key(edit, seeds, lineage)
    elif operator == "time.swap_timestamp_columns":
        out = _traced_swapped_timestamps(edit, seeds, lineage)
    elif family in ("time", "filter"):
        out = _traced_comparison(edit, seeds, lineage, probe)
    else:
        out = []
    if family == "null":
        out += _unmasking(edit.key, family, operator, edit.original_sql, edit.mutated_sql, seeds, lineage)
    return list(dict.fromkeys(out))


def _traced_count(edit: _Edit, seeds: Mapping[str, SeedTable], lineage: Lineage) -> list[Proposal]:
    """``count(*)`` <-> ``count(col)``: a NULL in the seed column the counted column comes from, and a twin."""
    # count(*) and count(col) differ on a counted row whose col is NULL: a clone of a real row (it reaches
    # the count the way that row does) with the seed column col comes from set NULL. extra: a twin of
    # the same row (a fresh key only), so col repeats within its group and the wrong repair,
    # count(distinct col), differs from the mutant as well as from the original
    out: list[Proposal] = []
    for table, column in dict.fromkeys(edit.qualified_columns()):
        out += [
            edit.proposal(
                f"a counted {column} is NULL (seed {row.seed}.{row.values[0][0]})",
                row,
                (SeedRow(row.seed, row.template, ()),),
            )
            for row in _traced_rows(edit.original_sql, table, column, "", seeds, lineage)
        ]
    return out


def _traced_null(edit: _Edit, seeds: Mapping[str, SeedTable], lineage: Lineage) -> list[Proposal]:
    """``null``: per column the node reads, unmatched outer rows of the LEFT JOIN it comes from, then NULLs
    in the seed columns it is computed from."""
    tree = _parse(edit.original_sql)
    out: list[Proposal] = []
    for table, column in dict.fromkeys(edit.qualified_columns()):
        out += _unmatched_left_join(edit, tree, table, seeds, lineage)
        out += _null_rows(edit, tree, table, column, seeds, lineage)
    return out


def _unmatched_left_join(
    edit: _Edit, tree: exp.Expression | None, table: str, seeds: Mapping[str, SeedTable], lineage: Lineage
) -> list[Proposal]:
    """Where ``table`` is the joined side of a LEFT JOIN: an outer row whose key (traced) matches nothing."""
    out: list[Proposal] = []
    for join in tree.find_all(exp.Join) if tree is not None and table else ():
        if join.side != "LEFT" or not isinstance(join.this, exp.Expression) or join.this.alias_or_name != table:
            continue
        for outer, _ in _join_keys(join):
            out += [
                edit.proposal(f"{outer.sql()} has no match in {table}", row)
                for row in _traced_rows(edit.original_sql, outer.table, outer.name, FRESH, seeds, lineage)
            ]
    return out


def _null_rows(
    edit: _Edit,
    tree: exp.Expression | None,
    table: str,
    column: str,
    seeds: Mapping[str, SeedTable],
    lineage: Lineage,
) -> list[Proposal]:
    """A NULL in each seed column ``table.column`` is computed from; for a default dropped inside a grouped
    SUM/MIN/MAX of ``tree``, first the same row in a group of its own."""
    groups = (
        _aggregate_group_columns(tree, edit.original_span) if edit.operator == "null.drop_coalesce_default" else None
    )
    out: list[Proposal] = []
    for row in _traced_rows(edit.original_sql, table, column, "", seeds, lineage):
        # sum/min/max skip a NULL: it shows only in a group whose every row is NULL, so the row
        # first gets fresh values in the seed columns the GROUP BY keys come from (a group of its own)
        alone = tuple(
            dict.fromkeys(
                (seed_column, FRESH)
                for t, c in (groups or ())
                for s_, seed_column in trace(edit.original_sql, t, c, lineage)
                if s_ == row.seed and seed_column != row.values[0][0]
            )
        )
        if alone:
            out.append(
                edit.proposal(
                    f"{column} is NULL in a group of its own (seed {row.seed}.{row.values[0][0]})",
                    SeedRow(row.seed, row.template, row.values + alone),
                )
            )
        out.append(edit.proposal(f"{column} is NULL (seed {row.seed}.{row.values[0][0]})", row))
    return out


def _traced_unmatched_join(edit: _Edit, seeds: Mapping[str, SeedTable], lineage: Lineage) -> list[Proposal]:
    """``join`` (unmatched operators): an outer row whose traced key matches nothing, with an orphan of the
    joined side (``extra``) for the join-type operators."""
    pair = changed_join(edit.original_sql, edit.mutated_sql)
    out: list[Proposal] = []
    for outer, inner in _join_keys(pair[0]) if pair is not None else []:
        orphans = (
            tuple(_traced_rows(edit.original_sql, inner.table, inner.name, FRESH, seeds, lineage)[:1])
            if edit.operator in ORPHAN_WRONG_REPAIR_OPERATORS
            else ()
        )
        out += [
            edit.proposal(f"{outer.sql()} has no match", row, tuple(o for o in orphans if o.seed != row.seed))
            for row in _traced_rows(edit.original_sql, outer.table, outer.name, FRESH, seeds, lineage)
        ]
    return out


def _traced_dropped_key(edit: _Edit, seeds: Mapping[str, SeedTable], lineage: Lineage) -> list[Proposal]:
    """``join.drop_on_key``: a twin of a joined-side row whose dropped key (traced) is fresh."""
    pair = changed_join(edit.original_sql, edit.mutated_sql)
    if pair is None:
        return []
    original, mutated = pair
    kept = {c.sql(dialect="duckdb") for c in (mutated.find_all(exp.EQ) if mutated is not None else ())}
    out: list[Proposal] = []
    for outer, inner in _join_keys(original):
        if (
            exp.EQ(this=outer.copy(), expression=inner.copy()).sql(dialect="duckdb") in kept
            or exp.EQ(this=inner.copy(), expression=outer.copy()).sql(dialect="duckdb") in kept
        ):
            continue  # a key the mutant still has
        out += [
            edit.proposal(f"two {inner.table} rows agree on every key but {inner.name}", row)
            for row in _traced_rows(edit.original_sql, inner.table, inner.name, FRESH, seeds, lineage)
        ]
    return out


def _traced_swapped_timestamps(edit: _Edit, seeds: Mapping[str, SeedTable], lineage: Lineage) -> list[Proposal]:
    """``time.swap_timestamp_columns``: a twin with the column the mutant reads instead moved a day on, and
    (``extra``) a twin whose date and timestamp columns are all apart."""
    before, after = _qualified_columns(edit.original_span), _qualified_columns(edit.replacement)
    if not before or not after:
        return []
    (table, column), (other_table, other) = before[0], after[0]
    out: list[Proposal] = []
    for seed_name, seed_column in trace(edit.original_sql, table, column, lineage):
        traced_other = {
            c for s_, c in trace(edit.original_sql, other_table or table, other, lineage) if s_ == seed_name
        }
        seed = seeds.get(seed_name)
        if seed is None or not seed.rows or not traced_other - {seed_column}:
            continue
        spread = spread_timestamps(seed)
        index = seed.column(seed_column)
        if spread is None or index is None:
            continue
        # the row: the column read for the other one moved a day on; extra: every timestamp of a
        # row apart, so a wrong repair reading a third column differs from the mutant too
        moved = dict(spread.values).get(seed.header[index].strip())
        if moved is not None:
            out.append(
                edit.proposal(
                    f"{column} and {other} differ",
                    SeedRow(seed.name, spread.template, ((seed.header[index].strip(), moved),)),
                    (spread,),
                )
            )
    return out


def _traced_comparison(edit: _Edit, seeds: Mapping[str, SeedTable], lineage: Lineage, probe: Probe) -> list[Proposal]:
    """``time``/``filter``: the probed value in each seed column the compared column comes from, and
    (``extra``) a value both comparisons reject."""
    pair = changed_comparison(edit.original_sql, edit.mutated_sql)
    if pair is None:
        return []
    original, mutated = pair
    cols = {(c.table, c.name) for c in original.find_all(exp.Column) if c.name}
    if len(cols) != 1:
        return []
    ((table, column),) = cols
    values = literal_probes(original, mutated) if edit.family == "filter" else ()
    bound, rebound = _bind(original, column), _bind(mutated, column)
    found = probe(bound, rebound, _PLACEHOLDER, values) if edit.family == "time" or values else None
    if found is None:
        return []
    # a value both comparisons reject: removing the bound (a wrong repair) then keeps a row
    # that neither the original nor the mutant keeps, so it differs from the mutant too
    outside = probe(f"({bound}) or ({rebound})", "true", _PLACEHOLDER, values)
    out: list[Proposal] = []
    for row in _traced_rows(edit.original_sql, table, column, "", seeds, lineage):
        seed = seeds[row.seed]
        index = seed.column(row.values[0][0])
        assert index is not None
        extra = (
            (SeedRow(row.seed, row.template, ((row.values[0][0], _shaped(edit.family, seed, index, outside)),)),)
            if outside is not None and outside != found
            else ()
        )
        out.append(
            edit.proposal(
                f"{column} = {found[:19]}",
                SeedRow(row.seed, row.template, ((row.values[0][0], _shaped(edit.family, seed, index, found)),)),
                extra,
            )
        )
    return out


def _shaped(family: str, seed: SeedTable, index: int, value: str) -> str:
    """A probed value as the seed column writes it (a filter's literal as it is)."""
    return value if family == "filter" else _format_like([r[index] for r in seed.rows], value)


def changed_projection(original_sql: str, mutated_sql: str) -> str | None:
    """The output name of the first SELECT expression the edit changed (same SELECT, same position), or
    None (lower-case)."""
    a, b = _parse(original_sql), _parse(mutated_sql)
    if a is None or b is None:
        return None
    left, right = list(a.find_all(exp.Select)), list(b.find_all(exp.Select))
    if len(left) != len(right):
        return None
    for x, y in zip(left, right):
        if len(x.expressions) != len(y.expressions):
            continue
        for p, q in zip(x.expressions, y.expressions):
            if p.sql(dialect="duckdb") != q.sql(dialect="duckdb") and p.alias_or_name:
                return p.alias_or_name.lower()
    return None


def _unmasking(
    key: str,
    family: str,
    operator: str,
    original_sql: str,
    mutated_sql: str,
    seeds: Mapping[str, SeedTable],
    lineage: Lineage,
) -> list[Proposal]:
    """Where the value the edit changes (a SELECT expression's output) is read only as a fallback of a later
    ``coalesce(a, changed)`` and ``a`` is never NULL on the seeds, the change never shows: a clone whose seed
    columns ``a`` is computed from are all NULL, so the coalesce falls back to the changed value
    (``coalesce(param_session_number, derived_session_index)``)."""
    changed = changed_projection(original_sql, mutated_sql)
    tree = _parse(original_sql)
    if changed is None or tree is None:
        return []
    out: list[Proposal] = []
    for node in tree.find_all(exp.Coalesce):
        args = [node.this, *node.expressions]
        for i, arg in enumerate(args):
            if i == 0 or not any(c.name.lower() == changed for c in arg.find_all(exp.Column)):
                continue
            masks = [(c.table, c.name) for a in args[:i] for c in a.find_all(exp.Column) if c.name]
            by_seed: dict[str, list[str]] = {}
            for table, column in dict.fromkeys(masks):
                for seed_name, seed_column in trace(original_sql, table, column, lineage):
                    by_seed.setdefault(seed_name, []).append(seed_column)
            for seed_name, columns in by_seed.items():
                seed = seeds.get(seed_name)
                if seed is None or not seed.rows or any(seed.column(c) is None for c in columns):
                    continue
                values = tuple((c, "") for c in dict.fromkeys(columns))
                out.append(
                    Proposal(
                        key,
                        family,
                        operator,
                        f"{', '.join(c for c, _ in values)} NULL, so coalesce falls back to {changed}",
                        SeedRow(seed.name, _template_row(seed, columns[0]), values),
                    )
                )
    return out


def unmatched_join_column(original_sql: str, mutated_sql: str) -> tuple[str, str, str] | None:
    """The left-input key of the first join the edit changed, as (column, left relation, joined relation)
    (lower-case names; ``a.x = b.y`` joining ``b``: x, a's table, b's table)."""
    a, b = _parse(original_sql), _parse(mutated_sql)
    if a is None or b is None:
        return None
    left, right = list(a.find_all(exp.Join)), list(b.find_all(exp.Join))
    changed = next((x for x, y in zip(left, right) if x.sql(dialect="duckdb") != y.sql(dialect="duckdb")), None)
    if changed is None and len(left) == len(right):
        return None
    changed = changed if changed is not None else left[-1]
    tables = {t.alias_or_name: t.name for t in a.find_all(exp.Table)}
    joined = changed.this.alias_or_name if isinstance(changed.this, exp.Expression) else ""
    condition = changed.args.get("on")
    for eq in condition.find_all(exp.EQ) if condition is not None else ():
        sides = [eq.this, eq.expression]
        if all(isinstance(s, exp.Column) for s in sides):
            outer = [s for s in sides if s.table and s.table != joined]
            if outer:
                return (
                    outer[0].name,
                    tables.get(outer[0].table, outer[0].table).lower(),
                    tables.get(joined, joined).lower(),
                )
    return None


def literal_probes(*comparisons: exp.Expression) -> tuple[str, ...]:
    """SQL literals worth trying for a filter: every literal of the comparisons, numbers also one either side."""
    out: list[str] = []
    for node in comparisons:
        for literal in node.find_all(exp.Literal):
            if literal.is_string:
                out.append(literal.sql(dialect="duckdb"))
            elif re.fullmatch(r"-?\d+(\.\d+)?", literal.this or ""):
                number = float(literal.this) if "." in literal.this else int(literal.this)
                out.extend(str(v) for v in (number, number - 1, number + 1))
    return tuple(dict.fromkeys(out))


def spread_timestamps(seed: SeedTable) -> SeedRow | None:
    """A twin of a real row whose date and timestamp columns all differ from each other (the template's
    first date plus 1, 2, 3… days, each written like its column): any two timestamp columns swapped, or
    one read for another, then give a different value. None when the seed has fewer than two."""
    template = _template_row(seed, "")
    values = seed.rows[template]
    columns = [i for i, v in enumerate(values) if _LOOSE_STAMP.match(v)]
    if len(columns) < 2:
        return None
    try:
        base = datetime.strptime(values[columns[0]][:10], "%Y-%m-%d")
    except ValueError:
        return None
    out = []
    for step, index in enumerate(columns, start=1):
        stamp = (base + timedelta(days=step)).strftime("%Y-%m-%d %H:%M:%S")
        out.append((seed.header[index].strip(), _format_like([values[index]], stamp)))
    return SeedRow(seed.name, template, tuple(out))


def retemplate(proposal: Proposal, template: int) -> Proposal:
    """The same proposal cloned from another real row of its seed: every row of the proposal cloned from
    the same template as ``proposal.row`` (its twins among ``extra`` too) now clones ``template``, with the
    same values set."""
    old = proposal.row

    def moved(row: SeedRow) -> SeedRow:
        return SeedRow(row.seed, template, row.values) if (row.seed, row.template) == (old.seed, old.template) else row

    return Proposal(
        proposal.key,
        proposal.family,
        proposal.operator,
        proposal.condition,
        moved(old),
        tuple(moved(r) for r in proposal.extra),
        proposal.for_wrong_repair,
    )


def _template_row(seed: SeedTable, column: str) -> int:
    """The row to clone: the first one with every value present (else the first)."""
    return next((i for i, r in enumerate(seed.rows) if all(v != "" for v in r)), 0)


def key_columns(seed: SeedTable) -> tuple[int, ...]:
    """Columns a new row must not repeat: ``id`` (any case) if unique, else the first unique ``…id`` column."""

    def unique(i: int) -> bool:
        values = [r[i] for r in seed.rows]
        return all(values) and len(set(values)) == len(values)

    names = [h.strip().lower() for h in seed.header]
    exact = [i for i, n in enumerate(names) if n == "id" and unique(i)]
    if exact:
        return tuple(exact)
    ids = [i for i, n in enumerate(names) if n.endswith("id") and unique(i)]
    return tuple(ids[:1])


def _fresh(values: Sequence[str], taken: set[str]) -> str:
    """A value no row has, shaped like the column's values: integers max + 1; dates and timestamps a day
    before the oldest (before the pinned clock, which is at or after the newest seed date), written like
    them; anything else the longest value suffixed ``_h1``, ``_h2``…. NULLs (empty) are ignored."""
    present = [v for v in values if v != ""]
    if present and all(re.fullmatch(r"-?\d+", v) for v in present):
        candidate = max(int(v) for v in present) + 1
        while str(candidate) in taken:
            candidate += 1
        return str(candidate)
    if present and all(_LOOSE_STAMP.match(v) for v in present):
        try:
            oldest = datetime.strptime(min(present)[:10], "%Y-%m-%d")
        except ValueError:
            oldest = None
        n = 1
        while oldest is not None and n < 10_000:
            value = _format_like(present, (oldest - timedelta(days=n)).strftime("%Y-%m-%d %H:%M:%S"))
            if value not in taken:
                return value
            n += 1
    base = max(present, key=len) if present else "x"
    n = 1
    while f"{base}_h{n}" in taken:
        n += 1
    return f"{base}_h{n}"


def render(
    seeds: Mapping[str, SeedTable], rows: Sequence[SeedRow]
) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
    """The seed patch adding ``rows`` (unified diff over the seed CSVs, fresh keys assigned in order) and
    the rows as written ((seed, values) each). Identical rows are added once."""
    unique_rows = list(dict.fromkeys(rows))
    added: dict[str, list[tuple[str, ...]]] = {}
    written: list[tuple[str, tuple[str, ...]]] = []
    used: set[str] = set()  # every fresh value of this patch: two orphans never match each other

    def fresh(seed: SeedTable, index: int) -> str:
        existing = [r[index] for r in seed.rows] + [r[index] for r in added.get(seed.name, [])]
        value = _fresh(existing, set(existing) | used)
        used.add(value)
        return value

    for row in unique_rows:
        seed = seeds[row.seed]
        values = list(seed.rows[row.template])
        set_here = set()
        for column, value in row.values:
            index = seed.column(column)
            assert index is not None
            values[index] = fresh(seed, index) if value == FRESH else value
            set_here.add(index)
        for index in key_columns(seed):
            if index not in set_here or values[index] == seed.rows[row.template][index]:
                values[index] = fresh(seed, index)
        added.setdefault(seed.name, []).append(tuple(values))
        written.append((seed.name, tuple(values)))
    patch = ""
    for name in sorted(added):
        seed = seeds[name]
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(added[name])
        text = seed.text if seed.text.endswith("\n") or not seed.text else seed.text + "\n"
        patch += make_patch(seed.path, seed.text, text + buffer.getvalue())
    return patch, tuple(written)


def upstream_seeds(manifest: Mapping[str, Any], model: str) -> frozenset[str]:
    """Seeds the model reads, through models and through sources whose table a seed of that name builds."""
    nodes: dict[str, Any] = {**manifest.get("nodes", {}), **manifest.get("sources", {})}
    seeds_by_name = {
        str(n.get("name", "")).lower(): uid
        for uid, n in manifest.get("nodes", {}).items()
        if n.get("resource_type") == "seed"
    }
    found: set[str] = set()
    stack, seen = [model], set()
    while stack:
        uid = stack.pop()
        if uid in seen:
            continue
        seen.add(uid)
        node = nodes.get(uid) or {}
        kind = node.get("resource_type")
        if kind == "seed":
            found.add(str(node.get("name", "")).lower())
        elif kind == "source":
            name = str(node.get("identifier") or node.get("name", "")).lower()
            if name in seeds_by_name:
                found.add(name)
        stack.extend((node.get("depends_on") or {}).get("nodes", []))
    return frozenset(found)


__all__ = [
    "COUNT_OPERATORS",
    "spread_timestamps",
    "WEAK_REASONS",
    "FRESH",
    "Lineage",
    "traced",
    "changed_join",
    "FAMILIES",
    "INVISIBLE_REASONS",
    "NoProposal",
    "Proposal",
    "SeedRow",
    "SeedTable",
    "changed_comparison",
    "changed_projection",
    "key_columns",
    "propose",
    "render",
    "retemplate",
    "upstream_seeds",
]

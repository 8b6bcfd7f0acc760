"""The data contract of a project's sources: which tables and columns must exist, typed, keyed and with
which values, read from the project itself.

A project that ships no data still declares it: its sources' YAML names tables and columns (sometimes with a
``data_type``), its dbt tests say which columns are unique, never null, drawn from a list of values or from
another table's keys, and its SQL says the rest (``usage.analyse``). This module joins the two into one
``Contract`` per project: a ``SynthTable`` per source table and a ``SynthColumn`` per column it must hold.
A test on a model column constrains the source column it is read from (renames and casts followed).
``repair`` tightens the contract after a build where a project test failed on data drawn from it.

Pure: it reads the parsed manifest (a dict) and the models' compiled SQL the caller passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from dbt_harvest.harvester.synth.usage import ColumnRef, Literal, Usage, analyse, resolve_output, type_of_datatype

#: what every synthesized relation's name starts with (a seed of that name is the source's data)
PREFIX = "_synth__"
_UNSAFE = re.compile(r"[^a-z0-9_]+")
_REF = re.compile(r"""ref\(\s*['"]([^'"]+)['"]\s*(?:,\s*['"]([^'"]+)['"]\s*)?\)""")
_SOURCE = re.compile(r"""source\(\s*['"]([^'"]+)['"]\s*,\s*['"]([^'"]+)['"]\s*\)""")


@dataclass(frozen=True)
class Bounds:
    """What a range or length test allows a column's values: each side inclusive (``strict`` makes both
    exclusive), ``None`` where a side is open. ``low``/``high`` are a number or an ISO date as text."""

    low: str | None = None
    high: str | None = None
    strict: bool = False
    min_len: int | None = None
    max_len: int | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.low, self.high, self.min_len, self.max_len))

    def meet(self, other: Bounds) -> Bounds:
        """Both bounds at once (the tighter side of each)."""
        return Bounds(
            _tighter(self.low, other.low, max),
            _tighter(self.high, other.high, min),
            self.strict or other.strict,
            _tighter_int(self.min_len, other.min_len, max),
            _tighter_int(self.max_len, other.max_len, min),
        )


def _order_key(text: str) -> tuple[int, Decimal | str]:
    try:
        return (0, Decimal(text))
    except InvalidOperation:
        return (1, text)


def _tighter(a: str | None, b: str | None, pick: Any) -> str | None:
    if a is None or b is None:
        return a if b is None else b
    return str(pick((a, b), key=_order_key))


def _tighter_int(a: int | None, b: int | None, pick: Any) -> int | None:
    if a is None or b is None:
        return a if b is None else b
    return int(pick(a, b))


_ISO_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})")


def _bound_value(value: Any) -> str | None:
    """A test's bound as a number or an ISO date, or None when it is SQL the synthesizer cannot evaluate
    (then that side is left open and the build says whether the data meets it)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | Decimal):
        return str(value)
    text = str(value).strip()
    try:
        return str(Decimal(text))
    except InvalidOperation:
        pass
    m = _ISO_DAY.search(text)
    if m and re.fullmatch(r"(?is)\s*(cast\s*\(\s*)?(date|timestamp)?\s*'[^']*'.*", text):
        return m.group(1)
    return None


def _length(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


#: generic tests of packages that say what a built-in test says (dbt_expectations' names)
ALIASES = {
    "expect_column_values_to_be_unique": "unique",
    "expect_column_values_to_not_be_null": "not_null",
    "expect_column_values_to_be_in_set": "accepted_values",
}


def test_kind(name: str) -> str:
    """A generic test's name as the contract knows it (a package's alias of a built-in test read as it)."""
    return ALIASES.get(name, name)


def test_kwargs(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A generic test's arguments from its manifest ``test_metadata``: ``kwargs``, with the mapping dbt 1.10's
    ``arguments:`` property nests them under merged in (dbt keeps it nested unless a flag asks otherwise,
    and ``accepted_values: {arguments: {values: [...]}}`` had been read as having no values)."""
    kwargs = dict(meta.get("kwargs") or {})
    nested = kwargs.pop("arguments", None)
    return {**kwargs, **nested} if isinstance(nested, Mapping) else kwargs


def accepted(kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """The values an accepted_values test (or dbt_expectations' in-set test) allows."""
    values = kwargs.get("values")
    if values is None:
        values = kwargs.get("value_set")
    return tuple(str(v) for v in values or ())


def bounds_of(test: str, kwargs: Mapping[str, Any]) -> Bounds:
    """The bounds a range or length test puts on its column (empty for any other test). dbt_utils'
    ``accepted_range`` and dbt_expectations' ``expect_column_values_to_be_between`` bound the values;
    ``expect_column_value_lengths_to_be_between`` and ``..._to_equal`` bound their lengths."""
    if test == "accepted_range":
        inclusive = kwargs.get("inclusive", True)
        return Bounds(_bound_value(kwargs.get("min_value")), _bound_value(kwargs.get("max_value")), inclusive is False)
    if test == "expect_column_values_to_be_between":
        return Bounds(
            _bound_value(kwargs.get("min_value")),
            _bound_value(kwargs.get("max_value")),
            kwargs.get("strictly", False) is True,
        )
    if test == "expect_column_value_lengths_to_be_between":
        return Bounds(min_len=_length(kwargs.get("min_value")), max_len=_length(kwargs.get("max_value")))
    if test == "expect_column_value_lengths_to_equal":
        n = _length(kwargs.get("value"))
        return Bounds(min_len=n, max_len=n)
    return Bounds()


@dataclass(frozen=True)
class SynthColumn:
    """One column the data must hold and what decides its values."""

    name: str
    type: str  # one of usage.TYPES
    unique: bool = False
    not_null: bool = False
    values: tuple[str, ...] = ()  # accepted_values: the only values allowed
    literals: tuple[Literal, ...] = ()  # values the SQL compares with: both sides must be present
    nulls: bool = False  # the SQL handles nulls here (coalesce, is null): some rows hold one
    parent: ColumnRef | None = None  # values drawn from this column's
    orphans: bool = False  # a few values no parent holds (the SQL keeps unmatched rows)
    bounds: Bounds = Bounds()  # a range or length test's limits
    # text holding values of this type ("integer", "numeric", "date", "timestamp"): a text column (LIKE, trim,
    # a regular expression) that the SQL also casts to that type
    text_of: str = ""
    # each parent value at most once: a model that joins this child to its parent keeps a unique test on the
    # parent's key (one order per cart), so a child drawn with repeats fanned the model's rows out
    one_to_one: bool = False


@dataclass(frozen=True)
class SynthTable:
    """One source table to synthesize, as the seed ``relation``."""

    relation: str
    source: str
    table: str
    columns: tuple[SynthColumn, ...]

    def column(self, name: str) -> SynthColumn | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True)
class Contract:
    tables: tuple[SynthTable, ...]

    def table(self, relation: str) -> SynthTable | None:
        return next((t for t in self.tables if t.relation == relation), None)

    def mapping(self) -> dict[str, str]:
        """``source.table`` (as the project names them) -> the relation holding its data."""
        return {f"{t.source}.{t.table}": t.relation for t in self.tables}


def relation_name(source: str, table: str, taken: Iterable[str] = ()) -> str:
    """The seed name a source table's data is synthesized as: ``_synth__<source>__<table>``, made safe."""
    base = f"{PREFIX}{_UNSAFE.sub('_', source.lower())}__{_UNSAFE.sub('_', table.lower())}"
    used, name, n = set(taken), base, 2
    while name in used:
        name, n = f"{base}_{n}", n + 1
    return name


def sources_of(manifest: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(source name, table name, its manifest node) of every source the manifest declares, sorted."""
    out = []
    for node in manifest.get("sources", {}).values():
        out.append((str(node["source_name"]), str(node["name"]), node))
    return sorted(out, key=lambda item: (item[0], item[1]))


def relations(manifest: Mapping[str, Any]) -> dict[str, str]:
    """source unique_id -> synthesized relation name, for every source (stable names)."""
    taken: list[str] = []
    out = {}
    for source, table, node in sources_of(manifest):
        name = relation_name(source, table, taken)
        taken.append(name)
        out[str(node["unique_id"])] = name
    return out


def model_sql(manifest: Mapping[str, Any]) -> dict[str, str]:
    """relation name (alias) -> compiled SQL of every model and snapshot that compiled (a snapshot reads its
    source's columns as a model does)."""
    out = {}
    for node in manifest.get("nodes", {}).values():
        if node.get("resource_type") in {"model", "snapshot"} and node.get("compiled_code"):
            out[str(node.get("alias") or node["name"]).lower()] = str(node["compiled_code"])
    return out


#: words of a column name that say it holds an amount (``order_count``, ``unit_price``), and those of them
#: that also end a longer word of one (``unitprice``); a short one would end unrelated words (``account``)
_NUMERIC_WORDS = frozenset(
    [
        "amount",
        "price",
        "cost",
        "total",
        "revenue",
        "qty",
        "quantity",
        "count",
        "rate",
        "pct",
        "percent",
        "balance",
        "fee",
        "score",
        "discount",
        "tax",
        "weight",
        "ratio",
        "value",
    ]
)
_NUMERIC_SUFFIXES = frozenset(
    ["amount", "price", "cost", "total", "revenue", "quantity", "balance", "discount", "weight"]
)


def name_words(column: str) -> list[str]:
    """A column name's words: snake_case and camelCase split, lower-cased."""
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", column)]


def has_word(column: str, words: frozenset[str], suffixes: frozenset[str] = frozenset()) -> bool:
    """Whether a word of ``column`` is one of ``words`` (or its plural), or ends with one of ``suffixes``:
    ``country`` holds no ``count``, ``order_counts`` does."""
    for word in name_words(column):
        if word in words or (word.endswith("s") and word[:-1] in words):
            return True
        if any(word.endswith(suffix) for suffix in suffixes):
            return True
    return False


def _name_type(column: str) -> str:
    c = column.lower()
    if c == "id" or re.search(r"(_id|_key|key|_number|number|_num|_nbr)$", c):
        return "integer"
    if c.startswith(("is_", "has_", "was_")) or c.endswith("_flag"):
        return "boolean"
    if re.search(r"(_at|_time|timestamp|_ts|datetime)$", c):
        return "timestamp"
    if re.search(r"(date|_day|_on)$", c):
        return "date"
    if has_word(column, _NUMERIC_WORDS, _NUMERIC_SUFFIXES):
        return "numeric"
    return "varchar"


def choose_type(declared: str, hints: Iterable[str], name: str) -> str:
    """A column's type: the YAML's ``data_type``, else what the SQL's use of it says, else its name."""
    if declared:
        return type_of_datatype(declared)
    seen = set(hints)
    if {"date", "timestamp"} <= seen:  # a date literal compared with a timestamp: the name decides
        return "timestamp" if _name_type(name) == "timestamp" else "date"
    for family in ("date", "timestamp", "boolean", "integer", "numeric"):
        if family in seen:
            if family == "integer" and "numeric" in seen and _name_type(name) != "integer":
                return "numeric"
            return family
    if "varchar" in seen:
        return "varchar"
    return _name_type(name)


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$")
_HOLDS = {
    "integer": re.compile(r"^[+-]?\d+$"),
    "numeric": _NUMBER,
    "date": _DATE,
    "timestamp": _TIMESTAMP,
    "boolean": re.compile(r"^(true|false|t|f|0|1)$", re.I),
}


def holds_all(type_: str, values: Iterable[str]) -> bool:
    """Whether a column of synthesized type ``type_`` can hold every one of ``values`` (an accepted_values
    test's list): 'Upper middle income' in a column the SQL's use made a number cannot, and the seed's load
    would refuse it. A type with no rule here (varchar) holds anything."""
    rule = _HOLDS.get(type_)
    return rule is None or all(rule.match(str(v).strip()) for v in values)


@dataclass
class _Draft:
    declared: str = ""
    unique: bool = False
    not_null: bool = False
    values: tuple[str, ...] = ()
    parent: ColumnRef | None = None
    orphans: bool = False
    bounds: Bounds = Bounds()


def test_target(node: Mapping[str, Any], manifest: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    """The relation a generic test is attached to (its ``model`` argument, which names it even where the test
    reads other relations too, as a relationships test does): a synthesized relation or a model's alias."""
    model = str(((node.get("test_metadata") or {}).get("kwargs") or {}).get("model") or "")
    named = to_relation(model, manifest, names) if model else None
    if named is not None:
        return named
    attached = node.get("attached_node")
    if attached and attached in manifest.get("nodes", {}):
        target = manifest["nodes"][attached]
        return str(target.get("alias") or target["name"]).lower()
    deps = [names[d] for d in node.get("depends_on", {}).get("nodes", []) if d in names]
    return deps[0] if len(deps) == 1 else None


def to_relation(to: str, manifest: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    m = _SOURCE.search(to)
    if m:
        for uid, name in names.items():
            node = manifest["sources"][uid]
            if node["source_name"] == m.group(1) and node["name"] == m.group(2):
                return name
        return None
    m = _REF.search(to)
    if m:
        wanted = m.group(2) or m.group(1)
        for node in manifest.get("nodes", {}).values():
            if node.get("resource_type") in {"model", "seed", "snapshot"} and node.get("name") == wanted:
                return str(node.get("alias") or node["name"]).lower()
    return None


class _Drafts:
    """The columns found so far, per synthesized relation in the order first seen, and what each must hold."""

    def __init__(self, manifest: Mapping[str, Any], usage: Usage | None) -> None:
        self.manifest = manifest
        self.names = relations(manifest)
        self.models = model_sql(manifest)
        self.seeds = set(self.names.values())
        self.use = usage if usage is not None else analyse(self.models, self.seeds)
        self.drafts: dict[ColumnRef, _Draft] = {}
        self.order: dict[str, list[str]] = {name: [] for name in self.seeds}

    def draft(self, ref: ColumnRef) -> _Draft:
        if ref not in self.drafts:
            self.drafts[ref] = _Draft()
            self.order.setdefault(ref.table, []).append(ref.column)
        return self.drafts[ref]

    def targets(self, relation: str, column: str) -> list[ColumnRef]:
        return resolve_output(self.models, self.seeds, relation, column)

    def declared(self) -> None:
        """The sources' YAML columns (with their ``data_type``), then every column the SQL reads."""
        for uid, name in self.names.items():
            node = self.manifest["sources"][uid]
            for col_name, col in (node.get("columns") or {}).items():
                self.draft(ColumnRef(name, str(col_name).lower())).declared = str(col.get("data_type") or "")
        for ref in sorted(self.use.columns):
            self.draft(ref)

    def tests(self) -> None:
        """What each generic test says about the source columns its column is read from."""
        nodes = self.manifest.get("nodes", {}).values()
        for node in sorted(nodes, key=lambda n: str(n.get("unique_id"))):
            meta = node.get("test_metadata") or {}
            if node.get("resource_type") != "test" or not meta:
                continue
            kwargs = test_kwargs(meta)
            column = str(kwargs.get("column_name") or "").strip('"').lower()
            relation = test_target(node, self.manifest, self.names)
            if column and relation is not None:
                for ref in self.targets(relation, column):
                    self._constrain(self.draft(ref), ref, test_kind(str(meta.get("name"))), kwargs)

    def _constrain(self, d: _Draft, ref: ColumnRef, test: str, kwargs: Mapping[str, Any]) -> None:
        if test == "unique":
            d.unique = True
        elif test == "not_null":
            d.not_null = True
        elif test == "accepted_values":
            d.values = accepted(kwargs)
        elif bounds := bounds_of(test, kwargs):
            d.bounds = d.bounds.meet(bounds)
        elif test == "relationships":
            parent_rel = to_relation(str(kwargs.get("to") or ""), self.manifest, self.names)
            field = str(kwargs.get("field") or "").strip('"').lower()
            parents = self.targets(parent_rel, field) if parent_rel and field else []
            if parents and parents[0] != ref:
                d.parent = parents[0]
                self.draft(parents[0])

    def joins(self) -> None:
        """Each equality join draws one side's values from the other's (the key side is the parent)."""
        for join in self.use.joins:
            a, b = join.left, join.right
            da, db = self.draft(a), self.draft(b)
            if da.parent is not None or db.parent is not None:
                continue
            a_key = da.unique or a.column == "id"
            b_key = db.unique or b.column == "id"
            parent, child = (a, b) if a_key or not b_key else (b, a)
            if self.drafts[parent].parent == child:
                continue
            self.drafts[child].parent = parent
            # orphans wherever no test forbids them: a left join keeps them, an inner join drops them, and
            # either way a join-type mutant then changes the output (a relationships test's child gets none)
            self.drafts[child].orphans = True

    def column(self, ref: ColumnRef) -> SynthColumn:
        d = self.drafts.get(ref, _Draft())
        hints = list(self.use.types.get(ref, ()))
        for a, b in self.use.alike:  # a coalesce's arguments, a case's branches: one type
            if ref in (a, b):
                hints += list(self.use.types.get(b if ref == a else a, ()))
        if d.parent is not None:
            hints += list(self.use.types.get(d.parent, ()))
            parent_draft = self.drafts.get(d.parent)
            if parent_draft is not None and parent_draft.declared and not d.declared:
                hints.append(type_of_datatype(parent_draft.declared))
        chosen = choose_type(d.declared, hints, ref.column)
        if not d.declared and not holds_all(chosen, d.values):
            chosen = "varchar"  # the SQL's use said otherwise, but the test's values are what the column holds
        return SynthColumn(
            name=ref.column,
            type=chosen,
            unique=d.unique,
            not_null=d.not_null,
            values=d.values,
            literals=self.use.literals.get(ref, ()),
            nulls=ref in self.use.null_handled,
            parent=d.parent,
            orphans=d.orphans and not (d.not_null or d.unique),
            bounds=d.bounds,
        )

    def tables(self) -> tuple[SynthTable, ...]:
        out = []
        for uid, name in sorted(self.names.items(), key=lambda item: item[1]):
            node = self.manifest["sources"][uid]
            columns = tuple(self.column(ColumnRef(name, c)) for c in self.order.get(name) or ["id"])
            out.append(SynthTable(name, str(node["source_name"]), str(node["name"]), columns))
        return tuple(out)


def derive(manifest: Mapping[str, Any], usage: Usage | None = None) -> Contract:
    """The contract of every source ``manifest`` declares (its compiled models' SQL read with ``usage``,
    analysed here when not given)."""
    drafts = _Drafts(manifest, usage)
    drafts.declared()
    drafts.tests()
    drafts.joins()
    return Contract(_unify_key_types(drafts.tables()))


def _unify_key_types(tables: tuple[SynthTable, ...]) -> tuple[SynthTable, ...]:
    """A child column takes its parent's type (a join compares them)."""
    by_ref = {ColumnRef(t.relation, c.name): c for t in tables for c in t.columns}
    out = []
    for t in tables:
        cols = []
        for c in t.columns:
            parent = by_ref.get(c.parent) if c.parent else None
            cols.append(replace(c, type=parent.type) if parent is not None and parent.type != c.type else c)
        out.append(replace(t, columns=tuple(cols)))
    return tuple(out)


@dataclass(frozen=True)
class Failure:
    """A project test that failed on synthesized data, as the repair reads it."""

    test: str  # the test's name (unique, not_null, accepted_values, relationships, or another)
    refs: tuple[ColumnRef, ...]  # the synthesized columns it constrains
    values: tuple[str, ...] = ()
    parent: ColumnRef | None = None
    bounds: Bounds = Bounds()


def _one_to_one_children(
    contract: Contract, failures: Iterable[Failure], changes: dict[ColumnRef, dict[str, Any]]
) -> None:
    """A unique test failing on a column whose source is already unique: the duplicates come from a join
    that fans its rows out (carts left joined to orders on ``cart_id``, a unique test on the cart). Each
    child drawn from that key is made one-to-one with it (``changes`` gains them)."""
    unique = {ColumnRef(t.relation, c.name) for t in contract.tables for c in t.columns if c.unique}
    keys = {ref for f in failures if f.test == "unique" for ref in f.refs if ref in unique}
    for t in contract.tables:
        for c in t.columns:
            if c.parent in keys and not c.unique and not c.one_to_one:
                changes.setdefault(ColumnRef(t.relation, c.name), {})["one_to_one"] = True


def repair(contract: Contract, failures: Iterable[Failure]) -> Contract:
    """The contract tightened so that each repairable failure cannot recur (a unique column made unique,
    a not-null one without nulls, a child of a unique key that a join fans out one-to-one, ...); unchanged
    when nothing can be tightened."""
    failures = tuple(failures)
    changes: dict[ColumnRef, dict[str, Any]] = {}
    for failure in failures:
        for ref in failure.refs:
            change = changes.setdefault(ref, {})
            if failure.test == "unique":
                change.update(unique=True, nulls=False, orphans=False)
            elif failure.test == "not_null":
                change.update(not_null=True, nulls=False, orphans=False)
            elif failure.test == "accepted_values" and failure.values:
                change.update(values=failure.values, nulls=False)
            elif failure.test == "relationships" and failure.parent is not None:
                change.update(parent=failure.parent, orphans=False, nulls=False)
            elif failure.bounds:
                change["bounds"] = change.get("bounds", Bounds()).meet(failure.bounds)
    _one_to_one_children(contract, failures, changes)
    tables = []
    for t in contract.tables:
        cols = []
        for c in t.columns:
            found = dict(changes.get(ColumnRef(t.relation, c.name)) or {})
            if "bounds" in found:
                found["bounds"] = c.bounds.meet(found["bounds"])
                if found["bounds"] == c.bounds:
                    del found["bounds"]
            cols.append(replace(c, **found) if found else c)
        tables.append(replace(t, columns=tuple(cols)))
    return Contract(tuple(tables))


#: DuckDB's conversion errors that name the source column a cast read (``... (DATE -> BIGINT) when casting
#: from source column x``, ``Could not convert string 'a' to INT32 when casting from source column x``)
_CAST_ERROR = re.compile(
    r"(?:\(\s*\w+\s*->\s*(?P<to>\w+)\s*\)|to (?P<to2>[A-Z]+[0-9]*)\b).*?when casting from source column (?P<col>\w+)",
    re.S,
)


#: DuckDB refusing a text operator on a column synthesized as another type, with the line it quotes:
#: ``No function matches ... '!~~(BIGINT, STRING_LITERAL)' ... LINE 28: supplier_ids NOT LIKE '%;%'``
_TEXT_OPERATOR_ERROR = re.compile(
    r"No function matches the given name and argument types '(?P<fn>!?~~\*?|trim|ltrim|rtrim|lower|upper|length|"
    r"regexp_full_match|regexp_matches|regexp_replace|regexp_extract)"
    r"\((?!VARCHAR)[A-Z]+.*?LINE \d+:(?P<line>.*)",
    re.S | re.I,
)
#: the types a text column may hold the values of (drawn as that type, written as text)
_TEXT_OF = frozenset({"integer", "numeric", "date", "timestamp"})


def _text_operand(error: str) -> str | None:
    """The column a text operator DuckDB refused reads, from the SQL line the error quotes."""
    m = _TEXT_OPERATOR_ERROR.search(error)
    if m is None:
        return None
    fn, line = m["fn"].lower(), m["line"]
    if "~~" in fn:
        found = re.search(r"(\w+)\s+(?:NOT\s+)?I?LIKE\b", line, re.I)
    elif fn.startswith("regexp"):  # Postgres' ``x ~ '^[0-9]+$'`` is DuckDB's regexp_full_match
        found = re.search(r"(\w+)\s*!?~\*?\s*'", line) or re.search(rf"\b{fn}\s*\(\s*(?:\w+\.)?(\w+)\s*,", line, re.I)
    else:
        found = re.search(rf"\b{fn}\s*\(\s*(?:\w+\.)?(\w+)\s*\)", line, re.I)
    return found[1].lower() if found else None


def retype_from_error(contract: Contract, error: str) -> Contract:
    """The contract with the column a DuckDB cast error names given the type the cast wanted; unchanged when
    the error names no synthesized column (or it already has that type). A column a text operator (``LIKE``,
    ``trim``, a regular expression) was refused on is made text, holding values of the type it had (numbers,
    dates), so that the SQL's casts of it still read it (Northwind's ``supplier_ids``: filtered with ``not like '%;%'``, then cast)."""
    text_column = _text_operand(error)
    if text_column is not None:
        return _with_column(
            contract,
            text_column,
            lambda c: (
                replace(c, type="varchar", text_of=c.type if c.type in _TEXT_OF else "", literals=(), values=())
                if c.type != "varchar"
                else c
            ),
        )
    m = _CAST_ERROR.search(error)
    if m is not None:
        family = type_of_datatype(m.group("to") or m.group("to2") or "")
        retyped = _with_column(
            contract,
            m.group("col").lower(),
            lambda c: replace(c, type=family, literals=(), values=()) if c.type != family else c,
        )
        if retyped != contract:
            return retyped
    return _digits_from_value(contract, error)


def _with_column(contract: Contract, name: str, change: Callable[[SynthColumn], SynthColumn]) -> Contract:
    """The contract with ``change`` applied to every column named ``name`` (in any table)."""
    return Contract(
        tuple(replace(t, columns=tuple(change(c) if c.name == name else c for c in t.columns)) for t in contract.tables)
    )


#: a number cast refusing a value synthesis drew for a text column: its free text values are ``<column>_<n>``
_DRAWN_TEXT_CAST = re.compile(
    r"Could not convert string ['\"](?P<col>\w+?)_\d+['\"] to '?(?:U?(?:TINY|SMALL|BIG|HUGE)?INT(?:EGER)?|INT\d+|DECIMAL|NUMERIC|DOUBLE|FLOAT|REAL)",
    re.IGNORECASE,
)


def _digits_from_value(contract: Contract, error: str) -> Contract:
    """The contract with the text column whose drawn value a number cast refused (``Could not convert string
    'price_4' to DECIMAL``: the SQL casts ``replace(price, '$', '')``, or a staging rename of the column, which
    the error names instead) made text holding numbers; unchanged when no text column drew the value."""
    m = _DRAWN_TEXT_CAST.search(error)
    if m is None:
        return contract
    return _with_column(
        contract,
        m["col"].lower(),
        lambda c: replace(c, text_of="integer", literals=(), values=()) if c.type == "varchar" and not c.text_of else c,
    )


__all__ = [
    "ALIASES",
    "has_word",
    "name_words",
    "PREFIX",
    "Bounds",
    "accepted",
    "bounds_of",
    "test_kind",
    "test_kwargs",
    "retype_from_error",
    "Contract",
    "Failure",
    "SynthColumn",
    "SynthTable",
    "choose_type",
    "derive",
    "model_sql",
    "relation_name",
    "relations",
    "repair",
    "test_target",
    "to_relation",
    "sources_of",
]

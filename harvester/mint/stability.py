"""Stable gold: which columns of a model's table keep their values when the model is built again under
perturbation, so that only those are graded.

``harvest add`` builds a project twice and never grades a column the two builds disagree on, but both
builds run with the same DuckDB thread count over inputs stored in the same physical order. A value that
depends on that order passes: ``row_number()`` over tied values, ``first_value`` without a total order,
``string_agg`` without ``order by``, ``limit`` over ties. Such a column has no right answer: a correct
rewrite may order the ties otherwise and score 0 against the gold.

Here the model's compiled SQL runs again in the screening engine (the project's locked-down DuckDB over a
copy of the pin's built database) under each of ``PERTURBATIONS``: another thread count (1, 2, 4 or 8), and every
relation it reads copied in another physical order (rows sorted by a seeded hash). A column is unstable
when the perturbed table differs from the built one on it:

1. alone: the column's multiset of values moved (floats compared at the scorer's tolerance, rounded to 3
   places); or
2. beside the columns that did not move: columns are added to an anchor set one at a time, the most
   distinct first (keys anchor), and a column whose addition changes the anchor's multiset of rows is
   unstable. This is how a rank over ties shows: its values as a multiset are 1..n either way, but which
   key holds which rank moves.

A model the engine cannot re-run (a Python model, SQL DuckDB refuses here) is not checked: the result
says why, and the gate refuses rather than grade what it could not test (fail closed).

Some order dependence is a race the rebuilds rarely lose: on dbt_github, ``requested_reviewers`` (a
``string_agg`` without ``order by``) moved in about 1 of 30 multi-thread rebuilds, never under one thread.
So the check also reads the compiled SQL of the model and of every model upstream of it: a column named as
the alias of an order-sensitive aggregate without an ``order by`` inside its call (``string_agg``,
``listagg``, ``group_concat``, ``array_agg``, ``list``, ``first``, ``last``, ``any_value``, ``arbitrary``)
is unstable wherever that name reaches (``order_sensitive_aliases``; deterministic, and a name shared by
chance only drops a column from grading).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from dbt_harvest.core.atomic import write_text
from dbt_harvest.core.clock import freeze_clock
from dbt_harvest.core.pin import Pin, TableRecord
from dbt_harvest.harvester.mint.engine import MUT, Engine, ScreenSQLError
from dbt_harvest.harvester.mint.lineage import ModelNode
from dbt_harvest.harvester.sandbox import safe_fs

#: bump when the check changes, so that cached results are computed again
STABILITY_VERSION = 4
#: floats are compared rounded to this many places (the scorer's absolute tolerance is 0.01)
FLOAT_PLACES = 3
_FLOAT_TYPES = re.compile(r"^(DOUBLE|FLOAT|REAL|DECIMAL)", re.I)


@dataclass(frozen=True)
class Perturbation:
    """One rebuild's conditions: DuckDB's thread count, and the seed its inputs are reordered by (0: the
    order they are stored in)."""

    threads: int
    shuffle_seed: int

    def describe(self) -> str:
        order = "stored order" if self.shuffle_seed == 0 else f"inputs reordered (seed {self.shuffle_seed})"
        return f"{self.threads} thread(s), {order}"


#: eight rebuilds: an order-dependent value is a race, and four missed one that a fresh build then showed
#: (dbt_github's ``requested_reviewers`` moved under 4 threads in `tasks verify`, not in the mint's four)
PERTURBATIONS = (
    Perturbation(threads=4, shuffle_seed=0),
    Perturbation(threads=1, shuffle_seed=1),
    Perturbation(threads=1, shuffle_seed=2),
    Perturbation(threads=4, shuffle_seed=3),
    Perturbation(threads=8, shuffle_seed=0),
    Perturbation(threads=2, shuffle_seed=4),
    Perturbation(threads=8, shuffle_seed=5),
    Perturbation(threads=4, shuffle_seed=6),
)


@dataclass(frozen=True)
class Stability:
    """What the perturbed rebuilds of one model's table showed.

    ``unstable``: the columns (by name, as the table has them) whose values moved; ``error``: why the model
    could not be rebuilt here ('' when it was: then ``checked``)."""

    table: str
    unstable: tuple[str, ...] = ()
    error: str = ""
    moved_under: str = ""  # the first perturbation a column moved under ('' when none moved)

    @property
    def checked(self) -> bool:
        return not self.error

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Stability:
        return cls(
            table=str(data["table"]),
            unstable=tuple(str(c) for c in data.get("unstable", ())),
            error=str(data.get("error", "")),
            moved_under=str(data.get("moved_under", "")),
        )


_ORDER_SENSITIVE = re.compile(
    r"\b(string_agg|listagg|group_concat|array_agg|list|first|last|any_value|arbitrary)\s*\(", re.I
)
_ALIAS_AFTER = re.compile(r'^\s*(?:filter\s*\([^()]*\)\s*)?as\s+"?([A-Za-z_][\w$]*)"?', re.I)


def _call_end(sql: str, start: int) -> int:
    """The index just past the parenthesis that closes the one opened at ``start - 1``."""
    depth = 1
    i = start
    while i < len(sql) and depth:
        depth += {"(": 1, ")": -1}.get(sql[i], 0)
        i += 1
    return i


def order_sensitive_aliases(sql: str) -> frozenset[str]:
    """Lowercased aliases of the order-sensitive aggregates in ``sql`` whose call has no ``order by``
    (``string_agg(x, ', ') as names``; a window ``over (...)`` makes it another thing: not counted)."""
    found: set[str] = set()
    for match in _ORDER_SENSITIVE.finditer(sql):
        end = _call_end(sql, match.end())
        if "order by" in " ".join(sql[match.end() : end].lower().split()):
            continue
        alias = _ALIAS_AFTER.match(sql[end : end + 200])
        if alias:
            found.add(alias.group(1).lower())
    return frozenset(found)


def lineage_sql(nodes: Mapping[str, ModelNode], uid: str) -> tuple[str, ...]:
    """The compiled SQL of model ``uid`` and of every model upstream of it."""
    seen: set[str] = set()
    stack = [uid]
    out: list[str] = []
    while stack:
        current = stack.pop()
        if current in seen or current not in nodes:
            continue
        seen.add(current)
        out.append(nodes[current].compiled_code)
        stack.extend(nodes[current].parents)
    return tuple(out)


def input_relations(compiled_sql: str, relations: Iterable[str]) -> tuple[str, ...]:
    """The project relations (dbt's quoted ``relation_name`` strings) that ``compiled_sql`` reads, longest
    first (so that replacing one never rewrites part of another)."""
    found = {r for r in relations if r and r in compiled_sql}
    return tuple(sorted(found, key=lambda r: (-len(r), r)))


def project_relations(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """Every relation name the manifest knows: models, seeds, snapshots and sources."""
    names: set[str] = set()
    for section in ("nodes", "sources"):
        for node in (manifest.get(section) or {}).values():
            name = node.get("relation_name")
            if name:
                names.add(str(name))
    return tuple(sorted(names))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _projection(name: str, dtype: str) -> str:
    column = _quote(name)
    return f"round({column}, {FLOAT_PLACES})" if _FLOAT_TYPES.match(dtype) else column


def _same_multiset(engine: Engine, left: str, right: str, projections: list[str]) -> bool:
    cols = ", ".join(projections)
    for a, b in ((left, right), (right, left)):
        row = engine.query_one(f"SELECT count(*) FROM (SELECT {cols} FROM {a} EXCEPT ALL SELECT {cols} FROM {b})")
        if row is None or int(str(row[0])) != 0:
            return False
    return True


def moved_columns(engine: Engine, built: str, rebuilt: str) -> tuple[str, ...]:
    """The columns of relation ``built`` whose values ``rebuilt`` does not reproduce (module docstring)."""
    described = engine.con.execute(f"DESCRIBE SELECT * FROM {built}").fetchall()
    columns = [(str(row[0]), str(row[1])) for row in described]
    rebuilt_names = {str(row[0]) for row in engine.con.execute(f"DESCRIBE SELECT * FROM {rebuilt}").fetchall()}
    if rebuilt_names == {name for name, _ in columns} and _same_multiset(
        engine, built, rebuilt, [_projection(name, dtype) for name, dtype in columns]
    ):
        return ()  # every row reproduced: nothing moved (most tables; two queries instead of four per column)
    moved = [name for name, _ in columns if name not in rebuilt_names]
    alone_ok = [
        (name, dtype)
        for name, dtype in columns
        if name in rebuilt_names and _same_multiset(engine, built, rebuilt, [_projection(name, dtype)])
    ]
    kept = {name for name, _ in alone_ok}
    moved += [name for name, _ in columns if name in rebuilt_names and name not in kept]
    if alone_ok:
        counts = engine.query_one(
            "SELECT " + ", ".join(f"count(DISTINCT {_projection(n, t)})" for n, t in alone_ok) + f" FROM {built}"
        )
        distinct = [int(str(v)) for v in (counts or ())]
        order = sorted(range(len(alone_ok)), key=lambda i: (-distinct[i], i))
        anchor: list[str] = []
        for i in order:
            name, dtype = alone_ok[i]
            trial = [*anchor, _projection(name, dtype)]
            if _same_multiset(engine, built, rebuilt, trial):
                anchor = trial
            else:
                moved.append(name)
    position = {name: i for i, (name, _) in enumerate(columns)}
    return tuple(sorted(set(moved), key=lambda n: position.get(n, len(position))))


def rebuild(engine: Engine, node: ModelNode, inputs: tuple[str, ...], clock: str, seed: int) -> str:
    """Run ``node``'s compiled SQL in ``engine`` over copies of its ``inputs`` in another physical order
    (``seed``; 0 keeps their order): the rebuilt relation's name."""
    sql = node.compiled_code
    engine.reset()
    engine.run(f'CREATE SCHEMA IF NOT EXISTS {MUT}."inputs"')
    for i, relation in enumerate(inputs):
        copy = f'{MUT}."inputs"."in_{i}"'
        order = f" ORDER BY hash(_row, {seed})" if seed else ""
        engine.run(f"CREATE TABLE {copy} AS SELECT * FROM {relation} AS _row{order}")
        sql = sql.replace(relation, copy)
    engine.materialize("rebuilt", "model", freeze_clock(sql, clock, zoned=True))
    return f'{MUT}."rebuilt"."model"'


#: where each engine holds the unperturbed rebuild the perturbed ones are compared with (a temporary table:
#: the rebuilds reset the engine's scratch catalog, not it)
BASELINE = "temp.main.harvest_baseline"


def _baseline(engines: Mapping[int, Engine], node: ModelNode, inputs: tuple[str, ...], clock: str) -> Any:
    """The model rebuilt once without perturbation (one thread, inputs in stored order, the clock frozen), as
    Arrow rows. The perturbed rebuilds are compared with it, not with the relation the pin's build left: a
    view (or a table over one) that reads the clock is evaluated at today's date when the built database is
    read, while every rebuild freezes the pin's clock, so comparing with it would call a clock column
    unstable."""
    engine = engines[1] if 1 in engines else next(iter(engines.values()))
    rebuilt = rebuild(engine, node, inputs, clock, 0)
    return engine.con.execute(f"SELECT * FROM {rebuilt}").to_arrow_table()


def _load_baseline(engine: Engine, rows: Any) -> None:
    engine.con.register("harvest_baseline_rows", rows)
    try:
        engine.run("CREATE OR REPLACE TEMP TABLE harvest_baseline AS SELECT * FROM harvest_baseline_rows")
    finally:
        engine.con.unregister("harvest_baseline_rows")


def stability_of(
    engines: Mapping[int, Engine],
    node: ModelNode,
    relations: Iterable[str],
    clock: str,
    perturbations: tuple[Perturbation, ...] = PERTURBATIONS,
    upstream_sql: Sequence[str] = (),
) -> Stability:
    """Rebuild ``node`` in ``engines`` (one per thread count of ``perturbations``, each over a copy of the
    pin's built database) under each perturbation; which columns moved, with the columns named after an
    order-sensitive aggregate in ``node``'s SQL or ``upstream_sql`` (module docstring)."""
    if node.language != "sql" or not node.compiled_code or not node.relation:
        return Stability(node.table, error=f"{node.name} cannot be rebuilt in DuckDB ({node.language} model)")
    inputs = input_relations(node.compiled_code, (r for r in relations if r != node.relation))
    unstable: set[str] = set()
    first = ""
    try:
        baseline = _baseline(engines, node, inputs, clock)
    except ScreenSQLError as exc:
        return Stability(node.table, error=f"{node.name} could not be rebuilt: {exc}"[:300])
    loaded: set[int] = set()
    for p in perturbations:
        engine = engines[p.threads]
        try:
            rebuilt = rebuild(engine, node, inputs, clock, p.shuffle_seed)
            if p.threads not in loaded:
                _load_baseline(engine, baseline)
                loaded.add(p.threads)
            moved = moved_columns(engine, BASELINE, rebuilt)
        except ScreenSQLError as exc:
            return Stability(node.table, error=f"{node.name} could not be rebuilt: {exc}"[:300])
        if moved and not first:
            first = p.describe()
        unstable.update(moved)
    aliases = frozenset().union(*(order_sensitive_aliases(sql) for sql in (node.compiled_code, *upstream_sql)))
    if aliases:
        described = engines[perturbations[0].threads].con.execute(f"DESCRIBE SELECT * FROM {node.relation}")
        named = {str(row[0]) for row in described.fetchall() if str(row[0]).lower() in aliases}
        if named - unstable and not first:
            first = "an order-sensitive aggregate without an order"
        unstable |= named
    return Stability(node.table, tuple(sorted(unstable)), moved_under=first)


@dataclass
class Rebuilder:
    """The engines the perturbed rebuilds of one pin run in, opened on first use (one per thread count)."""

    database: Path
    catalog: str
    scratch: Path
    engines: dict[int, Engine] = field(default_factory=dict)

    def check(
        self, node: ModelNode, relations: Iterable[str], clock: str, upstream_sql: Sequence[str] = ()
    ) -> Stability:
        for p in PERTURBATIONS:
            if p.threads not in self.engines:
                folder = self.scratch / f"threads-{p.threads}"
                self.engines[p.threads] = Engine(self.database, self.catalog, folder, threads=p.threads)
        return stability_of(self.engines, node, relations, clock, upstream_sql=upstream_sql)

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
        self.engines.clear()
        safe_fs.rmtree(self.scratch)


def with_stability(pin: Pin, results: Iterable[Stability]) -> Pin:
    """``pin`` with its tables as ``stable_tables`` makes them."""
    return replace(pin, tables=stable_tables(pin.tables, results))


def stable_tables(records: Iterable[TableRecord], results: Iterable[Stability]) -> tuple[TableRecord, ...]:
    """``records`` with what the perturbed rebuilds found: each checked table's moved columns added to its
    ``unstable_columns`` (never graded), and a table that could not be checked made ungradable (fail
    closed: what could not be tested is not graded). Tables without a result are left as they are."""
    found = {r.table: r for r in results}
    tables: list[TableRecord] = []
    for table in records:
        result = found.get(table.name)
        if result is None:
            tables.append(table)
        elif not result.checked:
            tables.append(replace(table, deterministic=False))
        elif result.unstable:
            extra = tuple(c for c in result.unstable if c.lower() not in {u.lower() for u in table.unstable_columns})
            tables.append(replace(table, unstable_columns=(*table.unstable_columns, *extra)))
        else:
            tables.append(table)
    return tuple(tables)


def cache_key(node: ModelNode, gold_sha256: str, clock: str) -> str:
    """What a cached result is valid for: the pin's gold, the model's compiled SQL, the clock and the
    check's version."""
    text = f"{STABILITY_VERSION}\0{gold_sha256}\0{node.unique_id}\0{clock}\0{node.compiled_code}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def cached_stability(folder: Path, key: str) -> Stability | None:
    """A result stored under ``folder`` for ``key``, or None (absent or unreadable: computed again)."""
    path = folder / f"{key}.json"
    try:
        return Stability.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_stability(folder: Path, key: str, result: Stability) -> None:
    """Keep ``result`` (written atomically: two shards of a pin may store the same result at once)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / f"{key}.json", json.dumps(result.to_dict(), sort_keys=True) + "\n")


__all__ = [
    "FLOAT_PLACES",
    "PERTURBATIONS",
    "Perturbation",
    "STABILITY_VERSION",
    "Rebuilder",
    "Stability",
    "cache_key",
    "cached_stability",
    "input_relations",
    "lineage_sql",
    "order_sensitive_aliases",
    "moved_columns",
    "project_relations",
    "rebuild",
    "stability_of",
    "stable_tables",
    "store_stability",
    "with_stability",
]

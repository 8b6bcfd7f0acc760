"""Stage 1, screening: re-run the mutant's compiled SQL and its descendants in DuckDB, score, decide.

Each admission check is a small function returning a ``Check`` with its reason; ``SCREEN_CHECKS``
lists them in the order they run. A candidate survives screening when every check passes; the
grading spec chosen here (graded tables and condition columns) is what stage 2 confirms.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.scorer import official
from core.scorer.spec import GradingSpec
from harvester.mint.candidates import Candidate
from harvester.mint.engine import MUT, Engine, ScreenSQLError
from core.clock import freeze_clock
from harvester.mint.confirm import MAX_WRONG_TRIES
from harvester.mint.lineage import ModelNode, depth, descendants
from harvester.mint.local_checks import Suite, failing
from core.pin import Pin
from harvester.sandbox.inside.harvest_names import graded_name
from mutators import difference, transplant

MAX_GRADED = 4
CATASTROPHIC_TABLE_FRACTION = 0.75
CATASTROPHIC_MIN_TABLES = 5
CATASTROPHIC_ROW_FACTOR = 10
_KEYISH = re.compile(r"(^id$|_id$|_key$|^date|_date$|_month$|^month|_day$|_week$)", re.I)


@dataclass(frozen=True)
class Check:
    ok: bool
    reason: str = ""  # rejection reason key when not ok
    detail: str = ""


@dataclass(frozen=True)
class Observation:
    """What re-running the mutated chain showed, table by table."""

    changed: dict[str, tuple[int, int]]  # table -> (gold rows, mutant rows), only changed tables
    differing_columns: dict[str, tuple[int, ...]]  # table -> positions whose value multiset changed
    root_table: str
    root_rows: tuple[int, int]
    models: int
    # table -> position -> how the column moved (statement.DIRECTIONS), for tables whose row count held
    directions: dict[str, dict[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class ScreenOutcome:
    key: str
    ok: bool
    reason: str
    detail: str
    grading: GradingSpec | None = None
    observation: Observation | None = None
    seconds: float = 0.0
    compiled_sql: str = ""
    wrong_order: tuple[int, ...] = ()  # wrong repairs to confirm, in this order (predicted to qualify first)
    extras: dict[str, str] = field(default_factory=dict)


def _rewrite(sql: str, replaced: dict[str, str]) -> str:
    for relation, target in replaced.items():
        sql = sql.replace(relation, target)
    return sql


def _mut_relation(node: ModelNode) -> str:
    return f'{MUT}."{node.schema}"."{node.alias}"'


def _base_relation(node: ModelNode) -> str:
    return node.relation


def column_signatures(engine: Engine, relation: str) -> list[tuple[str, int, int]]:
    """Per column, in order: (type, count, sum of value hashes) — an order-independent multiset signature."""
    described = engine.con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    if not described:
        return []
    parts = ", ".join(f'sum(hash("{row[0]}"))::HUGEINT' for row in described)
    row = engine.con.execute(f"SELECT count(*), {parts} FROM {relation}").fetchone()
    return [(str(d[1]), int(row[0]), int(row[i + 1] or 0)) for i, d in enumerate(described)]


_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U\w*INT|FLOAT|DOUBLE|REAL|DECIMAL.*)$", re.I)


def column_directions(engine: Engine, gold: str, mutant: str, positions: tuple[int, ...]) -> dict[int, str]:
    """How each column at ``positions`` moved from ``gold`` to ``mutant`` (same row count): more or fewer
    empty values first, then a numeric total higher or lower, a boolean true more or less often, else
    'different'. One aggregate query per relation."""
    described = engine.con.execute(f"DESCRIBE SELECT * FROM {gold}").fetchall()
    picked = [(i, str(described[i][0]), str(described[i][1])) for i in positions if i < len(described)]
    if not picked:
        return {}
    parts = []
    for _, name, kind in picked:
        parts.append(f'count(*) - count("{name}")')
        if _NUMERIC.match(kind):
            parts.append(f'sum("{name}")::DOUBLE')
        elif kind.upper() == "BOOLEAN":
            parts.append(f'count(*) FILTER (WHERE "{name}")')
        else:
            parts.append("NULL")
    select = ", ".join(parts)
    try:
        before = engine.query_one(f"SELECT {select} FROM {gold}") or ()
        after = engine.query_one(f"SELECT {select} FROM {mutant}") or ()
    except ScreenSQLError:
        return {i: "different" for i, _, _ in picked}
    out: dict[int, str] = {}
    for k, (i, _, kind) in enumerate(picked):
        nulls_gold, nulls_mut = before[2 * k], after[2 * k]
        value_gold, value_mut = before[2 * k + 1], after[2 * k + 1]
        if nulls_mut != nulls_gold:
            out[i] = "nulls_more" if nulls_mut > nulls_gold else "nulls_less"
        elif value_gold is not None and value_mut is not None and value_gold != value_mut:
            if kind.upper() == "BOOLEAN":
                out[i] = "true_more" if value_mut > value_gold else "true_less"
            else:
                out[i] = "higher" if value_mut > value_gold else "lower"
        else:
            out[i] = "different"
    return out


def _differing(gold_sig: list[tuple[str, int, int]], mut_sig: list[tuple[str, int, int]]) -> tuple[int, ...]:
    """Gold column positions whose multiset has no equal column at the same position of the mutant."""
    return tuple(i for i, sig in enumerate(gold_sig) if i >= len(mut_sig) or mut_sig[i] != sig)


def rerun(engine: Engine, pin: Pin, nodes: dict[str, ModelNode], root: str, root_sql: str) -> dict[str, str]:
    """Materialize ``root_sql`` as ``root``, then every descendant on top of it, in ``mut``.

    Returns the relation names that now point at re-run tables (dbt's relation -> the ``mut`` one), the
    rewrite that any later SQL over the chain (descendants, dbt tests) needs.
    """
    replaced: dict[str, str] = {}
    for uid in [root, *descendants(nodes, root)]:
        node = nodes[uid]
        if node.language != "sql" or not node.compiled_code:
            raise ScreenSQLError(f"descendant {node.name} cannot be re-run in DuckDB ({node.language} model)")
        if node.materialized == "ephemeral":
            continue
        sql = root_sql if uid == root else node.compiled_code
        engine.materialize(node.schema, node.alias, freeze_clock(_rewrite(sql, replaced), pin.clock))
        if node.relation:
            replaced[node.relation] = _mut_relation(node)
    return replaced


def observe(engine: Engine, pin: Pin, nodes: dict[str, ModelNode], cand: Candidate, mutated_sql: str) -> Observation:
    """Materialize the mutated model and its descendants in ``mut``; compare with the pin's tables."""
    tables = {t.name: t for t in pin.tables}
    replaced = rerun(engine, pin, nodes, cand.model, mutated_sql)
    changed: dict[str, tuple[int, int]] = {}
    differing: dict[str, tuple[int, ...]] = {}
    directions: dict[str, dict[int, str]] = {}
    root_rows = (0, 0)
    for uid in [cand.model, *descendants(nodes, cand.model)]:
        node = nodes[uid]
        if node.materialized == "ephemeral":
            continue
        record = tables.get(node.table)
        rows, fingerprint = engine.fingerprint(_mut_relation(node))
        gold_rows = record.rows if record else -1
        if uid == cand.model:
            root_rows = (gold_rows, rows)
        if record is None or fingerprint != record.fingerprint:
            changed[node.table] = (gold_rows, rows)
            if record is not None:
                differing[node.table] = _differing(
                    column_signatures(engine, _base_relation(node)), column_signatures(engine, _mut_relation(node))
                )
                if gold_rows == rows and differing[node.table]:
                    directions[node.table] = column_directions(
                        engine, _base_relation(node), _mut_relation(node), differing[node.table])
    return Observation(changed, differing, nodes[cand.model].table, root_rows, len(nodes), directions)


# --- the screening checks, in order -------------------------------------------------------------

def check_changed(obs: Observation, pin: Pin) -> Check:
    if not obs.changed:
        return Check(False, "equivalent", "every table equals gold")
    return Check(True)


def check_gradable(obs: Observation, pin: Pin) -> Check:
    # the scorer sees only tables captured in main (harvest_names: every model whose alias is unique)
    gradable = {t.name for t in pin.gradable_tables if graded_name(t.name) is not None}
    if not set(obs.changed) & gradable:
        return Check(False, "ungradable", "only nondeterministic, empty or tables outside main changed")
    return Check(True)


def check_catastrophic(obs: Observation, pin: Pin) -> Check:
    if len(obs.changed) > max(CATASTROPHIC_MIN_TABLES, CATASTROPHIC_TABLE_FRACTION * obs.models):
        return Check(False, "catastrophic", f"{len(obs.changed)} of {obs.models} tables changed")
    for table, (gold, mutant) in obs.changed.items():
        if gold > 0 and mutant == 0:
            return Check(False, "catastrophic", f"{table} emptied")
        if gold > 0 and mutant > CATASTROPHIC_ROW_FACTOR * gold:
            return Check(False, "catastrophic", f"{table} rows x{mutant / gold:.0f}")
    return Check(True)


def check_effect(obs: Observation, effect: str) -> Check:
    gold, mutant = obs.root_rows
    # The tag must not be contradicted: a filter dropped inside an aggregate changes values, not rows,
    # but it can never make rows disappear.
    expected = {
        "more_rows": mutant >= gold,
        "fewer_rows": mutant <= gold,
        "changed_values": mutant == gold,
    }.get(effect, True)
    if not expected:
        return Check(False, "effect_mismatch", f"{effect} tagged, rows {gold} -> {mutant}")
    return Check(True)


def choose_grading(obs: Observation, pin: Pin, nodes: dict[str, ModelNode]) -> GradingSpec:
    """1-4 changed gradable tables, most downstream first; columns that differ plus key-like columns."""
    gradable = {t.name: t for t in pin.gradable_tables if graded_name(t.name) is not None}
    by_table = {n.table: n for n in nodes.values()}
    chosen = sorted(
        (t for t in obs.changed if t in gradable),
        key=lambda t: (-depth(nodes, by_table[t].unique_id) if t in by_table else 0, t),
    )[:MAX_GRADED]
    cols: list[tuple[int, ...]] = []
    for table in chosen:
        names = [c.name for c in gradable[table].columns]
        picked = set(obs.differing_columns.get(table, ()))
        keys = [i for i, n in enumerate(names) if _KEYISH.search(n)]
        picked.update(keys[:2] if keys else [0])
        cols.append(tuple(sorted(picked)))
    return GradingSpec(
        gold=f"{pin.gold_sha256}.duckdb",
        condition_tabs=tuple(str(graded_name(t)) for t in chosen),
        condition_cols=tuple(cols),
        ignore_orders=tuple(True for _ in chosen),
    )


def _official_sees(engine: Engine, spec: GradingSpec, nodes: dict[str, ModelNode], gold: Path, tag: str) -> bool:
    """Whether the official check scores the re-run graded tables 0 (it sees a difference from gold)."""
    by_table = {n.table: n for n in nodes.values()}
    by_graded = {graded_name(t): t for t in by_table}
    pred = engine.export(
        {name: _mut_relation(by_table[by_graded[name]]) for name in spec.condition_tabs},
        engine.scratch / f"pred-{tag}.duckdb",
    )
    try:
        return not official(gold, pred, spec).passed
    finally:
        pred.unlink(missing_ok=True)


def predict_wrong_repairs(
    engine: Engine, pin: Pin, nodes: dict[str, ModelNode], cand: Candidate, spec: GradingSpec, gold: Path,
    tests: Suite | None,
) -> tuple[tuple[int, ...], str]:
    """The wrong repairs worth a dbt build, most promising first, and why the others are not.

    Each wrong repair (up to the number confirmation tries) is re-run like a mutant: one that errors,
    that the official check cannot tell from gold, or that fails a dbt test the true repair passes can
    never qualify and is dropped. Those whose tests cannot be predicted (unit tests, a repair that
    cannot be located in the compiled SQL) stay, after the predicted-good ones.
    """
    chain = [cand.model, *descendants(nodes, cand.model)]
    selected = tests.selected(chain) if tests is not None else None
    base_failed = failing(engine, selected, lambda sql: sql) if selected is not None else frozenset()
    good: list[int] = []
    unknown: list[int] = []
    last = "no wrong repair offered"
    compiled_original = nodes[cand.model].compiled_code
    for index, repair in enumerate(cand.mutation.wrong_repairs[:MAX_WRONG_TRIES]):
        # the original -> wrong-repair text as one edit, placed in the original's compiled SQL
        compiled = transplant(difference(cand.original, repair.apply(cand.broken)), cand.original, compiled_original)
        if compiled is None:
            unknown.append(index)
            continue
        try:
            replaced = rerun(engine, pin, nodes, cand.model, compiled.apply(compiled_original))
        except ScreenSQLError:
            last = f"wrong repair {index} does not build"
            continue
        if not _official_sees(engine, spec, nodes, gold, f"{cand.key}-w{index}"):
            last = f"wrong repair {index} passes the official check"
            continue
        if selected is None:
            unknown.append(index)
        elif failing(engine, selected, lambda sql: _rewrite(sql, replaced)) <= base_failed:
            good.append(index)
        else:
            last = f"wrong repair {index} fails dbt tests"
    return tuple(good + unknown), last


def screen(engine: Engine, pin: Pin, nodes: dict[str, ModelNode], cand: Candidate, gold: Path,
           tests: Suite | None = None) -> ScreenOutcome:
    """Run every screening check on one candidate; the engine is reset afterwards."""
    started = time.perf_counter()
    node = nodes[cand.model]

    def done(ok: bool, reason: str, detail: str = "", **kw: object) -> ScreenOutcome:
        engine.reset()
        return ScreenOutcome(cand.key, ok, reason, detail, seconds=time.perf_counter() - started, **kw)  # type: ignore[arg-type]

    compiled_edit = transplant(cand.mutation.edit, cand.original, node.compiled_code)
    if compiled_edit is None:
        return done(False, "untransplantable", "the edit could not be located in the compiled SQL")
    mutated_sql = compiled_edit.apply(node.compiled_code)
    try:
        obs = observe(engine, pin, nodes, cand, mutated_sql)
    except ScreenSQLError as exc:
        return done(False, "sql_error", str(exc))
    for check in (check_changed(obs, pin), check_gradable(obs, pin), check_catastrophic(obs, pin),
                  check_effect(obs, cand.mutation.effect)):
        if not check.ok:
            return done(False, check.reason, check.detail, observation=obs)
    spec = choose_grading(obs, pin, nodes)
    if not _official_sees(engine, spec, nodes, gold, cand.key):
        return done(False, "invisible", "the official check cannot see the change", observation=obs)
    try:
        order, why_not = predict_wrong_repairs(engine, pin, nodes, cand, spec, gold, tests)
    except ScreenSQLError as exc:  # a dbt test's SQL failing on the pin's own tables: leave it to dbt
        order, why_not = tuple(range(min(MAX_WRONG_TRIES, len(cand.mutation.wrong_repairs)))), str(exc)
    if not order:
        return done(False, "no_wrong_repair", why_not, grading=spec, observation=obs)
    return done(True, "", "", grading=spec, observation=obs, compiled_sql=mutated_sql, wrong_order=order)

"""Stage 1, screening: re-run the mutant's compiled SQL and its descendants in DuckDB, score, decide.

A prediction of confirmation at a millisecond each: the same observation checks (``checks.py``), the
grading spec, whether the official check can see the change, and which wrong repairs can qualify (they
build, the official check tells them from gold AND from the broken output, and they pass the dbt tests
the project passes). ``SCREEN_RULES`` lists the rules in the order they run; each takes the growing
``ScreenTrial`` and returns it or raises ``Rejected``. The grading spec chosen here is a prediction:
confirmation chooses its own from the real build.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from dbt_harvest.core.clock import freeze_clock
from dbt_harvest.core.pin import Pin
from dbt_harvest.core.scorer import official
from dbt_harvest.core.scorer.source import Source
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.harvester.mint.candidates import Candidate
from dbt_harvest.harvester.mint.checks import (  # noqa: F401  (re-exported: older imports read them from here)
    CATASTROPHIC_MIN_TABLES,
    CATASTROPHIC_ROW_FACTOR,
    CATASTROPHIC_TABLE_FRACTION,
    MAX_GRADED,
    Check,
    Rejected,
    check_catastrophic,
    check_changed,
    check_effect,
    check_gradable,
    check_observation,
    choose_grading,
    require,
)
from dbt_harvest.harvester.mint.confirm import MAX_WRONG_TRIES
from dbt_harvest.harvester.mint.engine import MUT, Engine, ScreenSQLError
from dbt_harvest.harvester.mint.lineage import ModelNode, descendants
from dbt_harvest.harvester.mint.local_checks import Suite, failing
from dbt_harvest.harvester.mint.observe import Observation
from dbt_harvest.harvester.sandbox.inside.harvest_names import graded_name
from dbt_harvest.mutators import difference, transplant

#: Wrong repairs re-run per candidate in screening (cheap); confirmation builds at most MAX_WRONG_TRIES.
MAX_WRONG_SCREENED = 8


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
    # wrong repairs to confirm, in this order (predicted to qualify first); None: not ranked (confirm's own order)
    wrong_order: tuple[int, ...] | None = ()
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
    rerun(engine, pin, nodes, cand.model, mutated_sql)
    changed: dict[str, tuple[int, int]] = {}
    differing: dict[str, tuple[int, ...]] = {}
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
        if record is None:
            changed[node.table] = (gold_rows, rows)
        elif fingerprint != record.fingerprint:
            stable = set(record.stable_positions)
            moved = tuple(
                i
                for i in _differing(
                    column_signatures(engine, _base_relation(node)), column_signatures(engine, _mut_relation(node))
                )
                if i in stable
            )
            if moved or rows != gold_rows:  # only unstable columns moved: nothing gradable changed
                changed[node.table] = (gold_rows, rows)
                differing[node.table] = moved
    return Observation(changed, differing, nodes[cand.model].table, root_rows, len(nodes))


# --- the screening rules, in order ------------------------------------------------------------------


@dataclass(frozen=True)
class ScreenTrial:
    """One candidate going through screening; each rule fills in what it found."""

    engine: Engine
    pin: Pin
    nodes: dict[str, ModelNode]
    cand: Candidate
    gold: Source  # the gold file, or the engine's reader of it
    tests: Suite | None = None
    mutated_sql: str = ""
    observation: Observation | None = None
    spec: GradingSpec | None = None
    broken_export: Path | None = None
    wrong_order: tuple[int, ...] = ()


def transplanted(t: ScreenTrial) -> ScreenTrial:
    """The edit, placed in the model's compiled SQL (what DuckDB runs)."""
    node = t.nodes[t.cand.model]
    compiled_edit = transplant(t.cand.mutation.edit, t.cand.original, node.compiled_code)
    if compiled_edit is None:
        raise Rejected("untransplantable", "the edit could not be located in the compiled SQL")
    return replace(t, mutated_sql=compiled_edit.apply(node.compiled_code))


def observed(t: ScreenTrial) -> ScreenTrial:
    """The mutant and its descendants re-run; what changed against the pin's tables."""
    try:
        return replace(t, observation=observe(t.engine, t.pin, t.nodes, t.cand, t.mutated_sql))
    except ScreenSQLError as exc:
        raise Rejected("sql_error", str(exc)) from None


def observation_holds(t: ScreenTrial) -> ScreenTrial:
    """The observation checks (changed, gradable, not catastrophic, effect as tagged)."""
    assert t.observation is not None
    require(check_observation(t.observation, t.pin, t.cand.mutation.effect))
    return t


def graded(t: ScreenTrial) -> ScreenTrial:
    assert t.observation is not None
    return replace(t, spec=choose_grading(t.observation, t.pin, t.nodes))


def visible(t: ScreenTrial) -> ScreenTrial:
    """The official check scores the mutant 0; its graded tables are kept to compare wrong repairs with."""
    assert t.spec is not None
    broken = _export(t.engine, t.spec, t.nodes, f"broken-{t.cand.key}")
    if official(t.gold, broken, t.spec).passed:
        broken.unlink(missing_ok=True)
        raise Rejected("invisible", "the official check cannot see the change")
    return replace(t, broken_export=broken)


def wrong_repairs_can_qualify(t: ScreenTrial) -> ScreenTrial:
    """At least one wrong repair may qualify; the order confirmation tries them in."""
    assert t.spec is not None and t.broken_export is not None
    try:
        order, why_not = predict_wrong_repairs(
            t.engine, t.pin, t.nodes, t.cand, t.spec, t.gold, t.tests, t.broken_export
        )
    except ScreenSQLError as exc:  # a dbt test's SQL failing on the pin's own tables: leave it to dbt
        order, why_not = tuple(range(min(MAX_WRONG_TRIES, len(t.cand.mutation.wrong_repairs)))), str(exc)
    if not order:
        raise Rejected("no_wrong_repair", why_not)
    return replace(t, wrong_order=order)


#: Screening, in order. Each rule takes the trial and returns it, or raises Rejected(reason, detail).
SCREEN_RULES: tuple[Callable[[ScreenTrial], ScreenTrial], ...] = (
    transplanted,
    observed,
    observation_holds,
    graded,
    visible,
    wrong_repairs_can_qualify,
)


def _export(engine: Engine, spec: GradingSpec, nodes: dict[str, ModelNode], tag: str) -> Path:
    """The re-run graded tables as a DuckDB file of base tables in ``main`` (what a submission looks like)."""
    by_table = {n.table: n for n in nodes.values()}
    by_graded = {graded_name(t): t for t in by_table}
    return engine.export(
        {name: _mut_relation(by_table[by_graded[name]]) for name in spec.condition_tabs},
        engine.scratch / f"pred-{tag}.duckdb",
    )


def _official_sees(engine: Engine, spec: GradingSpec, nodes: dict[str, ModelNode], gold: Source, tag: str) -> bool:
    """Whether the official check scores the re-run graded tables 0 (it sees a difference from gold)."""
    pred = _export(engine, spec, nodes, tag)
    try:
        return not official(gold, pred, spec).passed
    finally:
        pred.unlink(missing_ok=True)


def predict_wrong_repairs(
    engine: Engine,
    pin: Pin,
    nodes: dict[str, ModelNode],
    cand: Candidate,
    spec: GradingSpec,
    gold: Source,
    tests: Suite | None,
    broken: Path | None = None,
) -> tuple[tuple[int, ...], str]:
    """The wrong repairs worth a dbt build, most promising first, and why the others are not.

    Each wrong repair (up to ``MAX_WRONG_SCREENED``) is re-run like a mutant: one that errors,
    that the official check cannot tell from gold, that it cannot tell from the broken output
    (``broken``: it would prove nothing the broken project does not), or that fails a dbt test the true
    repair passes can never qualify and is dropped. Those whose tests cannot be predicted (unit tests, a
    repair that cannot be located in the compiled SQL) stay, after the predicted-good ones.
    """
    chain = [cand.model, *descendants(nodes, cand.model)]
    selected = tests.selected(chain) if tests is not None else None
    base_failed = failing(engine, selected, lambda sql: sql) if selected is not None else frozenset()
    good: list[int] = []
    unknown: list[int] = []
    last = "no wrong repair offered"
    compiled_original = nodes[cand.model].compiled_code
    for index, repair in enumerate(cand.mutation.wrong_repairs[:MAX_WRONG_SCREENED]):
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
        pred = _export(engine, spec, nodes, f"{cand.key}-w{index}")
        try:
            if official(gold, pred, spec).passed:
                last = f"wrong repair {index} passes the official check"
                continue
            if broken is not None and official(broken, pred, spec).passed:
                last = f"wrong repair {index} is not informative: its graded output matches the broken one"
                continue
        finally:
            pred.unlink(missing_ok=True)
        if selected is None:
            unknown.append(index)
        elif failing(engine, selected, partial(_rewrite, replaced=replaced)) <= base_failed:
            good.append(index)
        else:
            last = f"wrong repair {index} fails dbt tests"
    return tuple(good + unknown), last


def screen(
    engine: Engine, pin: Pin, nodes: dict[str, ModelNode], cand: Candidate, gold: Path, tests: Suite | None = None
) -> ScreenOutcome:
    """Run every screening rule on one candidate (``SCREEN_RULES``); the engine is reset afterwards."""
    started = time.perf_counter()
    trial = ScreenTrial(engine, pin, nodes, cand, engine.gold_reader(gold), tests)
    try:
        for rule in SCREEN_RULES:
            trial = rule(trial)
    except Rejected as rejected:
        outcome = ScreenOutcome(
            cand.key,
            False,
            rejected.reason,
            rejected.detail,
            grading=trial.spec,
            observation=trial.observation,
            seconds=time.perf_counter() - started,
        )
    else:
        outcome = ScreenOutcome(
            cand.key,
            True,
            "",
            "",
            grading=trial.spec,
            observation=trial.observation,
            seconds=time.perf_counter() - started,
            compiled_sql=trial.mutated_sql,
            wrong_order=trial.wrong_order,
        )
    finally:
        if trial.broken_export is not None:
            trial.broken_export.unlink(missing_ok=True)
        engine.reset()
    return outcome

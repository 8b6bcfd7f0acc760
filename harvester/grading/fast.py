"""The fast path of grading an edited task: edited models re-run as compiled SQL in locked-down DuckDB.

A sandboxed dbt child costs seconds per call (bubblewrap, importing dbt, parsing, building); the GRPO
reward and the environment's validate/submit need an answer in well under a second. When every changed file of a rollout is a plain SQL model
whose edit lies outside Jinja, its compiled SQL is the pin's compiled SQL with the same edit carried
over (``mutators.transplant``, exactly what the mint's screening relies on), so the edited model and
its descendants can be re-run straight in the screening engine (``harvester.mint.engine``: external
access off, configuration locked, per-statement time bound) and scored against gold in milliseconds.
Anything else (an edit that touches Jinja, a new file, a macro or YAML change, a Python or ephemeral
model) is ``Unsupported`` and the caller builds with dbt instead.

The project's dbt tests can be run here too (``DataTest``: each test's compiled SQL wrapped as dbt's
test materialization wraps it, with ``fail_calc``, ``warn_if``, ``error_if`` and ``limit``), which is what
the environment's ``validate`` and ``submit`` report. A failing error-severity test on a node that has
children makes ``dbt build`` skip them; the fast path cannot mimic that and is ``Unsupported`` then.

The engine's base database is the pin's built state WITHOUT the relations the rollout rebuilds: those
hold the right answer, and an edit like ``select * from {{ this }}`` must not be able to read it. A view
of that state which reads the clock (``clock_views``) would be evaluated at today's date when the engine
reads it, while the rebuild freezes the pin's clock: such a rollout is ``Unsupported`` and built by dbt.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.clock import freeze_clock, reads_clock
from dbt_harvest.core.locked_duckdb import connect_locked
from dbt_harvest.core.scorer import score
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.harvester.grading.verdict import Graded
from dbt_harvest.harvester.mint.engine import MUT, Engine, ScreenSQLError
from dbt_harvest.harvester.mint.lineage import ModelNode
from dbt_harvest.harvester.sandbox.inside.harvest_names import GRADED_SCHEMA, full_graded_name
from dbt_harvest.mutators import transplant
from dbt_harvest.mutators.edits import Edit

_JINJA_OPENERS = ("{{", "{%", "{#")
_REBUILDABLE = {"table", "view", "incremental"}


class Unsupported(Exception):
    """This rollout cannot be scored by the fast path; build it with dbt instead (the message says why)."""


@dataclass(frozen=True)
class DataTest:
    """One dbt data test as the manifest compiled it, with the configuration its verdict depends on."""

    unique_id: str
    compiled_code: str
    severity: str = "error"
    fail_calc: str = "count(*)"
    warn_if: str = "!= 0"
    error_if: str = "!= 0"
    limit: int | None = None
    depends_on: tuple[str, ...] = ()


def _manifest_section(manifest: Mapping[str, object], key: str) -> dict[str, Any]:
    """The manifest's ``key`` section (``nodes``, ``unit_tests``) as a dict, empty when absent or empty;
    Unsupported when it is not a mapping (not a manifest dbt wrote)."""
    section = manifest.get(key) or {}
    if not isinstance(section, Mapping):
        raise Unsupported(f"the manifest's {key!r} is a {type(section).__name__}, not a mapping")
    return dict(section)


def data_tests(manifest: Mapping[str, object], known_failures: frozenset[str] = frozenset()) -> list[DataTest]:
    """Every enabled data test of the manifest but the ``known_failures`` (unique ids of the tests that failed
    on the original project, which no build runs); Unsupported when the project has unit tests, operations
    (on-run-start/end hooks) or a test without compiled SQL, which only dbt can run."""
    tests: list[DataTest] = []
    for uid, node in sorted(_manifest_section(manifest, "nodes").items()):
        kind = node.get("resource_type")
        if kind in {"unit_test", "operation"}:
            raise Unsupported(f"the project has {kind} nodes ({uid}); dbt runs them")
        if kind != "test" or uid in known_failures:
            continue
        code = str(node.get("compiled_code") or node.get("compiled_sql") or "")
        if not code:
            raise Unsupported(f"{uid} has no compiled SQL in the manifest")
        config = node.get("config") or {}
        limit = config.get("limit")
        tests.append(
            DataTest(
                unique_id=uid,
                compiled_code=code,
                severity=str(config.get("severity") or "error").lower(),
                fail_calc=str(config.get("fail_calc") or "count(*)"),
                warn_if=str(config.get("warn_if") or "!= 0"),
                error_if=str(config.get("error_if") or "!= 0"),
                limit=int(limit) if limit is not None else None,
                depends_on=tuple((node.get("depends_on") or {}).get("nodes") or ()),
            )
        )
    if _manifest_section(manifest, "unit_tests"):
        raise Unsupported("the project has unit tests; dbt runs them")
    return tests


def build_children(manifest: Mapping[str, object]) -> dict[str, int]:
    """How many models, seeds or snapshots depend on each node (what ``dbt build`` skips after a failed test)."""
    counts: dict[str, int] = {}
    for node in _manifest_section(manifest, "nodes").values():
        if node.get("resource_type") in {"model", "seed", "snapshot"}:
            for parent in (node.get("depends_on") or {}).get("nodes") or ():
                counts[parent] = counts.get(parent, 0) + 1
    return counts


def dbt_test_sql(test: DataTest, sql: str) -> str:
    """The statement dbt's test materialization runs for ``test`` (compiled SQL ``sql``)."""
    limit = f"limit {test.limit}" if test.limit is not None else ""
    return (
        f"select {test.fail_calc} as failures, {test.fail_calc} {test.warn_if} as should_warn, "
        f"{test.fail_calc} {test.error_if} as should_error from (\n{sql}\n{limit}\n) dbt_internal_test"
    )


def enclosing_edit(old: str, new: str) -> Edit | None:
    """The one edit (common prefix and suffix kept) that turns ``old`` into ``new``; None if equal."""
    if old == new:
        return None
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return Edit(start, end_old, new[start:end_new])


def line_edits(old: str, new: str) -> list[Edit]:
    """The edits turning ``old`` into ``new``, one per changed block of lines, each trimmed to the
    characters that differ (so each carries as little of the file, and as few Jinja tags, as possible)."""
    import difflib

    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    old_at = [0]
    for line in old_lines:
        old_at.append(old_at[-1] + len(line))
    new_at = [0]
    for line in new_lines:
        new_at.append(new_at[-1] + len(line))
    edits: list[Edit] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        block = enclosing_edit(old[old_at[i1] : old_at[i2]], new[new_at[j1] : new_at[j2]])
        if block is not None:
            edits.append(Edit(old_at[i1] + block.start, old_at[i1] + block.end, block.replacement))
    return edits


def _carried(edits: list[Edit], raw: str, compiled: str) -> list[Edit] | None:
    moved: list[Edit] = []
    for edit in edits:
        found = transplant(edit, raw, compiled)
        if found is None or any(opener in found.replacement for opener in _JINJA_OPENERS):
            return None
        moved.append(found)
    moved.sort(key=lambda e: e.start)
    if any(a.end > b.start for a, b in zip(moved, moved[1:])):
        return None
    return moved


def compiled_after_edit(node: ModelNode, original_raw: str, new_raw: str) -> str:
    """The compiled SQL ``new_raw`` would compile to, or Unsupported when that needs dbt.

    Each changed block is carried over to the compiled SQL on its own (``mutators.transplant``: text
    between Jinja tags is copied verbatim by Jinja, tags inside a block must be kept as they were); if
    that fails, the one edit enclosing every change is tried. An edit that writes Jinja needs dbt.
    """
    if node.language != "sql" or not node.compiled_code:
        raise Unsupported(f"{node.name} is not a compiled SQL model")
    if node.materialized not in _REBUILDABLE:
        raise Unsupported(f"{node.name} is materialized as {node.materialized}")
    whole = enclosing_edit(original_raw, new_raw)
    if whole is None:
        return node.compiled_code
    for edits in (line_edits(original_raw, new_raw), [whole]):
        moved = _carried(edits, original_raw, node.compiled_code)
        if moved is not None:
            text = node.compiled_code
            for edit in reversed(moved):
                text = edit.apply(text)
            return text
    raise Unsupported(f"the edit of {node.name} writes Jinja or cannot be located in its compiled SQL")


def clock_views(nodes: Mapping[str, ModelNode], order: Iterable[str]) -> list[str]:
    """The views outside ``order`` that a model of ``order`` reads (itself or through other views) and that
    read the clock. Such a view is evaluated when the built database is read, at today's date, while the pin's
    build and every fast rebuild freeze the pin's clock: a rollout reading it would be graded against another
    day (rafarngt/dbt-duckdb-analytics-kit's ``stg_customers.days_since_registration``), so the caller builds
    with dbt instead."""
    members = set(order)
    found: set[str] = set()
    seen: set[str] = set()
    stack = [parent for uid in members for parent in nodes[uid].parents if parent not in members]
    while stack:
        uid = stack.pop()
        node = nodes.get(uid)
        if uid in seen or node is None or node.materialized != "view":
            continue  # a table (or seed, source) holds what the frozen build wrote
        seen.add(uid)
        if reads_clock(node.compiled_code):
            found.add(uid)
        stack.extend(parent for parent in node.parents if parent not in members)
    return sorted(found)


def closure(nodes: Mapping[str, ModelNode], roots: Iterable[str]) -> list[str]:
    """``roots`` and every model downstream of them, parents before children (deterministic)."""
    children: dict[str, list[str]] = {uid: [] for uid in nodes}
    for uid, node in nodes.items():
        for parent in node.parents:
            if parent in children:
                children[parent].append(uid)
    members: set[str] = set()
    stack = list(roots)
    while stack:
        uid = stack.pop()
        if uid not in members:
            members.add(uid)
            stack.extend(children.get(uid, ()))
    order: list[str] = []
    placed: set[str] = set()
    pending = sorted(members)
    while pending:
        ready = [u for u in pending if all(p in placed or p not in members for p in nodes[u].parents)] or pending[:1]
        order.extend(ready)
        placed.update(ready)
        pending = [u for u in pending if u not in placed]
    return order


def drop_relations(database: Path, dest: Path, nodes: Iterable[ModelNode]) -> Path:
    """A copy of ``database`` at ``dest`` without the relations of ``nodes`` (tables or views)."""
    shutil.copyfile(database, dest)
    con = connect_locked(str(dest))  # the pin's views hold project SQL: the same lock as everywhere
    try:
        existing = {
            (schema.lower(), name.lower()): kind
            for schema, name, kind in con.execute(
                "SELECT schema_name, table_name, 'TABLE' FROM duckdb_tables() WHERE database_name = current_database() "
                "UNION ALL SELECT schema_name, view_name, 'VIEW' FROM duckdb_views() "
                "WHERE database_name = current_database() AND NOT internal"
            ).fetchall()
        }
        for node in nodes:
            kind = existing.get((node.schema.lower(), node.alias.lower()))
            if kind:
                con.execute(f'DROP {kind} "{node.schema}"."{node.alias}" CASCADE')
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return dest


class FastScorer:
    """One locked-down engine over a pin's state minus one rebuild set, reused across rollouts."""

    def __init__(
        self,
        base: Path,
        catalog: str,
        scratch: Path,
        nodes: Mapping[str, ModelNode],
        order: list[str],
        clock: str,
        gold: Path,
        statement_seconds: float = 20.0,
    ) -> None:
        self.nodes = nodes
        self.order = order
        self.clock = clock
        self.gold = gold
        self.engine = Engine(base, catalog, scratch, statement_seconds=statement_seconds)
        self.tables = {nodes[uid].table for uid in order if nodes[uid].materialized != "ephemeral"}

    def covers(self, grading: GradingSpec) -> bool:
        """Whether every graded table is rebuilt here (the others are not in the engine at all)."""
        return all(
            full_graded_name(name).lower() in {t.lower() for t in self.tables} for name in grading.condition_tabs
        )

    def score(
        self,
        compiled: Mapping[str, str],
        grading: GradingSpec,
        tests: Sequence[DataTest] = (),
        children: Mapping[str, int] | None = None,
        capture_to: Path | None = None,
    ) -> Graded:
        """Materialize the rebuild set with ``compiled`` overrides (uid -> SQL), run ``tests`` over the result
        (a test that errors counts as failed, as in dbt), score against gold, and, with ``capture_to``, write
        the graded tables there as a capture file the scorer's explainer reads."""
        replaced: dict[str, str] = {}
        try:
            for uid in self.order:
                node = self.nodes[uid]
                if node.materialized == "ephemeral":
                    continue
                sql = compiled.get(uid, node.compiled_code)
                for relation, target in replaced.items():
                    sql = sql.replace(relation, target)
                try:
                    self._materialize(node, freeze_clock(sql, self.clock, zoned=True))
                except ScreenSQLError as exc:
                    return Graded.not_built(f"build failed: {exc}", f"{uid}: {exc}", path="fast")
                if node.relation:
                    replaced[node.relation] = f'{MUT}."{node.captured_schema}"."{node.alias}"'
            failed, blocking = self._run_tests(tests, replaced, children or {})
            self.engine.con.execute(f'USE {MUT}."{GRADED_SCHEMA}"')
            verdicts = score(self.gold, self.engine.con, grading)
            capture = None
            if capture_to is not None:  # the engine may write only in its scratch folder: export there, then move
                written = self.engine.export(
                    {bare: f'{MUT}."{GRADED_SCHEMA}"."{bare}"' for bare in grading.condition_tabs},
                    self.engine.scratch / "capture.duckdb",
                )
                capture = Path(shutil.move(str(written), str(capture_to)))
        finally:
            self.engine.reset()
        return Graded.from_score(
            verdicts,
            tests_total=len(tests),
            failed_tests=failed,
            blocking_failures=blocking,
            capture=capture,
            path="fast",
        )

    def _run_tests(
        self, tests: Sequence[DataTest], replaced: Mapping[str, str], children: Mapping[str, int]
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        failed: list[str] = []
        blocking: list[str] = []
        for test in tests:
            sql = test.compiled_code
            for relation, target in replaced.items():
                sql = sql.replace(relation, target)
            try:
                row = self.engine.query_one(dbt_test_sql(test, freeze_clock(sql, self.clock, zoned=True)))
                should_error = bool(row and row[2])
            except ScreenSQLError:  # dbt reports a test that cannot run as an error, whatever its severity
                failed.append(test.unique_id)
                blocking.extend(test.unique_id for p in test.depends_on if children.get(p))
                continue
            if should_error and test.severity == "error":
                failed.append(test.unique_id)
                if any(children.get(parent) for parent in test.depends_on):
                    blocking.append(test.unique_id)
        return tuple(failed), tuple(dict.fromkeys(blocking))

    def _materialize(self, node: ModelNode, sql: str) -> None:
        """``mut.<schema>.<alias>`` from ``sql`` wrapped as dbt-duckdb wraps it: ``as (\n<sql>\n)``, so a
        trailing semicolon or a second statement fails here exactly as it fails in a dbt build. The schema
        is the captured one (``node.table``): a model with a unique alias goes to ``mut.main``, where the
        scorer looks for graded tables, exactly as the gold capture names it."""
        self.engine.run(f'CREATE SCHEMA IF NOT EXISTS {MUT}."{node.captured_schema}"')
        self.engine.run(f'CREATE OR REPLACE TABLE {MUT}."{node.captured_schema}"."{node.alias}" AS (\n{sql}\n)')

    def close(self) -> None:
        self.engine.close()

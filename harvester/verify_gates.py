"""`harvest tasks verify`'s two checks of the completion gates, re-run on fresh builds (issue 57).

- ``stable_gold`` (every kind): each graded model, rebuilt under the mint's perturbations
  (``harvester.mint.stability``) over the FRESH build of the unmodified project (its own database and
  manifest, not the pin's built state), moves none of the task's graded columns.
- ``determined`` (completions): the facts the statement states hold on gold and on the fresh build of the
  unmodified project, and every wrong completion's fresh build contradicts at least one of them. A
  completion minted before the facts existed states none and fails here: re-mint it.

The fresh build's database (at the workspace root) and manifest (under the project folder's ``target/``)
are files a sandboxed build of an untrusted project wrote: they are copied out as regular files beneath the
workspace (``safe_fs.copy_out``, never through a link, size-bounded as ``harvest add`` keeps its state),
the manifest read as JSON, the database opened by the screening engine's locked-down DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path

from dbt_harvest.core.pin import Pin
from dbt_harvest.core.statement_facts import contradictions
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.harvester.build import BuildResult
from dbt_harvest.harvester.mint.facts import read_file_table
from dbt_harvest.harvester.mint.lineage import models
from dbt_harvest.harvester.mint.shard import catalog_of
from dbt_harvest.harvester.mint.stability import Rebuilder, Stability, lineage_sql, project_relations
from dbt_harvest.harvester.sandbox import safe_fs
from dbt_harvest.harvester.sandbox.inside.harvest_names import graded_name
from dbt_harvest.harvester.state import MANIFEST_BYTES

#: the largest fresh database copied out to rebuild from (as ``harvest add`` keeps a pin's state)
MAX_DATABASE_BYTES = 4 << 30


def fresh_stability(pin: Pin, original: BuildResult, db_file: str, scratch: Path) -> dict[str, Stability]:
    """Per graded table name: what the perturbed rebuilds of its model over ``original``'s fresh build
    moved. Empty when the build left no database or manifest to rebuild from."""
    manifest_rel = "target/manifest.json" if pin.project_dir in ("", ".") else f"{pin.project_dir}/target/manifest.json"
    database, manifest_path = scratch / "fresh.duckdb", scratch / "manifest.json"
    try:
        safe_fs.copy_out(original.workspace, db_file, database, max_bytes=MAX_DATABASE_BYTES)
        safe_fs.copy_out(original.workspace, manifest_rel, manifest_path, max_bytes=MANIFEST_BYTES)
    except (safe_fs.UnsafePathError, OSError):
        return {}
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    nodes = models(manifest)
    catalog = catalog_of(nodes)
    relations = project_relations(manifest)
    rebuilder = Rebuilder(database, catalog, scratch / "rebuilds")
    found: dict[str, Stability] = {}
    try:
        for node in sorted(nodes.values(), key=lambda n: n.unique_id):
            name = graded_name(node.table)
            if name is not None and node.materialized != "ephemeral":
                found[name] = rebuilder.check(node, relations, pin.clock, lineage_sql(nodes, node.unique_id))
    finally:
        rebuilder.close()
    return found


def stable_gold(record: TaskRecord, gold: Path, stability: dict[str, Stability]) -> tuple[bool, str]:
    """Whether none of the task's graded columns moved in the fresh perturbed rebuilds, and why."""
    if not stability:
        return False, "the fresh build left no database and manifest to rebuild its models from"
    for table, cols in zip(record.grading.condition_tabs, record.grading.condition_cols):
        result = stability.get(table)
        if result is None:
            return False, f"no model of the fresh build makes the graded table {table}"
        if not result.checked:
            return False, result.error
        expected = read_file_table(gold, table)
        if expected is None:
            return False, f"gold has no table {table}"
        names = expected.names if not cols else tuple(expected.names[i] for i in cols)
        moved = sorted({c.lower() for c in result.unstable} & set(names))
        if moved:
            return False, f"{table}: graded column(s) {', '.join(moved)} move under {result.moved_under}"
    tables = len(record.grading.condition_tabs)
    return True, f"no graded column of {tables} table(s) moves under the perturbed rebuilds"


def determined(
    record: TaskRecord,
    gold: Path,
    original: BuildResult,
    wrong_builds: list[BuildResult],
) -> tuple[bool, str]:
    """Whether the completion's stated facts hold on gold and on the fresh original build, and every wrong
    completion's fresh build contradicts one of them; and why."""
    if not record.facts:
        return False, "the statement states no facts (minted before the completion gates): re-mint the task"
    for facts in record.facts:
        for what, source in (("gold", gold), ("the fresh build", original.gold_file)):
            table = read_file_table(source, facts.table) if source is not None else None
            against = contradictions(facts, table)
            if against:
                return False, f"{what} contradicts a stated fact of {facts.model}: {against[0]}"
    if not wrong_builds:
        return False, "no wrong completion builds to check against the facts"
    for index, built in enumerate(wrong_builds):
        if built.gold_file is None:
            continue  # a wrong completion that does not build is the wrong_repair check's failure
        against = _contradicted(record, built.gold_file)
        if not against:
            return False, f"wrong completion {index} agrees with every stated fact"
    return True, f"{len(wrong_builds)} wrong completion(s), each contradicting a stated fact"


def _contradicted(record: TaskRecord, built: Path) -> tuple[str, ...]:
    return tuple(line for facts in record.facts for line in contradictions(facts, read_file_table(built, facts.table)))


#: the verify checks this module adds, in order
GATE_CHECKS = ("stable_gold", "determined")

__all__ = ["GATE_CHECKS", "determined", "fresh_stability", "stable_gold"]

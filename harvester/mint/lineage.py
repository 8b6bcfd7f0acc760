"""Lineage from dbt's manifest: the models of a pin, their compiled SQL, and their descendants.

Pure functions over the manifest dict dbt wrote during the pin's build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbt_harvest.harvester.sandbox.inside.harvest_names import captured_names


@dataclass(frozen=True)
class ModelNode:
    unique_id: str
    name: str
    path: str  # path of the model file, relative to the project dir
    relation: str  # dbt's relation_name, e.g. "build"."main"."fct_orders"
    schema: str
    alias: str
    materialized: str
    language: str
    raw_code: str
    compiled_code: str
    description: str
    columns: dict[str, str]  # column name -> description
    parents: tuple[str, ...]
    package: str = ""  # dbt package_name: the root project's name, or a package's
    table: str = ""  # the name the gold file and the pin use (harvest_names.captured_names)

    @property
    def captured_schema(self) -> str:
        """The schema part of ``table``."""
        return self.table.split(".", 1)[0]


def models(manifest: dict[str, Any]) -> dict[str, ModelNode]:
    """Every model node of the root project (packages' models included), keyed by unique id.

    Each node's ``table`` is named over the same relations the capture names (every model that is not
    ephemeral), so it matches the pin's table records.
    """
    nodes = {uid: node for uid, node in manifest.get("nodes", {}).items() if node.get("resource_type") == "model"}

    def materialized(node: dict[str, Any]) -> str:
        return str((node.get("config") or {}).get("materialized", "view"))

    def alias(node: dict[str, Any]) -> str:
        return str(node.get("alias") or node.get("name", ""))

    names = captured_names(
        (uid, str(node.get("schema", "")), alias(node))
        for uid, node in nodes.items()
        if materialized(node) != "ephemeral"
    )
    found: dict[str, ModelNode] = {}
    for uid, node in nodes.items():
        found[uid] = ModelNode(
            unique_id=uid,
            name=str(node.get("name", "")),
            path=str(node.get("original_file_path", "")),
            relation=str(node.get("relation_name") or ""),
            schema=str(node.get("schema", "")),
            alias=alias(node),
            materialized=materialized(node),
            language=str(node.get("language", "sql")),
            raw_code=str(node.get("raw_code") or node.get("raw_sql") or ""),
            compiled_code=str(node.get("compiled_code") or node.get("compiled_sql") or ""),
            description=str(node.get("description") or ""),
            columns={str(k): str((v or {}).get("description") or "") for k, v in (node.get("columns") or {}).items()},
            parents=tuple(node.get("depends_on", {}).get("nodes", [])),
            package=str(node.get("package_name", "")),
            table=names.get(uid, f"{node.get('schema', '')}.{alias(node)}"),
        )
    return found


def descendants(nodes: dict[str, ModelNode], root: str) -> list[str]:
    """Models downstream of ``root`` (excluded), in an order where parents come before children."""
    children: dict[str, list[str]] = {uid: [] for uid in nodes}
    for uid, node in nodes.items():
        for parent in node.parents:
            if parent in children:
                children[parent].append(uid)
    seen: set[str] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    order: list[str] = []
    placed: set[str] = {root}
    pending = sorted(seen)
    while pending:
        ready = [u for u in pending if all(p in placed or p not in seen for p in nodes[u].parents)]
        if not ready:  # a cycle cannot happen in dbt; keep going deterministically anyway
            ready = pending[:1]
        for uid in ready:
            order.append(uid)
            placed.add(uid)
        pending = [u for u in pending if u not in placed]
    return order


def depth(nodes: dict[str, ModelNode], uid: str, _memo: dict[str, int] | None = None) -> int:
    """Length of the longest chain of model parents above ``uid`` (marts are deeper than staging)."""
    memo = _memo if _memo is not None else {}
    if uid in memo:
        return memo[uid]
    parents = [p for p in nodes[uid].parents if p in nodes]
    memo[uid] = 0 if not parents else 1 + max(depth(nodes, p, memo) for p in parents)
    return memo[uid]

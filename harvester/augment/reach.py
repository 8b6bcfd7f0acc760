"""Distinguishing data, the cost bound of a probe: which models must be re-run when rows enter some seeds.

Every screen and template probe of the augmentation inserts rows into seeds of a copy of the pin's built
data and re-runs models from their compiled SQL in DuckDB. Re-running every model made that the whole
cost of augmenting a large package (fivetran/dbt_servicenow: 39 models re-run per probe, the run did not
finish). Only two kinds of model matter to a probe's answer: the mutated model and its descendants (whose
outputs are compared: always re-run, as before, so both sides of a comparison come from the same path),
and those of their ancestors the inserted rows can reach (through a seed, or a source that names the
seed's table). Every other model's table is the pin's built one, which re-running would reproduce.

A model with no parent at all (one that reads a table by name) is taken as reached: nothing says what it
reads. Pure: the caller passes the lineage and the manifest's seeds and sources.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from dbt_harvest.harvester.mint.lineage import ModelNode, descendants


def _unquoted(relation: str) -> str:
    return relation.replace('"', "").replace("`", "").lower()


def seed_feeds(manifest: Mapping[str, Any]) -> dict[str, str]:
    """Each seed node's and each source's unique id -> the name of the seed whose table it reads (a source
    of a package's integration tests names the seed's table: same relation)."""
    seeds = {uid: node for uid, node in manifest.get("nodes", {}).items() if node.get("resource_type") == "seed"}
    feeds = {uid: str(node.get("name", "")).lower() for uid, node in seeds.items()}
    by_relation = {
        _unquoted(str(node.get("relation_name") or "")): str(node.get("name", "")).lower()
        for node in seeds.values()
        if node.get("relation_name")
    }
    for uid, source in (manifest.get("sources") or {}).items():
        name = by_relation.get(_unquoted(str(source.get("relation_name") or "")))
        if name:
            feeds[uid] = name
    return feeds


def models_to_rerun(
    nodes: Mapping[str, ModelNode], feeds: Mapping[str, str], touched: Collection[str], model: str
) -> frozenset[str]:
    """The models a probe with rows in the seeds ``touched`` must re-run to compare ``model`` and its
    descendants: those, and their ancestors that the rows reach."""
    touched_names = {t.lower() for t in touched}
    reached: dict[str, bool] = {}

    def reaches(uid: str, trail: frozenset[str] = frozenset()) -> bool:
        if uid not in reached:
            node = nodes[uid]
            if not node.parents:
                reached[uid] = True
            else:
                reached[uid] = any(
                    feeds.get(p, "") in touched_names
                    if p not in nodes
                    else (p not in trail and reaches(p, trail | {uid}))
                    for p in node.parents
                )
        return reached[uid]

    targets = {model, *descendants(dict(nodes), model)}
    ancestors: set[str] = set()
    stack = list(targets)
    while stack:
        for parent in nodes[stack.pop()].parents:
            if parent in nodes and parent not in ancestors and parent not in targets:
                ancestors.add(parent)
                stack.append(parent)
    return frozenset(targets | {uid for uid in ancestors if reaches(uid)})

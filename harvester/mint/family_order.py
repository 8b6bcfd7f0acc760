"""Per model, the order in which a capped mint confirms its operator families, and a cache of it per pin.

Why it exists: the order needs every mutable model's candidates counted by family, and counting runs the
pure mutators over every model (parse, mutate, re-parse, equivalence check): 656 s on
fivetran/dbt_servicenow (39 models, 510 candidates) on a loaded 2-core machine. The mint paid it again
on every run, so a resume under ``--budget-s`` or a no-op re-run of a finished pin spent minutes before
its first shard. The order is a pure function of the pin's template, its models' compiled SQL, the
chosen families and the mutator code, so it is computed once and stored under the pin's mint folder
(``shards/family.plan``), keyed by a digest of exactly those inputs: any change to them recomputes it,
and a cached order is the order a fresh computation gives.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Collection, Mapping
from functools import lru_cache
from pathlib import Path

import sqlglot

from dbt_harvest.core import atomic, home
from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.mint.candidates import model_candidates, model_file, why_not_mutable
from dbt_harvest.harvester.mint.lineage import ModelNode

#: Source folders whose code decides which candidates a model has (and so the counts the order uses).
#: the code that decides a model's candidates and what may be graded of them (the perturbed rebuilds'
#: stable gold included: a change there re-decides every shard)
_CODE = (
    Path(__file__).resolve().parents[2] / "mutators",
    Path(__file__).resolve().parent / "candidates.py",
    Path(__file__).resolve().parent / "stability.py",
)


def family_plan(
    pin: Pin, nodes: Mapping[str, ModelNode], tree: Path, families: Collection[str] | None
) -> dict[str, tuple[str, ...]]:
    """Per model, the order in which its families are confirmed, so a capped pin covers many families.

    Candidate counts come from the pure mutators (no build, no DuckDB). Families are taken rarest
    first over the pin; each is given to the model that has it and the fewest other options, and that
    model tries it first. Every model then falls back to the pin's rarest-first order.
    """
    per_model: dict[str, Counter[str]] = {}
    for uid, node in sorted(nodes.items()):
        if not why_not_mutable(node, pin):
            per_model[uid] = Counter(c.mutation.family for c in model_candidates(pin, node, tree, families, 0))
    total: Counter[str] = sum(per_model.values(), Counter())
    rarest = tuple(sorted(total, key=lambda f: (total[f], f)))
    assigned: dict[str, str] = {}
    for family in rarest:
        options = [uid for uid, counts in per_model.items() if counts[family] and uid not in assigned]
        if options:
            uid = min(options, key=lambda u: (len(per_model[u]), u))
            assigned[uid] = family
    return {
        uid: ((assigned[uid],) if uid in assigned else ()) + tuple(f for f in rarest if f != assigned.get(uid))
        for uid in per_model
    }


def plan_key(pin: Pin, nodes: Mapping[str, ModelNode], tree: Path, families: Collection[str] | None) -> str:
    """A digest of everything :func:`family_plan` reads: the mutable models' files and compiled SQL, the
    families, the mutator code and the sqlglot version."""
    digest = hashlib.sha256(_header(pin, families))
    if pin.is_history:  # its one candidate comes from harvester/history, not the mutators alone
        digest.update(_history_digest())
    for uid, node in sorted(nodes.items()):
        digest.update(_model_part(pin, uid, node, tree))
    return digest.hexdigest()


def shard_key(
    pin: Pin,
    uid: str,
    node: ModelNode,
    tree: Path,
    families: Collection[str] | None,
    seed: int,
    only_keys: Collection[str] | None,
    only_ids: Collection[str] | None = None,
) -> str:
    """A digest of everything that decides one model's candidates and their order: its file and compiled
    SQL, the families, the seed, the candidate keys or task ids a run is restricted to, the mutator code and
    sqlglot. A shard that finished under the same key with no survivor left at the cap has nothing left to
    do (so a shard restricted to some task ids never passes for one that tried every candidate)."""
    digest = hashlib.sha256(_header(pin, families))
    if pin.is_history:  # its one candidate comes from harvester/history, not the mutators alone
        digest.update(_history_digest())
    restricted: dict[str, object] = {"seed": seed, "only": sorted(only_keys) if only_keys is not None else None}
    if only_ids is not None:  # absent otherwise: unrestricted shards keep the keys they always had
        restricted["ids"] = sorted(i for i in only_ids if i.startswith(pin.id.split("@", 1)[0] + "."))
    digest.update(json.dumps(restricted).encode())
    digest.update(_model_part(pin, uid, node, tree))
    return digest.hexdigest()


def _header(pin: Pin, families: Collection[str] | None) -> bytes:
    return json.dumps(
        {
            "pin": pin.id,
            "families": sorted(families) if families is not None else None,
            "code": _code_digest(),
            "sqlglot": sqlglot.__version__,
        },
        sort_keys=True,
    ).encode()


def _model_part(pin: Pin, uid: str, node: ModelNode, tree: Path) -> bytes:
    file = model_file(node, pin)
    path = tree / file if file is not None else None
    source = path.read_bytes() if path is not None and path.is_file() and not path.is_symlink() else b""
    parts = (uid, why_not_mutable(node, pin), str(file), node.compiled_code or "")
    return b"".join(p.encode("utf-8", "surrogatepass") + b"\0" for p in parts) + hashlib.sha256(source).digest()


def planned_orders(
    pin: Pin, nodes: Mapping[str, ModelNode], tree: Path, families: Collection[str] | None
) -> dict[str, tuple[str, ...]]:
    """:func:`family_plan`, read from the pin's cache when its key matches, else computed and cached."""
    key = plan_key(pin, nodes, tree, families)
    path = home.mint_dir(pin.id) / "shards" / "family.plan"
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("key") == key:
            return {uid: tuple(order) for uid, order in stored["orders"].items()}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        pass  # no cache, or one of another layout: compute it
    orders = family_plan(pin, nodes, tree, families)
    atomic.write_text(path, json.dumps({"key": key, "orders": {u: list(o) for u, o in orders.items()}}, sort_keys=True))
    return orders


@lru_cache(maxsize=1)
def _history_digest() -> bytes:
    """The code that makes a history pin's candidate (harvester/history)."""
    folder = Path(__file__).resolve().parents[1] / "history"
    return hashlib.sha256(
        b"".join(p.name.encode() + b"\0" + p.read_bytes() for p in sorted(folder.glob("*.py")))
    ).digest()


def _code_digest() -> str:
    digest = hashlib.sha256()
    for root in _CODE:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()

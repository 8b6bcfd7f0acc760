"""Split groups: repositories that must share a split, computed from the pins alone.

Two pins land in one group when any of these holds (each edge keeps its reason for `split show`):
the same repository (two commits of one repo); a shared root commit (a fork or a copy with history);
the same dbt project name with at least half of the smaller project's model files identical (a copy
without history); a package and its ``_source`` package of one organisation; one pin depending on
another pinned repository that has models (an organisation's package family sharing models); any
identical, non-empty model file (the same file on two sides of the line is a leak, so grouping makes it
impossible by construction). Groups are the connected components; a group is named by its smallest
repository identity, so names read like ``fivetran/dbt_stripe``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from dbt_harvest.core.pin import Pin
from dbt_harvest.corpora.repos import is_empty_file_hash, owner_of, package_refs, pin_identities, repo_key

#: share of the smaller project's model files that must be identical for a same-name copy
COPY_SHARE = 0.5


@dataclass(frozen=True)
class Edge:
    a: str  # pin id
    b: str  # pin id
    reason: str


@dataclass(frozen=True)
class Group:
    id: str
    pins: tuple[str, ...]
    repos: tuple[str, ...]
    reasons: tuple[str, ...]


class _UnionFind:
    def __init__(self, items: Sequence[str]) -> None:
        self.parent = {i: i for i in items}

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _pairs_sharing(index: dict[str, list[Pin]]) -> list[tuple[str, Pin, Pin]]:
    """(key, first pin, other pin) for each further pin that shares a key with the first one under it."""
    out: list[tuple[str, Pin, Pin]] = []
    for key, members in index.items():
        first = members[0]
        out.extend((key, first, other) for other in members[1:] if other.id != first.id)
    return out


def edges(pins: Sequence[Pin]) -> list[Edge]:
    """Every reason two pins must share a split (a spanning set per rule, not every pair)."""
    found: list[Edge] = []
    by_repo: dict[str, list[Pin]] = defaultdict(list)
    by_root: dict[str, list[Pin]] = defaultdict(list)
    by_file: dict[str, list[Pin]] = defaultdict(list)
    by_name: dict[str, list[Pin]] = defaultdict(list)
    for pin in pins:
        by_repo[repo_key(pin)].append(pin)
        for root in set(pin.root_commits):
            by_root[root].append(pin)
        for sha in set(pin.model_files.values()):
            if not is_empty_file_hash(sha):
                by_file[sha].append(pin)
        if pin.project_name:
            by_name[pin.project_name.lower()].append(pin)
    for key, a, b in _pairs_sharing(by_repo):
        found.append(Edge(a.id, b.id, f"same repository {key}"))
    for root, a, b in _pairs_sharing(by_root):
        found.append(Edge(a.id, b.id, f"shared root commit {root[:12]}"))
    for sha, a, b in _pairs_sharing(by_file):
        path_a = next(p for p, s in sorted(a.model_files.items()) if s == sha)
        path_b = next(p for p, s in sorted(b.model_files.items()) if s == sha)
        found.append(Edge(a.id, b.id, f"identical model file {sha[:12]} ({path_a} = {path_b})"))
    for name, members in by_name.items():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                share = _identical_share(a, b)
                if share >= COPY_SHARE:
                    found.append(Edge(a.id, b.id, f"same project name {name!r}, {share:.0%} of model files identical"))
    found.extend(_package_edges(pins))
    return found


def _identical_share(a: Pin, b: Pin) -> float:
    files_a = [s for s in a.model_files.values() if not is_empty_file_hash(s)]
    files_b = [s for s in b.model_files.values() if not is_empty_file_hash(s)]
    smaller = min(len(files_a), len(files_b))
    if smaller == 0:
        return 0.0
    return len(set(files_a) & set(files_b)) / smaller


def _package_edges(pins: Sequence[Pin]) -> list[Edge]:
    found: list[Edge] = []
    owners_of: dict[str, list[Pin]] = defaultdict(list)
    for pin in pins:
        for ident in pin_identities(pin):
            owners_of[ident].append(pin)
    seen: set[tuple[str, str, str]] = set()

    def add(a: Pin, b: Pin, kind: str, reason: str) -> None:
        if a.id != b.id and repo_key(a) != repo_key(b) and (a.id, b.id, kind) not in seen:
            seen.add((a.id, b.id, kind))
            found.append(Edge(a.id, b.id, reason))

    for pin in pins:
        for ident in sorted(pin_identities(pin)):
            for other in owners_of.get(f"{ident}_source", []):
                add(pin, other, "source", f"package {ident} and its _source package")
        for pkg in pin.packages:
            for ref in sorted(package_refs(pkg)):
                for other in owners_of.get(ref, []):
                    if other.model_files:
                        family = "same organisation, " if owner_of(repo_key(other)) == owner_of(repo_key(pin)) else ""
                        add(pin, other, "dep", f"{family}depends on pinned package {ref} (shares its models)")
    return found


def explain_groups(pins: Sequence[Pin]) -> list[Group]:
    """The groups with their members and the reasons that joined them, sorted by group id."""
    ids = sorted({p.id for p in pins})
    by_id = {p.id: p for p in pins}
    uf = _UnionFind(ids)
    all_edges = edges(pins)
    for edge in all_edges:
        uf.union(edge.a, edge.b)
    members: dict[str, list[str]] = defaultdict(list)
    for pin_id in ids:
        members[uf.find(pin_id)].append(pin_id)
    reasons: dict[str, list[str]] = defaultdict(list)
    for edge in all_edges:
        text = f"{edge.a} ~ {edge.b}: {edge.reason}"
        if text not in reasons[uf.find(edge.a)]:
            reasons[uf.find(edge.a)].append(text)
    groups = []
    for root, pin_ids in members.items():
        repos = tuple(sorted({repo_key(by_id[p]) for p in pin_ids}))
        groups.append(Group(id=repos[0], pins=tuple(pin_ids), repos=repos, reasons=tuple(reasons[root])))
    return sorted(groups, key=lambda g: g.id)


def split_groups(pins: Sequence[Pin]) -> dict[str, tuple[str, ...]]:
    """group id -> the pin ids that must share a split."""
    return {g.id: g.pins for g in explain_groups(pins)}

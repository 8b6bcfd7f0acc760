"""The files a data engineer opens for a reported symptom: the reported tables' models, their upstream
lineage and the YAML that documents them, read from the project's text files alone.

Why this exists: a prompt that shows "the mutated file first" teaches a model to repair the file it is
pointed at, not to find which model breaks a reported rule (the skill the hidden check measures). What a
prompt shows must therefore depend only on what the task REPORTS (its graded tables, the ones the problem
statement names) and on the project, never on which file was mutated:

- the set: models of the reported tables, then their parents by ``ref()`` depth (nearest first, path
  order within a level, each while it fits the character budget, the shown lineage kept connected), then
  the schema YAML that documents the shown models (nearest first, while it fits): models before
  documentation, so that one large schema file cannot push the lineage that holds the bug out;
- the sizes: the caller measures the ORIGINAL project (the task's fix applied), so that the mutation's own
  few characters cannot move a file across the budget's edge and make the set depend on the bug;
- the order: a shuffle seeded per task (``shown_order``; the caller passes the task's id). Path order
  leaked the bug on the committed corpus: real projects keep marts at the top of ``models/`` and half of the
  real bugs sit in a reported table's own model, so "the first file shown is broken" was right on 48% of
  held-out train rows against 18% by chance. An order seeded by the reported tables alone still leaked
  through the tasks that share a table (most of a table's bugs sit in its own model, which then had one place
  for all of them: "the last file" 29% against 17%); a seed per task puts that model anywhere, task by task.
  The seed says nothing of the bug: it is a digest, and the set shown is chosen before it is applied.

Everything here is a pure function of (files, reported tables, budget, seed). Lineage is read from the SQL text
(``ref('model')`` and ``ref('package', 'model')``), not from a dbt manifest: a prompt is rendered where
no dbt has run. A ``ref`` built from a Jinja variable is invisible here; the caller learns that the broken
file is not in the set (``LineageView.covers``) and leaves that row out rather than pointing at the file.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_REF_CALL = re.compile(r"\bref\(((?:[^()]|\([^()]*\))*)\)")  # arguments may hold one level of calls
_INNER_CALL = re.compile(r"\w*\([^()]*\)")
_QUOTED = re.compile(r"""(=\s*)?(['"])([^'"]+)\2""")
_ALIAS = re.compile(r"""\balias\s*=\s*(['"])([^'"]+)\1""")
_SCHEMA_SUFFIXES = (".yml", ".yaml")
#: how a prompt orders its files (1: project path order; 2: seeded by the reported tables; 3: seeded per task,
#: ``shown_order``); results measured on rows of another order (the corpus feed's log) are measured again
ORDER_VERSION = 3


@dataclass(frozen=True)
class LineageView:
    """What a prompt shows for a set of reported tables (paths in ``shown_order``)."""

    tables: tuple[str, ...]
    paths: tuple[str, ...]
    depth: dict[str, int]  # model path -> ref() distance from a reported table (0: a reported table's model)
    skipped: tuple[str, ...]  # lineage files the budget left out

    def covers(self, path: str) -> bool:
        return path in self.paths


def is_model(path: str) -> bool:
    """A model's SQL file: a ``.sql`` file under a ``models`` folder (a package's or its project's)."""
    return path.endswith(".sql") and "models" in path.split("/")[:-1]


def models_by_name(files: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Model name (the file stem) -> its SQL files (a package and its integration project may share one)."""
    named: dict[str, list[str]] = {}
    for path in sorted(files):
        if is_model(path):
            named.setdefault(posixpath.basename(path)[: -len(".sql")], []).append(path)
    return {name: tuple(paths) for name, paths in named.items()}


def refs(sql: str) -> tuple[str, ...]:
    """The names a SQL file ``ref()``s: every quoted string in a ref call's arguments but keyword values
    (``ref('pkg', 'model')`` gives both, and a package name matches no model file; ``ref('a' if x else
    'b')`` gives both branches; ``version='2'`` and the arguments of a call inside, ``var('x')``, give
    nothing)."""
    return tuple(
        sorted(
            {
                q.group(3)
                for call in _REF_CALL.finditer(sql)
                for q in _QUOTED.finditer(_INNER_CALL.sub("", call.group(1)))
                if not q.group(1)
            }
        )
    )


def table_models(files: Mapping[str, str], table: str) -> tuple[str, ...]:
    """The model files that build ``table``: by file name, else by an ``alias='table'`` config."""
    named = models_by_name(files)
    if table in named:
        return named[table]
    return tuple(
        p for p in sorted(files) if is_model(p) and any(m.group(2) == table for m in _ALIAS.finditer(files[p]))
    )


def upstream(files: Mapping[str, str], roots: Iterable[str]) -> dict[str, int]:
    """Model path -> ref() distance from the nearest root model path (roots are 0), breadth first."""
    named = models_by_name(files)
    depth = dict.fromkeys(roots, 0)
    frontier = sorted(depth)
    while frontier:
        nxt: list[str] = []
        for path in frontier:
            for name in refs(files[path]):
                for parent in named.get(name, ()):
                    if parent not in depth:
                        depth[parent] = depth[path] + 1
                        nxt.append(parent)
        frontier = sorted(nxt)
    return depth


def documenting(files: Mapping[str, str], model_paths: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Model path -> the schema YAML files that document it (a ``- name: <model>`` entry)."""
    yamls = [p for p in sorted(files) if p.endswith(_SCHEMA_SUFFIXES) and "models" in p.split("/")[:-1]]
    found: dict[str, tuple[str, ...]] = {}
    for path in model_paths:
        name = re.escape(posixpath.basename(path)[: -len(".sql")])
        entry = re.compile(rf"""^\s*-\s*name:\s*['"]?{name}['"]?\s*$""", re.MULTILINE)
        found[path] = tuple(y for y in yamls if entry.search(files[y]))
    return found


def symptom_view(files: Mapping[str, str], tables: Iterable[str], max_chars: int, seed: str = "") -> LineageView:
    """The files to show for ``tables`` within ``max_chars``.

    Models first, level by level from the reported tables' models up their ``ref()`` parents: at each
    level the parents of the models shown so far, in path order, each taken when it fits (a model that
    does not fit is skipped, and its parents are reached only through a model that was shown, so the
    shown lineage stays connected). Then the YAML documenting the shown models, nearest level first,
    each file taken when it fits. Models before documentation: a large schema file must not push the
    lineage that holds the bug out of the prompt. The files come in ``shown_order`` under ``seed`` (a task's
    id; by default the reported tables).
    """
    reported = tuple(dict.fromkeys(tables))
    named = models_by_name(files)
    roots = sorted({p for t in reported for p in table_models(files, t)})
    depth = upstream(files, roots)
    chosen: list[str] = []
    skipped: list[str] = []
    budget = max_chars
    seen = set(roots)
    frontier = roots
    while frontier:
        shown_now = []
        for path in frontier:
            if len(files[path]) <= budget:
                chosen.append(path)
                shown_now.append(path)
                budget -= len(files[path])
            else:
                skipped.append(path)
        parents = {p for m in shown_now for name in refs(files[m]) for p in named.get(name, ()) if p not in seen}
        seen |= parents
        frontier = sorted(parents)
    skipped.extend(p for p in depth if p not in seen)  # beyond a model that did not fit
    docs = documenting(files, chosen)
    for model in sorted(chosen, key=lambda p: (depth[p], p)):
        for yaml in docs[model]:
            if yaml in chosen or yaml in skipped:
                continue
            if len(files[yaml]) <= budget:
                chosen.append(yaml)
                budget -= len(files[yaml])
            else:
                skipped.append(yaml)
    order = shown_order(chosen, seed or "\0".join(sorted(set(reported))))
    return LineageView(reported, order, depth, tuple(sorted(set(skipped) - set(chosen))))


def shown_order(paths: Iterable[str], seed: str) -> tuple[str, ...]:
    """``paths`` in the order a prompt shows them: sorted by a digest of ``seed`` and the path, so no place in
    the prompt (first, last, k-th) is where a reported table's own model tends to sit."""
    return tuple(sorted(set(paths), key=lambda p: (hashlib.sha256(f"{seed}\0{p}".encode()).hexdigest(), p)))


def lineage_path(files: Mapping[str, str], start: str, target: str) -> tuple[str, ...]:
    """Model paths from ``start`` down its ref() parents to ``target`` (both included), shortest first
    found; () when ``target`` is not upstream of ``start``."""
    named = models_by_name(files)
    previous: dict[str, str] = {start: ""}
    frontier = [start]
    while frontier and target not in previous:
        nxt = []
        for path in frontier:
            for name in refs(files[path]):
                for parent in named.get(name, ()):
                    if parent not in previous:
                        previous[parent] = path
                        nxt.append(parent)
        frontier = sorted(nxt)
    if target not in previous:
        return ()
    chain = [target]
    while previous[chain[-1]]:
        chain.append(previous[chain[-1]])
    return tuple(reversed(chain))

"""Candidates: every live site of every selected operator in every mutable model of a pin.

A candidate is data: the model, its file, the mutation (an edit over the raw file), and a stable key
(hash of file, operator and edit) under which its report is stored, so a re-run redoes nothing.

A site is live only where DuckDB runs it: the mutators already skip dead code of the file (constant
predicates, SELECTs that can return nothing), and here a mutation whose edit cannot be found in the
model's compiled SQL for DuckDB (a branch for another warehouse), or that lands in dead code of the
compiled SQL (a Jinja value rendered into a constant predicate), is not a candidate either; such
sites are counted (``DeadSite``) so the yield report shows them.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.mint.domain import with_data_values
from dbt_harvest.harvester.mint.lineage import ModelNode
from dbt_harvest.mutators import Mutation, mask_file, transplant
from dbt_harvest.mutators import candidates as mutations_of
from dbt_harvest.mutators.deadcode import dead_regions, touches_dead_code


@dataclass(frozen=True)
class DeadSite:
    """A mutator site that is not a candidate: (operator, family, why)."""

    operator: str
    family: str
    why: str


def dead_in_compiled(mutation: Mutation, original: str, compiled: str, regions: tuple | None) -> str:
    """Why ``mutation`` does nothing where DuckDB runs the model ('' when it is live)."""
    placed = transplant(mutation.edit, original, compiled)
    if placed is None:
        return "not in the SQL compiled for DuckDB"
    if regions:
        why = touches_dead_code(regions, placed.start, placed.end)
        if why:
            return f"{why} once compiled"
    return ""


@dataclass(frozen=True)
class Candidate:
    pin: str
    model: str  # unique id
    file: str  # repo-relative path of the model file
    original: str  # the file's text at the pinned commit
    mutation: Mutation
    # False for a bug this harvester did not plant (a fix mined from history, undone): its repair is what its
    # engineers wrote (any number of hunks), and an edit screening cannot run goes on to the dbt builds
    planted: bool = True

    @property
    def key(self) -> str:
        edit = self.mutation.edit
        text = f"{self.file}\0{self.mutation.operator}\0{edit.start}\0{edit.end}\0{edit.replacement}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def broken(self) -> str:
        return self.mutation.edit.apply(self.original)


def model_file(node: ModelNode, pin: Pin) -> str | None:
    """The repo-relative file of a model, or None for a model of a vendored (hub or git) package.

    ``original_file_path`` is relative to the package that owns the model: the root project, or a
    ``local:`` package such as the repository itself seen from its ``integration_tests/`` project.
    """
    if node.package == pin.project_name or not node.package:
        base = Path(pin.project_dir)
    else:
        local = next(
            (
                p.source.removeprefix("local:")
                for p in pin.packages
                if p.name == node.package and p.source.startswith("local:")
            ),
            None,
        )
        if local is None:
            return None
        base = Path(pin.project_dir) / local
    file = Path(os.path.normpath(base / node.path))
    if file.is_absolute() or file.parts[:1] == ("..",):
        return None
    return file.as_posix()


def why_not_mutable(node: ModelNode, pin: Pin) -> str:
    """'' when the model can be mutated, else why not."""
    if node.language != "sql":
        return "python model"
    if node.materialized == "ephemeral":
        return "ephemeral model"
    if not node.compiled_code:
        return "no compiled SQL in the manifest"
    if model_file(node, pin) is None:
        return "model of a vendored package"
    return ""


def model_candidates(
    pin: Pin,
    node: ModelNode,
    tree: Path,
    families: Collection[str] | None,
    seed: int,
    dead: list[DeadSite] | None = None,
    values: Callable[[str], tuple[str, ...]] | None = None,
) -> Iterator[Candidate]:
    """Candidates of one model in a deterministic, seeded order (so --max-per-model picks fairly); sites
    that are dead where DuckDB runs the model are left out and appended to ``dead``; with ``values`` (a
    column's values in gold, ``domain.gold_values``) restored filters get wrong repairs with real values."""
    file = model_file(node, pin)
    if file is None:
        return
    path = tree / file
    if not path.is_file() or path.is_symlink():
        return
    text = path.read_text(encoding="utf-8", errors="strict")
    rng = random.Random(f"{seed}:{pin.id}:{node.unique_id}")
    by_family: dict[str, list[Mutation]] = {}
    compiled = mask_file(node.compiled_code) if node.compiled_code else None
    regions = dead_regions(compiled) if compiled is not None and compiled.parsed else None
    dead_in_file: list[tuple[str, str, str]] = []
    found = mutations_of(text, families, dead=dead_in_file)
    if dead is not None:
        dead.extend(DeadSite(op, family, why) for op, family, why in dead_in_file)
    for mutation in found:
        why = dead_in_compiled(mutation, text, node.compiled_code, regions)
        if why:
            if dead is not None:
                dead.append(DeadSite(mutation.operator, mutation.family, why))
            continue
        if values is not None:
            mutation = with_data_values(mutation, text, values)
        by_family.setdefault(mutation.family, []).append(mutation)
    for group in by_family.values():
        rng.shuffle(group)
    # round-robin over families, so a capped model is tried across families, not only the first one
    order = [m for row in zip_longest(*(by_family[f] for f in sorted(by_family))) for m in row if m is not None]
    for mutation in order:
        yield Candidate(pin=pin.id, model=node.unique_id, file=file, original=text, mutation=mutation)

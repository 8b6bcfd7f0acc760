"""The operator contract: a site found in a parsed model, the edit it makes, and its wrong repairs.

Each operator is a small class (after SWE-smith's procedural modifiers): an ``id``, a ``family``, the
``effect`` it has on the model's output, a one-line ``explanation``, and its preconditions declared
as data (``node_types``: the sqlglot nodes it looks at; ``clauses``: where such a node must sit).
``sites`` does the search; ``apply`` and ``wrong_repairs`` only read what the site recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from dbt_harvest.mutators.edits import Edit, WrongRepair
from dbt_harvest.mutators.masking import MaskedFile
from dbt_harvest.mutators.sqlfacts import clause_of

FAMILIES: tuple[str, ...] = ("filter", "null", "join", "grain", "time", "values")
#: what a mutation is expected to do to its model's rows; ``changed_rows``: rows come and go either way (a
#: flipped null check in a WHERE swaps the rows it keeps), ``changed_grain``: no constraint on the count
EFFECTS: tuple[str, ...] = ("more_rows", "fewer_rows", "changed_values", "changed_grain", "changed_rows")


@dataclass(frozen=True)
class Site:
    """One place an operator can act: the edit over the original text and wrong repairs over the mutant."""

    operator: str
    start: int
    end: int
    replacement: str
    wrong: tuple[WrongRepair, ...]
    description: str
    effect: str = ""  # overrides the operator's effect where the site decides it (e.g. a window bound)


@dataclass(frozen=True)
class Mutation:
    """A candidate mutation of a model file, ready for screening."""

    operator: str
    family: str
    effect: str
    edit: Edit
    wrong_repairs: tuple[WrongRepair, ...]
    description: str


class Operator:
    """Base class: subclasses set the class attributes and implement ``sites_at``."""

    id: ClassVar[str]
    family: ClassVar[str]
    effect: ClassVar[str]
    explanation: ClassVar[str]
    #: what a wrong repair of this operator's mutant tries, where the site does not say it more precisely
    wrong_intent: ClassVar[str] = "a plausible partial fix"
    node_types: ClassVar[tuple[type[exp.Expression], ...]] = ()
    clauses: ClassVar[frozenset[str]] = frozenset()  # empty: anywhere

    def sites(self, parsed: MaskedFile) -> list[Site]:
        """Every site of this operator in a parsed file, outside off-limits regions."""
        if not parsed.parsed or parsed.tree is None:
            return []
        found: list[Site] = []
        seen: set[tuple[int, int, str]] = set()
        for node in parsed.tree.find_all(*self.node_types):
            if self.clauses and clause_of(node) not in self.clauses:
                continue
            for site in self.sites_at(parsed, node):
                key = (site.start, site.end, site.replacement)
                if key in seen or not parsed.editable(site.start, site.end):
                    continue
                seen.add(key)
                found.append(site)
        return found

    def sites_at(self, parsed: MaskedFile, node: exp.Expression) -> Iterable[Site]:
        raise NotImplementedError

    def apply(self, site: Site) -> Edit:
        """The edit over the original text."""
        return Edit(site.start, site.end, site.replacement)

    def wrong_repairs(self, site: Site) -> list[WrongRepair]:
        """Plausible non-fixes, as edits over the mutated text."""
        return list(site.wrong)

    def site(
        self,
        parsed: MaskedFile,
        start: int,
        end: int,
        replacement: str,
        wrong: Iterable[Edit | WrongRepair | None] = (),
        description: str = "",
        effect: str = "",
    ) -> list[Site]:
        """A one-element list holding the site, or empty when the edit changes nothing.

        Wrong repairs that would reproduce the original or the mutant are dropped here; a plain ``Edit``
        becomes a ``WrongRepair`` carrying the operator's ``wrong_intent``.
        """
        text = parsed.text
        if text[start:end] == replacement:
            return []
        mutant = Edit(start, end, replacement).apply(text)
        kept: list[WrongRepair] = []
        for repair in wrong:
            if repair is None or repair.end > len(mutant):
                continue
            if not isinstance(repair, WrongRepair):
                repair = WrongRepair(repair.start, repair.end, repair.replacement, self.wrong_intent)
            fixed = repair.apply(mutant)
            if fixed != text and fixed != mutant and all(fixed != k.apply(mutant) for k in kept):
                kept.append(repair)
        before = " ".join(text[start:end].split())[:60]
        after = " ".join(replacement.split())[:60]
        desc = description or f"{self.id}: {before!r} -> {after!r}"
        return [Site(self.id, start, end, replacement, tuple(kept), desc, effect)]

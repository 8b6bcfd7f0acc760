"""The operator catalog: every family's operators composed in one visible order, and ``candidates``,
the one call the mint makes per model file."""

from __future__ import annotations

from collections.abc import Collection

from dbt_harvest.mutators import filters, grain, join, null, time_windows, values
from dbt_harvest.mutators.deadcode import dead_regions, touches_dead_code
from dbt_harvest.mutators.edits import Edit
from dbt_harvest.mutators.equivalence import canonical
from dbt_harvest.mutators.masking import MaskedFile, mask_file
from dbt_harvest.mutators.operator import EFFECTS, FAMILIES, Mutation, Operator, Site

#: family order is the order candidates come out in.
_FAMILY_MODULES = (filters, null, join, grain, time_windows, values)

REGISTRY: dict[str, Operator] = {op.id: op for module in _FAMILY_MODULES for op in module.OPERATORS}


class UnknownFamilyError(ValueError):
    """A family name that is not one of FAMILIES; pick from the tuple."""


def _check() -> None:
    for op in REGISTRY.values():
        assert op.family in FAMILIES, f"{op.id}: family {op.family!r} is not in FAMILIES"
        assert op.effect in EFFECTS, f"{op.id}: effect {op.effect!r} is not in EFFECTS"
        assert op.id.startswith(op.family + "."), f"{op.id}: id must start with its family"


_check()


def candidates(
    text: str, families: Collection[str] | None = None, dead: list[tuple[str, str, str]] | None = None
) -> list[Mutation]:
    """Every mutation of a model file that parses, stays outside off-limits regions and dead code
    (``deadcode``: constant predicates, SELECTs that can return no row), and is not statically
    equivalent to the original. Sites skipped as dead code are appended to ``dead`` as
    (operator, family, why) when a list is given."""
    if families is not None:
        unknown = sorted(set(families) - set(FAMILIES))
        if unknown:
            raise UnknownFamilyError(f"unknown mutator families {unknown}; choose from {list(FAMILIES)}")
    parsed = mask_file(text)
    if not parsed.parsed:
        return []
    original_canon = canonical(parsed)
    regions = dead_regions(parsed)
    out: list[Mutation] = []
    for op in REGISTRY.values():
        if families is not None and op.family not in families:
            continue
        for site in op.sites(parsed):
            why = touches_dead_code(regions, site.start, site.end)
            if why:
                if dead is not None:
                    dead.append((op.id, op.family, why))
                continue
            mutation = _admit(parsed, original_canon, op, site)
            if mutation is not None:
                out.append(mutation)
    return out


def _admit(parsed: MaskedFile, original_canon: str | None, op: Operator, site: Site) -> Mutation | None:
    edit = op.apply(site)
    mutant = edit.apply(parsed.text)
    masked_mutant = mask_file(mutant)
    if not masked_mutant.parsed:
        return None
    if original_canon is not None and canonical(masked_mutant) == original_canon:
        return None
    return Mutation(
        operator=op.id,
        family=op.family,
        effect=site.effect or op.effect,
        edit=edit,
        wrong_repairs=tuple(op.wrong_repairs(site)),
        description=site.description,
    )


__all__ = ["REGISTRY", "FAMILIES", "EFFECTS", "candidates", "Edit"]

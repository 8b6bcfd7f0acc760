"""Mutators: pure, I/O-free mutation of dbt model SQL.

Jinja is masked by same-length placeholders so sqlglot parses the model in place; operators find
sites in the parse tree and return splices of the original text; a static equivalence filter drops
mutants that say the same thing. Depends on sqlglot only.
"""

from dbt_harvest.mutators.edits import Edit, WrongRepair, difference
from dbt_harvest.mutators.equivalence import is_equivalent
from dbt_harvest.mutators.masking import MaskedFile, Region, mask_file
from dbt_harvest.mutators.operator import EFFECTS, FAMILIES, Mutation, Operator, Site
from dbt_harvest.mutators.registry import REGISTRY, candidates
from dbt_harvest.mutators.transplanting import transplant

__all__ = [
    "EFFECTS",
    "FAMILIES",
    "REGISTRY",
    "Edit",
    "MaskedFile",
    "Mutation",
    "Operator",
    "Region",
    "Site",
    "WrongRepair",
    "candidates",
    "difference",
    "is_equivalent",
    "mask_file",
    "transplant",
]

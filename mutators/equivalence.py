"""The static equivalence filter: a mutant whose canonical SQL equals the original's is dropped.

Canonical SQL is the masked text parsed by sqlglot, normalised and simplified by its optimizer, and
printed; it catches mutants that only reorder or restate what the original says (``a = 1`` vs
``1 = a``, a dropped ``true`` conjunct). It is conservative: different canonical text proves nothing.
"""

from __future__ import annotations

from sqlglot.optimizer.normalize import normalize
from sqlglot.optimizer.simplify import simplify

from dbt_harvest.mutators.masking import MaskedFile, mask_file


def canonical(parsed: MaskedFile) -> str | None:
    """The canonical SQL of a parsed file, or None when it did not parse."""
    if not parsed.parsed or parsed.tree is None:
        return None
    tree = parsed.tree.copy()
    try:
        tree = simplify(normalize(tree, max_distance=64))
    except Exception:  # the optimizer gives up on some shapes; the printed tree is still canonical enough
        tree = parsed.tree.copy()
    return tree.sql(dialect=parsed.dialect, normalize=True, comments=False)


def is_equivalent(original_text: str, mutated_text: str) -> bool:
    """True when both files parse and their canonical SQL is the same."""
    a, b = mask_file(original_text), mask_file(mutated_text)
    ca, cb = canonical(a), canonical(b)
    return ca is not None and ca == cb

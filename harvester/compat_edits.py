"""Which files of the repository a compat patch edits, and whether that edit may be admitted.

A compat patch makes a project build on DuckDB. Most add one new file (a `duckdb__` macro the package's own
dispatch finds), and that is the default: a patch that changes a file the repository already has is refused
unless its edits are declared (`harvest add --compat-patch FILE --allow-edits`). A declared edit may touch the
project's configuration, seeds, YAML or macros (a var default, a seed column's type, a dialect function), and
is recorded in the pin (`compat_edits`), every dataset row and the card. It may never touch model SQL: a
model's SQL is what mutation and completion tasks change and what their graded tables are built from, so an
edit there could change a business rule the tasks then grade. Pure: it reads only the patch text and the
project's model folders.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.patching import parse_patch

_MODEL_SUFFIXES = (".sql", ".py")
_MODEL_FOLDERS = ("models", "snapshots")


class CompatEditError(HarvestError):
    """A compat patch edits a file it may not (undeclared, or model SQL)."""


def edited_files(patch: str) -> tuple[str, ...]:
    """The repository files ``patch`` changes or deletes (a created file is no edit), sorted."""
    return tuple(sorted({p.path for p in parse_patch(patch) if not p.created}))


def is_model_file(path: str, model_paths: Sequence[str]) -> bool:
    """A model's (or snapshot's) SQL or Python file: under one of ``model_paths`` (repository-relative) or any
    ``models``/``snapshots`` folder (a vendored package's, the root package of an integration-tests layout)."""
    posix = PurePosixPath(path)
    if posix.suffix not in _MODEL_SUFFIXES:
        return False
    under = any(posix.is_relative_to(PurePosixPath(folder)) for folder in model_paths if folder not in ("", "."))
    return under or any(part in _MODEL_FOLDERS for part in posix.parts[:-1])


def review(patch: str, model_paths: Sequence[str], *, allow_edits: bool) -> tuple[str, ...]:
    """The files ``patch`` edits, when it may; CompatEditError (one line, what to do) when it may not."""
    edits = edited_files(patch)
    if not edits:
        return ()
    shown = ", ".join(edits[:5]) + (f" and {len(edits) - 5} more" if len(edits) > 5 else "")
    if not allow_edits:
        raise CompatEditError(
            f"the compat patch edits files of the repository ({shown}); a compat patch adds new "
            "files only unless its edits are declared: pass --allow-edits (and say why in "
            "pins/patches/NOTES.md)"
        )
    models = [path for path in edits if is_model_file(path, model_paths)]
    if models:
        raise CompatEditError(
            f"the compat patch edits model SQL ({', '.join(models[:5])}); tasks mutate, complete "
            "and grade models, so an edit may change configuration, seeds, YAML or macros, never a "
            "model (override a macro in a new file instead)"
        )
    return edits


__all__ = ["CompatEditError", "edited_files", "is_model_file", "review"]

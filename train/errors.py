"""Training's exceptions: each says which invariant of a run failed and what to do about it.

All derive from HarvestError so that `harvest train …` prints one line and exits 1. A manifest's and a
frozen recipe's errors (ManifestError, FreezeError) belong to the contract in corpora/recipe.py, which
both training and the sealed audit use; they are re-exported here for training's callers.
"""

from __future__ import annotations

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.corpora.errors import (  # the frozen-recipe contract's errors (corpora/recipe.py)
    FreezeError,
    ManifestError,
)

__all__ = ["FreezeError", "ManifestError", "PromptCoverageError", "TrainConfigError", "TrainDataError", "TrainError"]


class TrainError(HarvestError):
    """Base class for refusals and failures of the training side."""


class TrainConfigError(TrainError):
    """A training config file is missing, malformed, or holds an unknown or invalid key."""


class TrainDataError(TrainError):
    """Training data could not be built: no train tasks, unreadable project files, a bad patch."""


class PromptCoverageError(TrainDataError):
    """A task's single-turn prompt would not show its broken file (budget or invisible lineage); the row
    is left out and reported, never rendered pointing at the file."""

"""Training's exceptions: each says which invariant of a run failed and what to do about it.

All derive from HarvestError so that `harvest train …` prints one line and exits 1.
"""

from __future__ import annotations

from core.errors import HarvestError


class TrainError(HarvestError):
    """Base class for refusals and failures of the training side."""


class TrainConfigError(TrainError):
    """A training config file is missing, malformed, or holds an unknown or invalid key."""


class ManifestError(TrainError):
    """A run manifest is missing, malformed, or fails its signature or digest check."""


class FreezeError(TrainError):
    """A run cannot be frozen, or a frozen recipe no longer matches what was frozen."""


class TrainDataError(TrainError):
    """Training data could not be built: no train tasks, unreadable project files, a bad patch."""

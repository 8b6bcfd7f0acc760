"""The corpora's exceptions: each names the leak or refusal and what to do about it.

All derive from HarvestError, so the CLI prints one line and exits 1.
"""

from __future__ import annotations

from dbt_harvest.core.errors import HarvestError


class CorporaError(HarvestError):
    """Base class for refusals of the split, seal, lint, dataset and publish steps."""


class LedgerError(CorporaError):
    """The split reservation ledger is malformed or its hash chain does not check out."""


class ReservationError(CorporaError):
    """A split reservation was refused (would change a reserved assignment, too few groups, unknown name)."""


class FirewallError(CorporaError):
    """A dev or test task reached a path that may only see train tasks, or a task's split disagrees."""


class SealError(CorporaError):
    """The sealed test store does not match its committed content hash, or a write to it was refused."""


class UnsealError(CorporaError):
    """An unseal request was refused: recipe not frozen, hashes differ, or the recipe was unsealed before."""


class ManifestError(CorporaError):
    """A run manifest (or FROZEN.json) is missing, malformed, or fails its signature or digest check."""


class FreezeError(CorporaError):
    """A run cannot be frozen, or a frozen recipe no longer matches what was frozen."""


class ExclusionsError(CorporaError):
    """The shipped benchmark exclusion list is missing or altered."""


class LintError(CorporaError):
    """Contamination lint found violations; the step that ran it refuses to continue."""


class DatasetBuildError(CorporaError):
    """A dataset could not be built: no tasks, an empty split, a missing gold file, a bad record."""


class PublishError(CorporaError):
    """A dataset folder could not be published: refused split, unreachable Hub, a folder that fails its hashes."""

"""The harvester's exceptions: each names the invariant that failed and what to do about it.

Every error a user can cause derives from HarvestError, which the CLI turns into one line and exit 1.
"""

from __future__ import annotations


class HarvestError(Exception):
    """Base class: a refusal or failure the user should read as one line."""


class SpecError(HarvestError):
    """A repository spec is malformed or names something that does not exist."""


class FetchError(HarvestError):
    """A repository or commit could not be fetched or verified."""


class ProjectError(HarvestError):
    """No buildable dbt project was found where one was expected."""


class PackageError(HarvestError):
    """A dbt package could not be resolved or vendored."""


class SandboxError(HarvestError):
    """The sandbox is unavailable or refused to run."""


class BuildError(HarvestError):
    """A dbt build failed; the message carries the first dbt error."""


class GoldError(HarvestError):
    """Gold is missing, empty, or does not match its recorded hash."""


class PinError(HarvestError):
    """A pin file is malformed, missing, or inconsistent."""


class ToolchainError(HarvestError):
    """A pin's toolchain (another dbt in its own virtualenv) could not be chosen, made or found."""

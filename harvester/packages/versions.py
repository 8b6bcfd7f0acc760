"""Which tag a hub package resolves to: dbt's semver rules applied to a repository's tags.

Why it exists: `dbt deps` asks the hub for the versions of a package and installs the newest one inside
the combined range of every requester, skipping prereleases unless one is asked for and skipping
versions whose ``require-dbt-version`` excludes the installed dbt. Offline, the versions are the
repository's tags ("0.3.1", "v0.3.1", "1.0.0-b1"); this module applies the same rules to them with
dbt's own semver code, and explains a conflict by naming the requesters whose ranges cannot meet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from dbt_harvest.core.errors import PackageError


@dataclass(frozen=True)
class VersionRequest:
    """One requester's constraint on a hub package."""

    requester: str  # "the root project", "package shop_utils 0.2.0", ...
    versions: tuple[str, ...]
    install_prerelease: bool = False


def tag_versions(tags: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Semver version -> (tag name, commit) for every tag that reads as an exact version.

    A leading ``v`` is allowed; when both ``1.0.0`` and ``v1.0.0`` exist the bare one wins.
    """
    from dbt_common.semver import Matchers, VersionSpecifier

    found: dict[str, tuple[str, str]] = {}
    for tag in sorted(tags, key=lambda t: (t.startswith(("v", "V")), t)):
        text = tag[1:] if tag[:1] in ("v", "V") else tag
        if not text[:1].isdigit():
            continue
        try:
            spec = VersionSpecifier.from_version_string(text)
        except Exception:  # dbt raises its own SemverError for non-versions
            continue
        if spec.matcher != Matchers.EXACT:
            continue
        found.setdefault(text, (tag, tags[tag]))
    return found


def choose_version(
    package: str,
    requests: Sequence[VersionRequest],
    available: Sequence[str],
    compatible: Callable[[str], bool] = lambda version: True,
) -> str:
    """The newest version in ``available`` inside every request's range (dbt's rules).

    ``compatible(version)`` may veto a candidate (``require-dbt-version``); the newest compatible
    version in range wins.
    """
    from dbt_common import semver
    from dbt_common.exceptions import VersionsNotCompatibleError

    specifiers = []
    for request in requests:
        for text in request.versions:
            try:
                specifiers.append(semver.VersionSpecifier.from_version_string(text))
            except Exception:
                raise PackageError(
                    f"{package}: {request.requester} asks for version {text!r}, which is not a "
                    "semantic version range (e.g. '>=0.2.0' or '1.0.0')"
                ) from None
    try:
        combined = semver.reduce_versions(*specifiers)
    except VersionsNotCompatibleError:
        raise PackageError(_conflict_message(package, requests)) from None
    prerelease = any(r.install_prerelease for r in requests) or any(s.prerelease for s in specifiers)
    installable = semver.filter_installable(list(available), prerelease)
    in_range = [
        v
        for v in installable
        if semver.versions_compatible(semver.VersionSpecifier.from_version_string(v), combined.start, combined.end)
    ]
    in_range.sort(key=semver.VersionSpecifier.from_version_string, reverse=True)
    for version in in_range:
        if compatible(version):
            return version
    wanted = _range_text(requests)
    if in_range:
        raise PackageError(
            f"no version of {package} in {wanted} supports the dbt-core it builds under, or was released by the "
            f"date it resolves as of (tried {', '.join(in_range)})"
        )
    shown = ", ".join(installable) if installable else "none"
    raise PackageError(f"no version of {package} satisfies {wanted} (available: {shown})")


def _range_text(requests: Sequence[VersionRequest]) -> str:
    seen: list[str] = []
    for request in requests:
        for text in request.versions:
            if text not in seen:
                seen.append(text)
    return ",".join(seen)


def _conflict_message(package: str, requests: Sequence[VersionRequest]) -> str:
    from dbt_common import semver

    for first, second in combinations(requests, 2):
        if first.requester == second.requester:
            continue
        if not semver.versions_compatible(*first.versions, *second.versions):
            return (
                f"conflicting versions of {package}: {first.requester} requires "
                f"{','.join(first.versions)} but {second.requester} requires {','.join(second.versions)}"
            )
    parts = "; ".join(f"{r.requester} requires {','.join(r.versions)}" for r in requests)
    return f"conflicting versions of {package}: {parts}"

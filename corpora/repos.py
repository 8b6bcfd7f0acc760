"""Repository identities: one normal form for URLs, hub package ids and pins, so that matches are exact.

A pinned repository is known by its URL; a dbt package by a hub id (``fivetran/stripe_source``) or a
git URL; the benchmark lists both kinds. Everything is reduced to a lower-case ``owner/name`` identity
(GitHub URLs) or a trimmed URL (elsewhere), and a repository also answers to the hub ids its name
implies (``dbt_stripe_source`` -> ``stripe_source``; an ``integration_tests`` project name loses that suffix).
"""

from __future__ import annotations

import re

from dbt_harvest.core.pin import PackageRecord, Pin

_GITHUB = re.compile(r"^(?:https?://|ssh://git@|git@)?(?:www\.)?github\.com[:/]+(.+)$", re.IGNORECASE)
_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def identity(ref: str) -> str:
    """Normal form of a URL or hub id: ``owner/name`` lower-case for GitHub and hub ids, else the URL."""
    text = ref.strip().rstrip("/")
    if text.lower().endswith(".git"):
        text = text[:-4]
    match = _GITHUB.match(text)
    if match:
        return match.group(1).strip("/").lower()
    if "://" not in text and not text.startswith("/") and text.count("/") == 1:
        return text.lower()  # a hub id
    return text


def repo_key(pin: Pin) -> str:
    """The repository a pin belongs to (all commits of one repository share it)."""
    return identity(pin.url)


def owner_of(key: str) -> str:
    """The organisation part of an identity (the folder above, for non-GitHub paths)."""
    parts = key.rstrip("/").split("/")
    return parts[-2].lower() if len(parts) >= 2 else ""


def _strip_name(name: str) -> set[str]:
    name = name.lower()
    out = {name}
    for prefix in ("dbt_", "dbt-"):
        if name.startswith(prefix):
            out.add(name[len(prefix) :])
    for suffix in ("_integration_tests", "-integration-tests"):
        for n in list(out):
            if n.endswith(suffix):
                out.add(n[: -len(suffix)])
    return {n for n in out if n}


def pin_identities(pin: Pin) -> frozenset[str]:
    """Every identity by which a pinned repository can be referred to as a package."""
    key = repo_key(pin)
    owner = owner_of(key)
    names = _strip_name(key.rsplit("/", 1)[-1]) | _strip_name(pin.project_name)
    return frozenset({key} | {f"{owner}/{n}" for n in names if owner})


def package_refs(pkg: PackageRecord) -> frozenset[str]:
    """Identities a dependency refers to (hub id, fetched URL and the hub id its repo name implies)."""
    refs: set[str] = set()
    kind, _, rest = pkg.source.partition(":")
    if kind == "local":
        return frozenset()
    if kind == "hub" and rest:
        refs.add(identity(rest))
    for url in (rest if kind == "git" else "", pkg.url):
        if url:
            key = identity(url)
            refs.add(key)
            owner = owner_of(key)
            if owner:
                refs |= {f"{owner}/{n}" for n in _strip_name(key.rsplit("/", 1)[-1])}
    return frozenset(refs)


def is_empty_file_hash(sha256: str) -> bool:
    """An empty file is identical everywhere and proves nothing about copying."""
    return sha256 == _EMPTY_SHA256

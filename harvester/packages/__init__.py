"""dbt packages without `dbt deps`: resolve packages.yml transitively to exact commits, then vendor them.

Why it exists: `dbt deps` needs the network (the hub index and git hosts, for transitive packages too),
while a pin must record every package at an exact commit and rebuild offline. The work is split by job:
``specs`` reads what a project declares (dbt's own parser, lock file and hash), ``versions`` applies
dbt's semver rules to a repository's tags, ``sources`` finds repositories (package mirror, else the
network), ``resolver`` walks the dependency graph, ``vendor`` installs the result into dbt_packages.
"""

from __future__ import annotations

from dbt_harvest.harvester.packages.resolver import git_source, resolve_packages, split_git_source
from dbt_harvest.harvester.packages.sources import MIRROR_ENV, PackageMirror, load_mirror
from dbt_harvest.harvester.packages.vendor import install_path, vendor_packages

__all__ = [
    "MIRROR_ENV",
    "PackageMirror",
    "git_source",
    "install_path",
    "load_mirror",
    "resolve_packages",
    "split_git_source",
    "vendor_packages",
]

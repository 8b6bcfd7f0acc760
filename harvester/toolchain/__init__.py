"""Pin toolchains (issue 61): a supported dbt release per pin, made as its own virtualenv, shared between pins.

``releases`` says which releases are supported and chooses one from a project's ``require-dbt-version``;
``make`` makes a release's virtualenv (or exactly a pin's lock of it) under HARVEST_HOME/toolchains.
The sandbox runs a pin's builds with its toolchain's interpreter (``harvester.sandbox.command``).
"""

from dbt_harvest.harvester.toolchain.make import ensure_toolchain, made, make_release, toolchain_python, wheels
from dbt_harvest.harvester.toolchain.releases import Release, choose, installed_release, release_named, supported

__all__ = [
    "Release",
    "choose",
    "ensure_toolchain",
    "installed_release",
    "made",
    "make_release",
    "release_named",
    "supported",
    "toolchain_python",
    "wheels",
]

"""dbt-harvest's harvester: pin real dbt repositories at exact commits, build them sandboxed, keep gold.

This package owns everything that touches a harvested repository: specs, fetching, dbt package
vendoring, sandboxed builds, gold capture, pins, minting and the `harvest` CLI.
"""

__version__ = "0.1.0"

"""The names model tables get in a captured gold file: one rule shared by the capture and every reader.

The official scorer (Spider 2.0-DBT shape) looks graded tables up by bare name in schema ``main``. dbt
builds models in many schemas: the profile's (target) schema, ``<target>_<custom>`` for a ``+schema``
config, whatever a project's ``generate_schema_name`` returns (every Fivetran-style ``integration_tests``
project builds outside ``main``). So the capture gathers them in ``main``: a model relation whose alias
no other model relation of the build shares (ignoring case, as DuckDB does) is captured as
``main.<alias>``; relations that share an alias keep ``<schema>.<alias>``, which are distinct, so two
relations never land on one name and such tables are simply not gradable. A project whose models all
live in ``main`` keeps its exact names. The capture (inside the sandbox), the pin's table records, the
lineage's ``ModelNode.table`` and the mint's grading all name tables through ``captured_names``, so
both sides of every comparison agree.

Stdlib only: this module is imported inside the sandbox (as ``harvest_names``) and on the host (as
``harvester.sandbox.inside.harvest_names``).
"""

from __future__ import annotations

from collections.abc import Iterable

# The schema the official scorer resolves bare table names in.
GRADED_SCHEMA = "main"


def captured_names(relations: Iterable[tuple[str, str, str]]) -> dict[str, str]:
    """``unique_id -> captured name`` for the model relations ``(unique_id, schema, alias)`` of one build."""
    rows = list(relations)
    sharing: dict[str, int] = {}
    for _, _, alias in rows:
        sharing[alias.lower()] = sharing.get(alias.lower(), 0) + 1
    return {
        unique_id: f"{GRADED_SCHEMA if sharing[alias.lower()] == 1 else schema}.{alias}"
        for unique_id, schema, alias in rows
    }


def graded_name(captured: str) -> str | None:
    """The bare name the scorer uses for a captured table name, or None when it is not in ``main``."""
    schema, dot, alias = captured.partition(".")
    return alias if dot and schema == GRADED_SCHEMA else None


def full_graded_name(bare: str) -> str:
    """The captured name of a graded (bare) table name: ``main.<bare>``."""
    return f"{GRADED_SCHEMA}.{bare}"

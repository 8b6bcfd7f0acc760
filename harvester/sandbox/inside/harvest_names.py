"""The names model tables get in a captured gold file: one rule shared by the capture and every reader.

The official scorer (Spider 2.0-DBT shape) looks graded tables up by bare name in schema ``main``. A
project whose profile (target) schema is not ``main`` (every Fivetran-style ``integration_tests``
project, whose target must equal the package's ``<pkg>_schema`` var) builds its models elsewhere, so
the capture renames them: a table built in the TARGET schema is captured as ``main.<alias>``; a table
in any other schema (a custom ``+schema``) keeps ``<schema>.<alias>``. With target ``main`` nothing is
renamed. The capture (inside the sandbox), the pin's table records, the lineage's ``ModelNode.table``
and the mint's grading all name tables through these functions, so both sides of every comparison
agree.

Stdlib only: this module is imported inside the sandbox (as ``harvest_names``) and on the host (as
``harvester.sandbox.inside.harvest_names``).
"""

from __future__ import annotations

from collections.abc import Iterable

# The schema the official scorer resolves bare table names in.
GRADED_SCHEMA = "main"


def captured_schema(schema: str, target_schema: str) -> str:
    """The schema a relation built in ``schema`` lives in once captured.

    DuckDB identifiers are case-insensitive, so the target schema is matched without case. With the
    target ``main`` the schema is returned unchanged, so pins built there keep their exact names.
    """
    if target_schema.lower() == GRADED_SCHEMA:
        return schema
    return GRADED_SCHEMA if schema.lower() == target_schema.lower() else schema


def captured_name(schema: str, alias: str, target_schema: str) -> str:
    """``main.<alias>`` for a table built in the target schema, else ``<schema>.<alias>``."""
    return f"{captured_schema(schema, target_schema)}.{alias}"


def graded_name(captured: str) -> str | None:
    """The bare name the scorer uses for a captured table name, or None when it is not in ``main``."""
    schema, dot, alias = captured.partition(".")
    return alias if dot and schema == GRADED_SCHEMA else None


def full_graded_name(bare: str) -> str:
    """The captured name of a graded (bare) table name: ``main.<bare>``."""
    return f"{GRADED_SCHEMA}.{bare}"


def first_collision(relations: Iterable[tuple[str, str, str]], target_schema: str) -> str:
    """'' when no two relations are captured under the same name, else why not, as one line.

    ``relations`` are ``(unique_id, schema, alias)``. Names are compared without case, as DuckDB does.
    A collision can only come from the renaming: a model literally in schema ``main`` while the target
    schema is another one that holds a model of the same alias.
    """
    seen: dict[str, tuple[str, str, str]] = {}
    for unique_id, schema, alias in relations:
        name = captured_name(schema, alias, target_schema)
        other = seen.get(name.lower())
        if other is None:
            seen[name.lower()] = (unique_id, schema, alias)
            continue
        return (
            f"{other[0]} ({other[1]}.{other[2]}) and {unique_id} ({schema}.{alias}) would both be captured as "
            f"{name}: tables of the target schema {target_schema!r} are captured in schema {GRADED_SCHEMA}; "
            f"give one of them another alias or schema"
        )
    return ""

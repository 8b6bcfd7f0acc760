"""Synthesized data as a patch over the project: seed files, their types, and the ``source`` override.

The data enters the project the way any project's own data does, as dbt seeds, so everything downstream
(gold, mutation, screening, augmentation's lineage to seed columns) treats it like a repository's seeds. A
new macro ``source`` in the project (dbt lets a root project override it) sends each synthesized source to
its seed through ``ref``, so dbt orders the seeds before the models; a dbt test on a source, and a snapshot,
read the seed's relation directly (a generic test cannot take a new ``ref``, and a snapshot whose
``relation`` its YAML names is rendered after parsing, where a new ``ref`` is refused; every build seeds
before it builds). While parsing (``execute`` false, the graph not built yet) both take the ``ref``, which
records the dependency. The project's SQL and YAML are not edited:
the patch only adds files under ``_harvest_synth`` names.

Pure: text in, text out.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from dbt_harvest.core.patching import make_patch
from dbt_harvest.harvester.synth.contract import Contract
from dbt_harvest.harvester.synth.generate import Table

#: the folder (under the project's first seed path) the synthesized seeds are written to
SEED_FOLDER = "_harvest_synth"
#: the macro file (under the project's first macro path) that routes sources to their seeds
MACRO_FILE = "_harvest_synth_source.sql"

DUCKDB_TYPES = {
    "integer": "bigint",
    "numeric": "decimal(18,4)",
    "date": "date",
    "timestamp": "timestamp",
    "boolean": "boolean",
    "varchar": "varchar",
}


def csv_text(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow(["" if v is None else v for v in row])
    return buffer.getvalue()


def _yaml_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def properties_text(contract: Contract) -> str:
    lines = ["version: 2", "seeds:"]
    for table in contract.tables:
        lines.append(f"  - name: {table.relation}")
        lines.append(f"    description: {_yaml_str(f'synthesized data of source {table.source}.{table.table}')}")
        lines.append("    config:")
        lines.append("      column_types:")
        for col in table.columns:
            lines.append(f"        {_yaml_str(col.name)}: {_yaml_str(DUCKDB_TYPES[col.type])}")
    return "\n".join(lines) + "\n"


def macro_text(mapping: Mapping[str, str]) -> str:
    entries = ", ".join(f"{_yaml_str(k)}: {_yaml_str(v)}" for k, v in sorted(mapping.items()))
    return (
        "{# harvest: synthesized data. Each source below is read from the seed holding its synthesized rows. #}\n"
        "{% macro source(source_name, table_name) %}\n"
        f"  {{%- set synthesized = {{{entries}}} -%}}\n"
        "  {%- set name = synthesized.get(source_name ~ '.' ~ table_name) -%}\n"
        "  {%- if not name -%}\n"
        "    {%- do return(builtins.source(source_name, table_name)) -%}\n"
        "  {%- endif -%}\n"
        "  {%- if execute and model is mapping and model.get('resource_type') in ('test', 'snapshot') -%}\n"
        "    {%- for node in graph.get('nodes', {}).values() if node.resource_type == 'seed' and node.name == name -%}\n"
        "      {%- do return(api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias)) -%}\n"
        "    {%- endfor -%}\n"
        "  {%- endif -%}\n"
        "  {%- do return(builtins.ref(name)) -%}\n"
        "{% endmacro %}\n"
    )


def files(
    contract: Contract, tables: Sequence[Table], project_dir: str, seed_path: str, macro_path: str
) -> dict[str, str]:
    """Repository-relative path -> text of every file the synthesized data adds."""
    base = PurePosixPath(project_dir) if project_dir not in ("", ".") else PurePosixPath()
    seeds = base / seed_path / SEED_FOLDER
    out = {str(seeds / f"{t.relation}.csv"): csv_text(t) for t in tables}
    out[str(seeds / "_harvest_synth.yml")] = properties_text(contract)
    out[str(base / macro_path / MACRO_FILE)] = macro_text(contract.mapping())
    return out


def patch_text(added: Mapping[str, str]) -> str:
    """One patch creating every file of ``added`` (sorted by path)."""
    return "".join(make_patch(path, None, text) for path, text in sorted(added.items()))


__all__ = [
    "DUCKDB_TYPES",
    "MACRO_FILE",
    "SEED_FOLDER",
    "csv_text",
    "files",
    "macro_text",
    "patch_text",
    "properties_text",
]

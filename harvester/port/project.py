"""A project ported from another warehouse to DuckDB: every model file that needs it, as one patch.

``harvest add --port-from snowflake|bigquery|postgres|redshift`` runs ``port_tree`` on the exported project
(packages vendored, compat patch applied) before anything builds. Each model's SQL is ported by
``transpile.port_model``; a model that already reads the same in DuckDB is left as it is. The ``data_type``
values of the YAML under the model paths (a contract's ``float64``) are ported too (``yaml_types``), and so is
the SQL in its tests' arguments (``yaml_sql``: an ``expression_is_true`` expression, a ``where``, a range's
bound), the rest of each file kept. A project whose models give ``partition_by`` BigQuery's mapping gets one
macro file more (``PARTITION_MACRO``), one whose YAML enforces a contract another (``CONTRACT_MACRO``: the
warehouse's types do not map one for one), and one that builds into databases of its own naming a third
(``DATABASE_MACRO``: a pin builds one). The result is one patch that edits model files and their YAML and adds
those macros, the pin's declared port: it records the dialect, the patch's sha256 and the files it edits
(``harvest show`` lists them). Like synthesized data, the patch is derived again on a rebuild (the same
sqlglot gives the same text) and never committed: it holds the repository's SQL. The project's own macros
are ported too, each macro's body alone (``port_macros``): a model calling ``{{ delivery_time(a, b) }}``
reads Snowflake's ``datediff(day, ...)`` from it. Hooks and macros that only grant permissions (DuckDB has no
roles) run ``select 1`` instead (``permissions``), in dbt_project.yml, the properties YAML and macro files. Tasks are minted over the
ported text, and statements, written from builds, never mention the port.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from dbt_harvest.core.patching import make_patch
from dbt_harvest.harvester.discovery import Project, project_files
from dbt_harvest.harvester.port.permissions import drop_permission_macros, drop_permissions
from dbt_harvest.harvester.port.raw_tables import SOURCES_FILE, as_sources, read_tables, source_names, sources_yaml
from dbt_harvest.harvester.port.transpile import PortRefused, port_model
from dbt_harvest.harvester.port.yaml_sql import port_test_sql
from dbt_harvest.harvester.port.yaml_types import port_data_types
from dbt_harvest.harvester.sandbox import safe_fs

#: a model's config giving ``partition_by`` a mapping, BigQuery's form (``{"field": ..., "data_type": ...}``)
_MAPPED_PARTITION = re.compile(r"\bpartition_by\s*[=:]\s*\{")
PARTITION_MACRO_FILE = "_harvest_port_partition_by.sql"
#: dbt-duckdb ignores ``partition_by`` on a relation that is not DuckLake's (a harvester build never is), but
#: it first checks the value is column names, so BigQuery's mapping failed the build. The root project's
#: macro of the same name wins, and does what the adapter does for every relation a build makes.
PARTITION_MACRO = """{#- added by harvest's dialect port: partition_by is ignored outside DuckLake, whatever its form -#}
{% macro duckdb__get_partitioned_by(relation, temporary) -%}
  {{ return(none) }}
{%- endmacro %}
"""

#: a YAML file enforcing a contract
_ENFORCED = re.compile(r"\benforced:\s*true\b", re.IGNORECASE)
CONTRACT_MACRO_FILE = "_harvest_port_contracts.sql"
#: An enforced contract's types were written for the source warehouse, whose types DuckDB's do not match one
#: for one (BigQuery's one INT64 is DuckDB's INTEGER, BIGINT or HUGEINT by expression), so dbt's check that the
#: model's types are the contract's failed on ported SQL that is right. The check is left out; a table is
#: still created with the contract's (ported) types and the model's values are cast into them, and a column
#: the contract names that the model lacks still fails that insert.
CONTRACT_MACRO = """{#- added by harvest's dialect port: a contract's types are the source warehouse's -#}
{% macro duckdb__get_assert_columns_equivalent(sql) -%}
{%- endmacro %}
"""

#: a setting that builds models, seeds or snapshots in another database: ``+database:`` in dbt_project.yml,
#: ``database=`` in a model's config
_DATABASE_SETTING = re.compile(r"^\s*\+?database\s*:", re.MULTILINE)
_DATABASE_CONFIG = re.compile(r"\bconfig\s*\([^)]*\bdatabase\s*=", re.DOTALL)
_OWN_DATABASE_MACRO = re.compile(r"\{%-?\s*macro\s+generate_database_name\s*\(")
DATABASE_MACRO_FILE = "_harvest_port_database.sql"
#: A warehouse project spreads its relations over several databases (Snowflake's ``+database: analytics``);
#: a pin builds one DuckDB file, where another database is a catalog that does not exist ("Catalog ... does
#: not exist"). The root project's ``generate_database_name`` wins over dbt's and keeps every relation in the
#: target's database; schemas and names are the project's own, so relations stay distinct.
DATABASE_MACRO = """{#- added by harvest's dialect port: every relation is built in the one database a pin builds -#}
{% macro generate_database_name(custom_database_name=none, node=none) -%}
  {{ return(target.database) }}
{%- endmacro %}
"""


#: a macro (or generic test) block of a macro file: its head, name, body and end
_MACRO_BLOCK = re.compile(
    r"(?P<head>\{%-?\s*(?P<kind>macro|test|snapshot)\s+(?P<name>\w+)\s*(?:\(.*?\))?\s*-?%\})(?P<body>.*?)"
    r"(?P<end>\{%-?\s*end(?P=kind)\s*-?%\})",
    re.DOTALL,
)


#: a snapshot's ``target_database='...'`` argument, with the comma that joins it to the next or previous one
_TARGET_DATABASE = re.compile(r"(?P<lead>,\s*)?\btarget_database\s*=\s*(?P<q>['\"])[^'\"]*(?P=q)(?P<trail>\s*,)?")


def drop_target_database(text: str) -> str | None:
    """``text`` (a snapshot file) without its ``target_database`` arguments, or None when it has none. dbt
    uses a snapshot's target database as written, not through ``generate_database_name``, and a pin builds
    one DuckDB database, where another is a catalog that does not exist."""
    out = _TARGET_DATABASE.sub(lambda m: "," if m["lead"] and m["trail"] else "", text)
    return out if out != text else None


def port_macros(text: str, dialect: str) -> str | None:
    """``text`` (a macro or snapshot file of the project) with the SQL of each macro's, generic test's or
    snapshot's body ported from ``dialect``, or
    None when none changes. A body that is SQL, a statement or an expression (``datediff(day, {{ a }},
    {{ b }})``), is ported as a model is; one that does not read as SQL (Jinja logic, DDL sqlglot cannot
    port, a fragment) is left as written, for the build to decide, since a macro no model calls must not
    refuse the project."""
    out, last = [], 0
    for m in _MACRO_BLOCK.finditer(text):
        try:
            ported = port_model(m["body"], dialect, m["name"])
        except PortRefused:
            ported = None
        if ported is not None and ported != m["body"]:
            out += [text[last : m.start("body")], ported]
            last = m.end("body")
    return "".join([*out, text[last:]]) if out else None


def _declared_sources(root: Path, project: Project) -> set[str]:
    """The names of the sources the project's YAML declares (a file that is not plain YAML is skipped)."""
    names = set()
    for rel in project_files(root, project, project.model_paths, (".yml", ".yaml")):
        try:
            data = yaml.safe_load(safe_fs.read_text(root, rel))
        except yaml.YAMLError:
            continue
        for source in (data or {}).get("sources") or [] if isinstance(data, dict) else []:
            if isinstance(source, dict) and source.get("name"):
                names.add(str(source["name"]).lower())
    return names


def _other_databases(root: Path, project: Project) -> bool:
    """Whether the project builds relations in a database of its own naming (and leaves the choice to dbt's
    ``generate_database_name``, which the port may then override)."""
    base = PurePosixPath(project.rel_dir) if project.rel_dir not in ("", ".") else PurePosixPath()
    config = str(base / "dbt_project.yml")
    named = safe_fs.is_file(root, config) and bool(_DATABASE_SETTING.search(safe_fs.read_text(root, config)))
    named = named or any(_DATABASE_CONFIG.search(safe_fs.read_text(root, rel)) for rel in model_files(root, project))
    if not named:
        return False
    macros = project_files(root, project, project.macro_paths, (".sql",))
    return not any(_OWN_DATABASE_MACRO.search(safe_fs.read_text(root, rel)) for rel in macros)


@dataclass(frozen=True)
class Port:
    """The port of one project: the dialect it came from, the patch, and the model files it edits."""

    dialect: str
    patch: str
    files: tuple[str, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.patch.encode()).hexdigest() if self.patch else ""


def model_files(root: Path, project: Project) -> list[str]:
    """Repository-relative paths of the project's own SQL model files (vendored packages left out), sorted."""
    return project_files(root, project, project.model_paths, (".sql",))


def port_tree(root: Path, project: Project, dialect: str) -> Port:
    """The port of the project at ``root`` from ``dialect`` (PortRefused names the first model that cannot be):
    its SQL models, then the ``data_type`` values of the YAML under its model paths."""
    patches, files = [], []
    texts = {rel: safe_fs.read_text(root, rel) for rel in model_files(root, project)}
    named = set().union(*(read_tables(text, dialect) for text in texts.values())) if texts else set()
    names = source_names(named, _declared_sources(root, project))
    for rel, text in texts.items():
        sourced = as_sources(text, named, names) or text
        whole = port_model(sourced, dialect, rel) or sourced
        if whole != text:
            patches.append(make_patch(rel, text, whole))
            files.append(rel)
    snapshots = set(project_files(root, project, project.snapshot_paths, (".sql",)))
    for rel in project_files(root, project, (*project.macro_paths, *project.snapshot_paths), (".sql",)):
        text = safe_fs.read_text(root, rel)
        ported = port_macros(text, dialect)
        if rel in snapshots:
            ported = drop_target_database(ported or text) or ported
        else:
            ported = drop_permission_macros(ported or text) or ported
        if ported is not None:
            patches.append(make_patch(rel, text, ported))
            files.append(rel)
    contracts = False
    for rel in project_files(root, project, (*project.model_paths, *project.snapshot_paths), (".yml", ".yaml")):
        text = safe_fs.read_text(root, rel)
        contracts = contracts or bool(_ENFORCED.search(text))
        typed = port_data_types(text, dialect)
        ported = port_test_sql(typed or text, dialect) or typed
        ported = drop_permissions(ported or text) or ported
        if ported is not None:
            patches.append(make_patch(rel, text, ported))
            files.append(rel)
    base = PurePosixPath(project.rel_dir) if project.rel_dir not in ("", ".") else PurePosixPath()
    config = str(base / "dbt_project.yml")
    if safe_fs.is_file(root, config):
        text = safe_fs.read_text(root, config)
        hooks = drop_permissions(text)
        if hooks is not None:
            patches.append(make_patch(config, text, hooks))
            files.append(config)
    if names:
        rel = str(base / project.model_paths[0] / SOURCES_FILE)
        patches.append(make_patch(rel, None, sources_yaml(names)))
        files.append(rel)
    partitions = any(_MAPPED_PARTITION.search(safe_fs.read_text(root, rel)) for rel in model_files(root, project))
    added = {
        PARTITION_MACRO_FILE: PARTITION_MACRO,
        CONTRACT_MACRO_FILE: CONTRACT_MACRO,
        DATABASE_MACRO_FILE: DATABASE_MACRO,
    }
    for name, needed in (
        (PARTITION_MACRO_FILE, partitions),
        (CONTRACT_MACRO_FILE, contracts),
        (DATABASE_MACRO_FILE, _other_databases(root, project)),
    ):
        if needed:
            rel = str(base / project.macro_paths[0] / name)
            patches.append(make_patch(rel, None, added[name]))
            files.append(rel)
    return Port(dialect, "".join(patches), tuple(files))


__all__ = ["Port", "model_files", "port_tree"]

"""A model's contract: what its project documents about it, and the completion task's statement.

A completion task removes one model's SQL file and asks for it back from what the project says the model
must hold (Spider 2.0-DBT's "complete the project" shape). What the project says lives in its schema YAML,
which dbt has parsed into the manifest: the model's description, its columns with their descriptions and
data tests, its model-level tests, its materialization and the models, seeds and sources it reads. This
module reads that (pure functions over the manifest dict) and writes the instruction in the project's
own words, never the SQL.

A model is a candidate only when its documentation can state what it must hold: a description, and at
least one column whose description says more than the column's name. A model that reads no other model
(a staging model over a source, depth 0) is left to repairs: the issue's task is a mart-level model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dbt_harvest.core.closing import COMPLETION_TESTED, COMPLETION_UNTESTED
from dbt_harvest.core.statement_facts import TableFacts
from dbt_harvest.core.statement_facts import render as render_facts
from dbt_harvest.core.statement_facts import templates as fact_templates
from dbt_harvest.harvester.mint.lineage import ModelNode, depth

_WORDS = re.compile(r"[a-z0-9]+")
#: a column the model generates (a surrogate key, a hash): graded only when its recipe is documented
_GENERATED_NAME = re.compile(r"(^|_)(sk|surrogate_key|hash|hashed|md5|uuid|row_key|dbt_scd_id)($|_)", re.I)
_GENERATED_SQL = ("generate_surrogate_key", "surrogate_key(", "md5(", "sha256(", "hash(", "uuid(", "gen_random_uuid")
_RECIPE_WORDS = ("hash", "md5", "concatenat", "combination of", "generated from", "built from")


@dataclass(frozen=True)
class ColumnContract:
    name: str
    description: str
    tests: tuple[str, ...] = ()  # "unique", "not_null", "accepted_values: a, b", "relationships: to customers.id"


@dataclass(frozen=True)
class Contract:
    """What a project documents about one model."""

    model: str  # unique id
    name: str
    file: str  # repo-relative path of the model's SQL file (the file a completion removes)
    description: str
    materialized: str
    columns: tuple[ColumnContract, ...]
    model_tests: tuple[str, ...]
    reads: tuple[str, ...]  # "model stg_orders", "seed raw_rates", "source shop.orders"
    depth: int

    @property
    def described_columns(self) -> tuple[ColumnContract, ...]:
        """Columns whose description says more than the column's own name."""
        return tuple(c for c in self.columns if _says_more(c.name, c.description))


def _says_more(name: str, description: str) -> bool:
    words = set(_WORDS.findall(description.lower())) - set(_WORDS.findall(name.lower().replace("_", " ")))
    return bool(words - {"the", "a", "an", "of", "for", "this", "is", "column", "field", "value", "id"})


def _test_words(node: dict[str, Any]) -> str:
    meta = node.get("test_metadata") or {}
    name = str(meta.get("name") or "")
    kwargs = meta.get("kwargs") or {}
    namespace = str(meta.get("namespace") or "")
    label = f"{namespace}.{name}" if namespace and namespace != "dbt" else name
    if not name:  # a singular test: its file name is all it documents
        return str(node.get("name") or "")
    if name == "accepted_values" and isinstance(kwargs.get("values"), list):
        return f"accepted_values: {', '.join(map(str, kwargs['values']))}"
    if name == "relationships":
        to = str(kwargs.get("to") or "")
        found = re.search(r"ref\(\s*['\"]([^'\"]+)['\"]", to) or re.search(r"source\(([^)]*)\)", to)
        target = found.group(1).replace("'", "").replace('"', "").replace(" ", "") if found else to
        return f"relationships: to {target}.{kwargs.get('field', '')}"
    if name in ("unique_combination_of_columns", "unique_combination"):
        cols = kwargs.get("combination_of_columns") or kwargs.get("columns") or []
        return f"{label}: {', '.join(map(str, cols))}"
    if name in ("expression_is_true",):
        return f"{label}: {kwargs.get('expression', '')}".strip()
    return label


def contract_of(
    manifest: dict[str, Any],
    nodes: dict[str, ModelNode],
    uid: str,
    file: str,
    known_failures: frozenset[str] = frozenset(),
) -> Contract:
    """The contract of model ``uid`` (its repo-relative ``file``) as the manifest records it; a test in
    ``known_failures`` (it fails on the original project, ``core.pin.BaselineTest``) is no part of it."""
    node = nodes[uid]
    raw_nodes = manifest.get("nodes") or {}
    column_tests: dict[str, list[str]] = {}
    model_tests: list[str] = []
    for test in sorted(raw_nodes.values(), key=lambda n: str(n.get("unique_id", ""))):
        if test.get("resource_type") != "test" or str(test.get("unique_id", "")) in known_failures:
            continue
        attached = test.get("attached_node") or ""
        parents = (test.get("depends_on") or {}).get("nodes") or []
        if attached != uid and not (not attached and parents == [uid]):
            continue
        column = test.get("column_name")
        words = _test_words(test)
        if column:
            column_tests.setdefault(str(column).lower(), []).append(words)
        else:
            model_tests.append(words)
    columns = tuple(
        ColumnContract(name, " ".join(desc.split()), tuple(column_tests.get(name.lower(), ())))
        for name, desc in node.columns.items()
    )
    reads: list[str] = []
    sources = manifest.get("sources") or {}
    for parent in node.parents:
        if parent in nodes:
            reads.append(f"model {nodes[parent].name}")
        elif parent.startswith("seed."):
            reads.append(f"seed {(raw_nodes.get(parent) or {}).get('name') or parent.rsplit('.', 1)[-1]}")
        elif parent.startswith("source."):
            src = sources.get(parent) or {}
            reads.append(f"source {src.get('source_name', '?')}.{src.get('name', parent.rsplit('.', 1)[-1])}")
        elif parent.startswith("snapshot."):
            reads.append(f"snapshot {parent.rsplit('.', 1)[-1]}")
    return Contract(
        model=uid,
        name=node.name,
        file=file,
        description=" ".join(node.description.split()),
        materialized=node.materialized,
        columns=columns,
        model_tests=tuple(model_tests),
        reads=tuple(dict.fromkeys(reads)),
        depth=depth(nodes, uid),
    )


def why_not_completable(contract: Contract) -> str:
    """'' when the contract can state what the model must hold, else why not (a rejection reason)."""
    if not contract.description.strip():
        return "undocumented"
    if not contract.described_columns:
        return "columns_undescribed"
    if contract.depth < 1:
        return "reads_no_model"
    return ""


def graded_columns(
    contract: Contract, table_columns: tuple[str, ...], stable: frozenset[int], raw_sql: str
) -> tuple[int, ...]:
    """Positions (in the built table) of the columns the contract names and a completion is graded on.

    Only documented columns count (a column the contract does not name cannot be asked for), only stable
    ones (never a nondeterministic column), and an id the model generates (a surrogate key or hash: by its
    name or by a hashing call in the model) only when its description says how it is made."""
    lowered = raw_sql.lower()
    generates = any(call in lowered for call in _GENERATED_SQL)
    by_name = {c.name.lower(): c for c in contract.columns}
    picked: list[int] = []
    for i, name in enumerate(table_columns):
        column = by_name.get(name.lower())
        if column is None or i not in stable:
            continue
        generated = bool(_GENERATED_NAME.search(name)) or (generates and name.lower().endswith(("_key", "_sk")))
        if generated and not any(word in column.description.lower() for word in _RECIPE_WORDS):
            continue
        picked.append(i)
    return tuple(picked)


#: The statement's fixed sentences (public, like the repair template's: the contamination lint discounts them).
OPENING = (
    "The dbt model `{name}` is missing from this project: the file `{file}` that defines it has been "
    "removed, but the project still documents it. Write `{file}` so that `dbt build` succeeds and the "
    "`{name}` table holds exactly what its documentation below says."
)
MATERIALIZED = "It is materialized as a {materialized}."
READS = "It may read: {reads}."


def _section(contract: Contract, heading: str) -> list[str]:
    lines = [heading, contract.description, "", "Columns:"]
    for column in contract.columns:
        text = f"- `{column.name}`"
        if column.description:
            text += f": {column.description}"
        if column.tests:
            text += f" (tests: {'; '.join(column.tests)})"
        lines.append(text)
    if contract.model_tests:
        lines += ["", "Model tests: " + "; ".join(contract.model_tests)]
    lines += ["", MATERIALIZED.format(materialized=contract.materialized)]
    if contract.reads:
        lines.append(
            READS.format(reads=", ".join(f"`{r.split(' ', 1)[1]}` ({r.split(' ', 1)[0]})" for r in contract.reads))
        )
    return lines


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


#: every fixed sentence of a completion statement (the contamination lint discounts them, as the repair template's)
def templates() -> tuple[str, ...]:
    return (
        OPENING,
        OPENING_MANY,
        MATERIALIZED,
        READS,
        COMPLETION_TESTED,
        COMPLETION_UNTESTED,
        "What the project says about {name}:",
        "Model tests: {tests}",
        *fact_templates(),
    )


#: the opening of a task that removes several models (a model and parents of it): "create these tables"
OPENING_MANY = (
    "The dbt models {names} are missing from this project: the files {files} that define them have "
    "been removed, but the project still documents them. Write each file so that `dbt build` succeeds "
    "and each table holds exactly what its documentation below says."
)


def completion_statement(
    contract: Contract, *more: Contract, tested: bool = True, facts: Sequence[TableFacts] = ()
) -> str:
    """The instruction of a completion task, from the project's own documentation of the model (and of the
    other models removed with it, ``more``: parents it reads, in the order they are written); ``tested``:
    whether a dbt test covers the removed models or their descendants (else the closing names no test).

    ``facts``: what the expected tables hold (``core.statement_facts``), stated after each model's
    documentation; without them the statement is the documentation alone (Spider 2.0-DBT's shape)."""
    closing = COMPLETION_TESTED if tested else COMPLETION_UNTESTED
    by_model = {f.model: f for f in facts}

    def stated(each: Contract) -> list[str]:
        found = by_model.get(each.name)
        return ["", render_facts(found)] if found is not None else []

    if not more:
        lines = [
            OPENING.format(name=contract.name, file=contract.file),
            "",
            *_section(contract, f"What the project says about `{contract.name}`:"),
            *stated(contract),
        ]
        lines += ["", closing.format(name=contract.name)]
        return "\n".join(lines) + "\n"
    every = (contract, *more)
    lines = [
        OPENING_MANY.format(names=_and([f"`{c.name}`" for c in every]), files=_and([f"`{c.file}`" for c in every]))
    ]
    for each in every:
        lines += ["", *_section(each, f"What the project says about `{each.name}` (`{each.file}`):"), *stated(each)]
    lines += ["", closing.format(name="`, `".join(c.name for c in every))]
    return "\n".join(lines) + "\n"


__all__ = [
    "ColumnContract",
    "Contract",
    "MATERIALIZED",
    "OPENING",
    "OPENING_MANY",
    "READS",
    "completion_statement",
    "contract_of",
    "graded_columns",
    "why_not_completable",
]

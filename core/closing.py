"""The last sentence of a problem statement: what it tells an agent about the project's dbt tests.

A statement may only mention dbt tests that exist: the tests over the broken model and its descendants
(``LocalChecks``), the ones an agent's own ``dbt build`` runs against the bug. A task with none (in the
corpus, 44 of 285 train/dev repairs and 29 of 385 completions) gets a closing that names no test. The mint
writes the closing from the task's local checks (``repair_closing``, ``completion_closing``), and every record
is read with the closing it would be minted with today (``restated``): records minted before the closing
depended on the local checks said "you may run its dbt tests" (a repair) or "the dbt tests must keep passing"
(a completion) also when no test covers the bug. Restating changes only that sentence, so the task lock still
recognises such a record (``corpora.tasklock``: the earlier closing put back hashes as locked) and a sealed
record needs no re-mint.

Kept in ``core`` because both the mint (which writes statements) and the record reader (which restates
them) use it; the rest of the statement templates live with the mint (``harvester/mint/statement.py``,
``harvester/mint/contract.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dbt_harvest.core.task_record import LocalChecks, TaskRecord

#: A repair's closing when dbt tests cover the broken lineage (what every repair said before).
REPAIR_TESTED = (
    "The project builds and you may run its dbt tests. Find the cause in the project's models and fix "
    "it so that the outputs follow the business rules the project documents."
)
#: A repair's closing when no dbt test covers the broken lineage.
REPAIR_UNTESTED = (
    "The project builds. Find the cause in the project's models and fix it so that the outputs follow "
    "the business rules the project documents."
)
#: A completion's closing (``{name}``: the model, or the models joined by "`, `") when tests cover its lineage.
COMPLETION_TESTED = (
    "Use only what this project provides; other models that read `{name}` and the dbt tests must keep passing."
)
#: A completion's closing when no dbt test covers the models it removes or their descendants.
COMPLETION_UNTESTED = "Use only what this project provides; other models that read `{name}` must keep building."

#: every closing sentence (public: the contamination lint discounts them like the rest of the templates)
CLOSINGS = (REPAIR_TESTED, REPAIR_UNTESTED, COMPLETION_TESTED, COMPLETION_UNTESTED)


def tested(checks: LocalChecks) -> bool:
    """Whether a dbt test covers the broken lineage: one ran in the broken build, or one is over it."""
    return checks.tests_total > 0 or bool(checks.covering_tests)


def repair_closing(checks: LocalChecks) -> str:
    return REPAIR_TESTED if tested(checks) else REPAIR_UNTESTED


def completion_closing(checks: LocalChecks, name: str) -> str:
    return (COMPLETION_TESTED if tested(checks) else COMPLETION_UNTESTED).format(name=name)


def _suffix(template: str) -> tuple[str, str]:
    head, tail = template.split("{name}")
    return "\n\n" + head, tail + "\n"


def _swapped(record: TaskRecord, repair: tuple[str, str], completion: tuple[str, str]) -> TaskRecord:
    """``record`` with its closing ``repair[0]`` (or ``completion[0]``) replaced by the second; unchanged when
    a test covers the task or its statement does not end with that closing."""
    if tested(record.local_checks):
        return record
    text = record.problem_statement
    if record.kind == "repair":
        old, new = repair
        return replace(record, problem_statement=text[: -len(old)] + new) if text.endswith(" " + old) else record
    (head, tail), (new_head, new_tail) = _suffix(completion[0]), _suffix(completion[1])
    start = text.rfind(head)
    if start < 0 or not text.endswith(tail) or start + len(head) > len(text) - len(tail):
        return record
    name = text[start + len(head) : len(text) - len(tail)]
    return replace(record, problem_statement=text[:start] + new_head + name + new_tail)


def restated(record: TaskRecord) -> TaskRecord:
    """``record`` with the closing its local checks call for, when it carries the earlier one for a task no
    test covers (module docstring); any other record (a writer's statement included) is returned as it is."""
    return _swapped(record, (REPAIR_TESTED, REPAIR_UNTESTED), (COMPLETION_TESTED, COMPLETION_UNTESTED))


def as_first_written(record: TaskRecord) -> TaskRecord:
    """The inverse of :func:`restated`: a record no test covers with the closing every mint wrote before the
    closing depended on the local checks (what the task lock may still hash)."""
    return _swapped(record, (REPAIR_UNTESTED, REPAIR_TESTED), (COMPLETION_UNTESTED, COMPLETION_TESTED))


__all__ = [
    "CLOSINGS",
    "COMPLETION_TESTED",
    "COMPLETION_UNTESTED",
    "REPAIR_TESTED",
    "REPAIR_UNTESTED",
    "as_first_written",
    "completion_closing",
    "repair_closing",
    "restated",
    "tested",
]

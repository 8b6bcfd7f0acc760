"""The project's dbt data tests, re-run in the screening engine: a prediction of the local checks.

A task's local checks are the dbt tests that ``dbt build --select <model>+`` runs. Confirmation runs
them for real; screening predicts them here so that a candidate whose every wrong repair would fail
those tests (or pass the official check) is rejected without a single dbt build. The prediction
re-runs each test's compiled SQL (from the pin's manifest) the way dbt's test materialization wraps
it: ``fail_calc`` over the failing rows, ``limit`` applied, ``error_if`` decides, and only tests of
severity ``error`` count, as in the build. A test is selected when any of its parent models is in
the re-run chain (dbt's eager indirect selection). Unit tests cannot be re-run this way; where one
touches the chain the prediction is ``None`` (unknown) and confirmation decides alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dbt_harvest.harvester.mint.engine import Engine, ScreenSQLError


@dataclass(frozen=True)
class DataTest:
    """One dbt data test of the pin, compiled."""

    unique_id: str
    sql: str
    parents: frozenset[str]  # unique ids of the models (and other nodes) it reads
    fail_calc: str
    error_if: str
    limit: int | None
    counts: bool  # severity error: a failure fails the build's local checks


@dataclass(frozen=True)
class Suite:
    """The data tests of a pin, and the models that unit tests read (which we cannot re-run)."""

    tests: tuple[DataTest, ...]
    unit_tested: frozenset[str]
    unit_tests: tuple[tuple[str, frozenset[str]], ...] = ()  # (unique id, models it reads)

    def selected(self, chain: Iterable[str]) -> tuple[DataTest, ...] | None:
        """The tests ``--select`` of ``chain`` runs; None when a unit test or an uncompiled test is among them."""
        ids = set(chain)
        if ids & self.unit_tested:
            return None
        chosen = tuple(t for t in self.tests if t.parents & ids)
        if any(not t.sql for t in chosen):
            return None
        return chosen

    def covering(self, chain: Iterable[str]) -> tuple[str, ...]:
        """The tests that can fail a ``dbt build`` of ``chain``: data tests of severity error over any of
        its models, and unit tests of them (unique ids, sorted)."""
        ids = set(chain)
        found = {t.unique_id for t in self.tests if t.counts and t.parents & ids}
        found.update(uid for uid, parents in self.unit_tests if parents & ids)
        return tuple(sorted(found))


def suite(manifest: dict[str, Any], known_failures: frozenset[str] = frozenset()) -> Suite:
    """Every data test in the manifest dbt wrote for the pin's build but the ``known_failures`` (unique ids of
    the tests that fail on the original project: no build of the pin runs them, ``core.pin.BaselineTest``)."""
    tests = []
    for uid, node in sorted(manifest.get("nodes", {}).items()):
        if node.get("resource_type") != "test" or uid in known_failures:
            continue
        config = node.get("config") or {}
        limit = config.get("limit")
        tests.append(
            DataTest(
                unique_id=uid,
                sql=str(node.get("compiled_code") or ""),
                parents=frozenset((node.get("depends_on") or {}).get("nodes", ())),
                fail_calc=str(config.get("fail_calc") or "count(*)"),
                error_if=str(config.get("error_if") or "!= 0"),
                limit=int(limit) if isinstance(limit, int) else None,
                counts=str(config.get("severity") or "error").lower() == "error",
            )
        )
    unit_tested: set[str] = set()
    unit_tests: list[tuple[str, frozenset[str]]] = []
    for uid, node in sorted((manifest.get("unit_tests") or {}).items()):
        if uid in known_failures:
            continue
        parents = frozenset((node.get("depends_on") or {}).get("nodes", ()))
        unit_tested.update(parents)
        unit_tests.append((str(uid), parents))
    return Suite(tuple(tests), frozenset(unit_tested), tuple(unit_tests))


def failing(engine: Engine, tests: tuple[DataTest, ...], rewrite: Callable[[str], str]) -> frozenset[str]:
    """The tests that would fail, with every relation of the re-run chain rewritten to its re-run table.

    A test whose SQL errors counts as failing, as dbt reports it ("error").
    """
    failed = set()
    for test in tests:
        limit = f"limit {test.limit}" if test.limit is not None else ""
        # newlines as in dbt's own wrapper: the compiled SQL may end in a line comment
        sql = (
            f"select ({test.fail_calc}) {test.error_if} as should_error\n"
            f"from (\n{rewrite(test.sql)}\n{limit}\n) dbt_internal_test"
        )
        try:
            row = engine.query_one(sql)
        except ScreenSQLError:
            if test.counts:
                failed.add(test.unique_id)
            continue
        if test.counts and row is not None and bool(row[0]):
            failed.add(test.unique_id)
    return frozenset(failed)


__all__ = ["DataTest", "Suite", "failing", "suite"]

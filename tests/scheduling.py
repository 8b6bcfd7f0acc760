"""Longest modules first: the order the two xdist workers take test modules in.

The suite's wall time on two workers is set by its tail. pytest-xdist's ``loadscope`` hands out whole
modules, by default the ones with the most tests first, so a module of one long test (the e2e chain:
minutes of real builds) started last and ran alone while the other worker sat idle. Ordering modules by
their measured time, longest first, is the classic longest-processing-time schedule: the long chains
start at once and the many short modules fill in around them.

The measured times live in ``tests/durations.json`` (module -> seconds of setup + call + teardown),
refreshed by ``python -m pytest -n 2 --dist loadscope --tier all --store-durations`` (a run of fewer modules
updates theirs and keeps the rest). A module it does not know yet
(a new one) is placed at the median; a stale entry only costs balance, never a test. The order inside a
module is kept, so module- and class-scoped fixtures behave exactly as before.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")


def module_of(nodeid: str) -> str:
    """The module part of a node id: ``tests/a/test_b.py::test_c[x]`` -> ``tests/a/test_b.py``."""
    return nodeid.split("::", 1)[0]


def longest_first(nodeids: Sequence[str], seconds: Mapping[str, float]) -> list[int]:
    """Indexes of ``nodeids`` with their modules ordered by ``seconds`` (longest first, unknown modules at
    the median, ties in collection order) and each module's own order kept."""
    median = statistics.median(seconds.values()) if seconds else 0.0
    first_seen: dict[str, int] = {}
    for index, nodeid in enumerate(nodeids):
        first_seen.setdefault(module_of(nodeid), index)
    rank = {module: (-seconds.get(module, median), seen) for module, seen in first_seen.items()}
    return sorted(range(len(nodeids)), key=lambda i: (rank[module_of(nodeids[i])], i))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-durations",
        action="store_true",
        default=False,
        help=f"Write each module's measured seconds to {DURATIONS.name} (the longest-first order).",
    )


def pytest_configure(config: pytest.Config) -> None:
    # loadscope's own reorder (most tests first) would undo the longest-first collection order
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if config.getoption("--store-durations"):
        config.pluginmanager.register(_Recorder(), "harvest-durations-recorder")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        seconds = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return
    order = longest_first([item.nodeid for item in items], seconds)
    items[:] = [items[i] for i in order]


class _Recorder:
    """Sums each module's report durations (on the controller under xdist) and writes them at the end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):  # a worker: the controller records
            return
        try:  # a run of some modules (one tier, one folder) keeps the times of the others
            known = {m: float(s) for m, s in json.loads(DURATIONS.read_text()).items()}
        except (FileNotFoundError, ValueError):
            known = {}
        known.update((m, round(s, 1)) for m, s in self.seconds.items())
        ranked = dict(sorted(known.items(), key=lambda kv: (-kv[1], kv[0])))
        DURATIONS.write_text(json.dumps(ranked, indent=1) + "\n")

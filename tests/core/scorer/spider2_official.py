"""Running Spider 2.0-DBT's own ``evaluate.py`` as a script, for differential tests (never imported by the product).

The official code is not part of this repository: set ``SPIDER2_DIR`` to a local copy of the Spider2
repository (its root, its ``spider2-dbt`` folder, or ``spider2-dbt/evaluation_suite``). Tests that need
it are skipped, with the reason, when it is absent or cannot import its dependencies (pandas, duckdb,
tqdm and google-cloud-bigquery, which ``eval_utils.py`` imports at the top).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ENV = "SPIDER2_DIR"
_SUITE = ("spider2-dbt/evaluation_suite", "evaluation_suite", ".")
_IMPORTS = "import pandas, duckdb, tqdm, regex; from google.cloud import bigquery"


@lru_cache(maxsize=1)
def locate() -> tuple[Path | None, str]:
    """The official evaluation_suite folder, or None and why it cannot be used."""
    root = os.environ.get(ENV, "")
    if not root:
        return None, f"{ENV} is not set (point it at a local copy of xlang-ai/Spider2 to run the official evaluate.py)"
    for sub in _SUITE:
        suite = Path(root) / sub
        if (suite / "evaluate.py").is_file() and (suite / "eval_utils.py").is_file():
            break
    else:
        return None, f"{ENV}={root} holds no spider2-dbt/evaluation_suite/evaluate.py"
    probe = subprocess.run([sys.executable, "-c", _IMPORTS], capture_output=True, text=True, cwd=suite)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return (
            None,
            f"the official evaluate.py cannot import its dependencies here ({last}); pip install google-cloud-bigquery regex tqdm",
        )
    return suite, ""


@dataclass(frozen=True)
class OfficialRun:
    """What one run of evaluate.py printed: its last line and the instances it passed, or that it crashed."""

    returncode: int
    last_line: str  # "<k/M> <k> <M>", "" when it crashed
    passed: frozenset[str]
    submitted: int | None
    error: str  # the last line of its traceback, "" when it finished

    @property
    def crashed(self) -> bool:
        return self.returncode != 0


def run_official(results: Path, gold: Path, timeout: float = 600) -> OfficialRun:
    """Run ``python evaluate.py --result_dir RESULTS --gold_dir GOLD`` in the official suite folder."""
    suite, why = locate()
    if suite is None:
        raise RuntimeError(why)
    proc = subprocess.run(
        [sys.executable, "evaluate.py", "--result_dir", str(results), "--gold_dir", str(gold)],
        cwd=suite,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )
    out = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0:
        err = [line for line in proc.stderr.splitlines() if line.strip() and "it/s]" not in line]
        return OfficialRun(proc.returncode, "", frozenset(), None, err[-1] if err else "")
    last = out[-1]
    _, k, m = last.split()
    passed = frozenset(out[len(out) - 1 - int(k) : len(out) - 1]) if int(k) else frozenset()
    return OfficialRun(0, last, passed, int(m), "")

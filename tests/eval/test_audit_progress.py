"""`harvest audit` says how far it is: piped, its stderr lines carry the tasks done of the total and the running
pass count (``audit: 3/5 tasks, 2 passed``), the verdicts a resumed run folder already holds counted at once,
and with ``--json`` stdout stays one JSON object. The episodes are faked here (no builds); the real ones, and
a real resume, are in tests/eval/test_audit.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.eval.audit import report as report_module
from dbt_harvest.eval.audit import runner as runner_module
from dbt_harvest.eval.audit import session

KEPT = [{"instance_id": "t1", "rung": 6, "official": 1}, {"instance_id": "t2", "rung": 5, "official": 0}]
PLAYED = [
    {"instance_id": "t3", "rung": 6, "official": 1},
    {"instance_id": "t4", "rung": 2, "official": 0},
    {"instance_id": "t5", "rung": 6, "official": 1},
]
REPORT = {
    "n": 5,
    "split": "dev",
    "kinds": [],
    "driver": {"name": "noop"},
    "official": 3,
    "strict": 3,
    "missing": [],
    "crashed": [],
    "ladder": {"6": 3},
    "ladder_labels": {"6": "official pass"},
    "episodes": [],
}


class _Task:
    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id


@pytest.fixture
def faked_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    """`harvest audit` over five tasks: two verdicts kept from an earlier run (one passed), three played."""

    def run_audit(run: Any, split: str, tasks: Any, agent: Any, options: Any, **kw: Any) -> list[Any]:
        kw["kept"](KEPT)
        for verdict in PLAYED:
            kw["progress"](verdict)
        return []

    def run_split(request: session.AuditRequest, **kw: Any) -> dict[str, Any]:
        tasks = [_Task(f"t{i}") for i in range(1, 6)]
        return session._play(None, request, request.split, tasks, None, None, Path("pins"), None, **kw)

    monkeypatch.setattr(runner_module, "run_audit", run_audit)
    monkeypatch.setattr(report_module, "write_report", lambda run: dict(REPORT))
    monkeypatch.setattr(session, "run_split", run_split)


def _audit(run_dir: Path, *extra: str) -> Any:
    return CliRunner().invoke(
        main,
        ["audit", "--split", "dev", "--driver", "noop", "--run-dir", str(run_dir), *extra],
        env={"HARVEST_PROGRESS_INTERVAL": "0"},
    )


def _counts(stderr: str) -> list[str]:
    return [line.split(" (")[0] for line in stderr.splitlines() if line.startswith("audit: ")]


def test_piped_lines_carry_tasks_done_of_total_and_the_pass_count(faked_audit: None, tmp_path: Path) -> None:
    result = _audit(tmp_path / "run", "--json")
    assert result.exit_code == 0, result.output
    assert _counts(result.stderr) == [
        "audit: 2/5 tasks, 1 passed",  # the resumed folder's verdicts, at once
        "audit: 3/5 tasks, 2 passed",
        "audit: 4/5 tasks, 2 passed",
        "audit: 5/5 tasks, 3 passed",
    ], result.stderr
    assert len(result.stdout.strip().splitlines()) == 1, result.stdout  # --json: one JSON object, nothing else
    summary = json.loads(result.stdout)
    assert (summary["official"], summary["n"], summary["run_dir"]) == (3, 5, str(tmp_path / "run"))
    assert "episodes" not in summary


def test_human_output_adds_a_line_per_played_verdict_on_stderr(faked_audit: None, tmp_path: Path) -> None:
    result = _audit(tmp_path / "run")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("t")]
    assert notes == ["t3: rung 6 official 1", "t4: rung 2 official 0", "t5: rung 6 official 1"], result.stderr
    assert _counts(result.stderr)[-1] == "audit: 5/5 tasks, 3 passed"
    assert "audit: " not in result.stdout and "official 3/5" in result.stdout

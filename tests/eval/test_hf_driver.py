"""The hf driver with a tiny Qwen2-architecture model built from a config (train/tiny.py): it cannot
solve anything, so its episode must end on rung 1 (loop) or 2 (no submission) — and be classified so."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt_harvest.eval.audit.rundir import RunDir
from dbt_harvest.eval.audit.runner import AuditOptions, run_audit
from dbt_harvest.eval.drivers import make_driver
from dbt_harvest.eval.drivers.hf import parse_tool_calls
from dbt_harvest.eval.env.episode import EpisodeLimits
from dbt_harvest.eval.ladder import LOOPS, NO_SUBMISSION

pytestmark = pytest.mark.slow


def test_parse_tool_calls_reads_the_hermes_form() -> None:
    prose, calls = parse_tool_calls(
        'ok <tool_call>\n{"name": "read_file", "arguments": {"path": "a.sql"}}\n</tool_call><|im_end|>'
    )
    assert prose == "ok" and calls[0].name == "read_file" and calls[0].arguments == {"path": "a.sql"}
    assert parse_tool_calls("<tool_call>{oops</tool_call>")[1][0].name == "<unparseable tool call>"


def test_tiny_model_reaches_rung_1_or_2(dev_world, tmp_path: Path) -> None:
    from dbt_harvest.train.tiny import TinySpec, build_tiny

    # a long position table: the tool schemas alone are a few thousand tokens of the tiny tokenizer
    model_dir = build_tiny(tmp_path / "tiny", TinySpec(max_position_embeddings=16384))
    driver = make_driver("hf", model=str(model_dir), max_new_tokens=24)
    run = RunDir(tmp_path / "hf")
    task = dev_world.tasks[0]
    with dev_world.env():
        run_audit(
            run, "dev", [task], driver, AuditOptions(workers=2, limits=EpisodeLimits(max_turns=4)), pins=dev_world.pins
        )
    verdict = run.read_episode(task.instance_id)
    assert verdict["status"] != "crashed", verdict
    assert verdict["rung"] in (LOOPS, NO_SUBMISSION), verdict
    assert verdict["official"] == 0
    messages = [e for e in run.read_transcript(task.instance_id) if e["kind"] == "message"]
    assert messages and all(m["role"] == "assistant" for m in messages)
    assert RunDir(tmp_path / "hf").read_run()["driver"]["decoding"] == "greedy"

"""The adapter of a 2-step SFT run (tiny model) is loaded by the eval ``hf`` driver and plays an episode.

The tiny model cannot solve anything, so the episode must end on rung 1 (loop) or 2 (no submission) and
be classified so; the point is that training's output is evaluation's input, unchanged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from train_world import tiny_raw

from dbt_harvest.train.configs import config_from_dict
from dbt_harvest.train.sft import run_sft


def test_sft_adapter_runs_an_episode_through_the_hf_driver(env_world, world, tmp_path: Path) -> None:
    from peft import PeftModel

    from dbt_harvest.eval.audit.rundir import RunDir
    from dbt_harvest.eval.audit.runner import AuditOptions, run_audit
    from dbt_harvest.eval.drivers import make_driver
    from dbt_harvest.eval.env.episode import EpisodeLimits
    from dbt_harvest.eval.ladder import LOOPS, NO_SUBMISSION
    from dbt_harvest.train.tiny import TinySpec, build_tiny

    # a local base with a long position table (the tool schemas alone are thousands of tiny-tokenizer tokens)
    base = build_tiny(tmp_path / "base", TinySpec(max_position_embeddings=16384))
    raw = tiny_raw("sft-tiny.toml", world, tmp_path / "runs", run={"name": "sft-for-eval"}, model={"base": str(base)})
    result = run_sft(config_from_dict(raw, where="sft-for-eval"))
    assert result.manifest["metrics"]["global_step"] == 2

    driver = make_driver("hf", model=str(base), adapter=str(result.adapter_dir), max_new_tokens=16)
    task = dataclasses.replace(env_world.tasks[0], split="dev")
    run = RunDir(tmp_path / "audit")
    with env_world.env():
        run_audit(
            run, "dev", [task], driver, AuditOptions(workers=1, limits=EpisodeLimits(max_turns=3)), pins=env_world.pins
        )
    assert isinstance(driver._chat.model, PeftModel)  # the adapter was applied, not just named
    assert run.read_run()["driver"]["adapter"] == str(result.adapter_dir)
    verdict = run.read_episode(task.instance_id)
    assert verdict["status"] != "crashed", verdict
    assert verdict["rung"] in (LOOPS, NO_SUBMISSION), verdict
    assert verdict["official"] == 0
    messages = [e for e in run.read_transcript(task.instance_id) if e["kind"] == "message"]
    assert messages, "the adapted model generated no turn (did the prompt overflow the context?)"

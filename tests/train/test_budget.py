"""The token budget of SFT rows: measured with the run's tokenizer before training, cut rows named, and a run
with no row left is one line (it used to end in trl's bare ``num_samples=0`` traceback)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from train_world import World, other_split, tiny_raw, write_config

from dbt_harvest.train.budget import cut, fit, measure, percentiles
from dbt_harvest.train.errors import TrainDataError
from dbt_harvest.train.project import GitProjectSource
from dbt_harvest.train.sft_data import agentic_rows, single_turn_rows


@pytest.fixture(scope="module")
def tokenizer():
    from dbt_harvest.train.tiny import train_tokenizer

    return train_tokenizer()


def test_lengths_follow_the_chat_template(world: World, tokenizer) -> None:
    single = single_turn_rows([world.task], GitProjectSource(world.repos), 4000)
    agentic = agentic_rows([world.task], GitProjectSource(world.repos), 4000)
    (one, episode) = measure(single + agentic, tokenizer)
    prompt_ids = tokenizer.apply_chat_template(single[0]["prompt"], tokenize=True, add_generation_prompt=True)
    assert one.prompt_tokens == len(prompt_ids["input_ids"] if hasattr(prompt_ids, "keys") else prompt_ids)
    assert one.prompt_tokens < one.total_tokens  # the completion is counted too
    assert episode.prompt_tokens == episode.total_tokens > one.total_tokens
    assert one.chars > len(world.task.problem_statement)


def test_cut_names_each_row_and_why(world: World, tokenizer) -> None:
    second = other_split(world.task, "train")
    rows = single_turn_rows([world.task, second], GitProjectSource(world.repos), 4000)
    (length, _) = measure(rows, tokenizer)
    kept, cuts = cut(rows, measure(rows, tokenizer), length.total_tokens)
    assert kept == rows and cuts == []
    kept, cuts = cut(rows, measure(rows, tokenizer), length.total_tokens - 1)
    assert kept == [] and [c.instance_id for c in cuts] == [world.task.instance_id, second.instance_id]
    assert "the corrected file would be cut" in cuts[0].reason
    _, cuts = cut(rows, measure(rows, tokenizer), length.prompt_tokens)
    assert "no completion token would be trained" in cuts[0].reason
    with pytest.raises(TrainDataError, match=r"no trainable row: all 2 rows are longer than \[train\] max_length = 64"):
        fit(rows, tokenizer, 64)


def test_percentiles_nearest_rank() -> None:
    assert percentiles(list(range(1, 101))) == {"p50": 50, "p90": 90, "p99": 99, "p100": 100}
    assert percentiles([7]) == {"p50": 7, "p90": 7, "p99": 7, "p100": 7} and percentiles([]) == {}


def test_train_sft_with_no_row_in_budget_is_one_line_and_writes_nothing(world: World, tmp_path: Path) -> None:
    harvest = shutil.which("harvest")
    assert harvest, "harvest must be on PATH (pip install -e .)"
    raw = tiny_raw("sft-tiny.toml", world, tmp_path, run={"name": "sft-budget"}, train={"max_length": 128})
    config = write_config(raw, tmp_path / "c.toml")
    proc = subprocess.run(
        [harvest, "train", "sft", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HARVEST_HOME": str(world.home), "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no trainable row" in errors[0] and "max_length = 128" in errors[0]
    assert "Traceback" not in proc.stderr
    assert (
        not (tmp_path / "sft-budget" / "manifest.json").exists() and not (tmp_path / "sft-budget" / "adapter").exists()
    )


def test_a_run_leaves_out_rows_over_budget_and_records_them(world: World, tmp_path: Path, tokenizer) -> None:
    from dbt_harvest.train.configs import config_from_dict
    from dbt_harvest.train.sft import run_sft

    long_task = other_split(world.task, "train")
    long_task = type(long_task)(
        **{**long_task.__dict__, "problem_statement": long_task.problem_statement + " word" * 3000}
    )
    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    from dbt_harvest.core.task_record import write_task

    write_task(world.task, tasks_dir)
    write_task(long_task, tasks_dir)
    (short,) = measure(single_turn_rows([world.task], GitProjectSource(world.repos), 4000), tokenizer)
    raw = tiny_raw(
        "sft-tiny.toml",
        world,
        tmp_path,
        run={"name": "sft-cut"},
        train={"max_steps": 1, "max_length": short.total_tokens + 8},
    )
    raw["data"]["tasks"] = str(tasks_dir)
    result = run_sft(config_from_dict(raw, where="sft-cut"))
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["dataset"]["tasks"] == 1 and manifest["rows"] == 1
    assert [r["instance_id"] for r in manifest["rows_left_out"]] == [long_task.instance_id]
    assert "no completion token would be trained" in manifest["rows_left_out"][0]["reason"]


def test_the_corpus_feed_counts_a_single_turn_row_left_out_for_chars_apart_from_failures(
    world: World, tokenizer
) -> None:
    """At a char budget below the broken file's size the single-turn prompt cannot show it: that row is left
    out (a training decision), while the agentic rows still render; neither is a failed render."""
    from dbt_harvest.train.corpus_feed import FeedReport, feed_task, markdown

    project = GitProjectSource(world.repos)
    size = len(project.broken_files(world.task)[world.task.file])
    roomy = feed_task(world.task, project, tokenizer, size + 4000, rewards=False)
    tight = feed_task(world.task, project, tokenizer, size // 2, rewards=False)
    assert roomy.single_turn is not None and not roomy.single_turn_left_out and not roomy.failure
    assert tight.single_turn is None and tight.agentic is not None and not tight.failure, tight
    assert "beyond max_file_chars" in tight.single_turn_left_out
    report = FeedReport((roomy, tight), 4096, size // 2, "tiny", 0.0).to_dict()
    assert report["rendered"] == 2 and report["failed"] == {} and report["single_turn"]["rows"] == 1
    assert report["single_turn_left_out"] == {world.task.instance_id: tight.single_turn_left_out}
    assert "single-turn left out" in markdown(report)


def test_a_stopped_feed_resumes_from_the_results_it_kept_and_reports_as_one_run(
    world: World, tokenizer, tmp_path: Path
) -> None:
    """Each finished task is appended to the feed log as it finishes: a run stopped after two of three tasks
    (and killed mid-write of a third line) resumes with only the third, and its report equals an unstopped
    run's; a task whose record changed is measured again; other settings never share a log."""
    import dataclasses

    from dbt_harvest.train import feed_log
    from dbt_harvest.train.corpus_feed import feed

    tasks = [
        world.task,
        other_split(world.task, "train"),
        dataclasses.replace(world.task, instance_id=world.task.instance_id + ".third"),
    ]
    project = GitProjectSource(world.repos)
    log = tmp_path / "feed" / "settings.jsonl"

    class Stopped(Exception):
        pass

    def stop_after_two(record, result) -> None:
        feed_log.append(log, record, result)
        if len(log.read_text().splitlines()) == 2:
            raise Stopped

    with pytest.raises(Stopped):
        feed(
            tasks,
            project,
            tokenizer,
            "tiny",
            max_length=4096,
            max_file_chars=16000,
            rewards=False,
            on_task=stop_after_two,
        )
    with log.open("a") as handle:
        handle.write('{"feed": {"instance_id": "')  # a line torn by a kill
    finished = feed_log.load(log, tasks)
    assert sorted(finished) == sorted(t.instance_id for t in tasks[:2])
    ran: list[str] = []
    resumed = feed(
        tasks,
        project,
        tokenizer,
        "tiny",
        max_length=4096,
        max_file_chars=16000,
        rewards=False,
        on_task=lambda record, result: ran.append(record.instance_id),
        finished=finished,
    )
    assert ran == [tasks[2].instance_id] and resumed.resumed == 2
    unstopped = feed(tasks, project, tokenizer, "tiny", max_length=4096, max_file_chars=16000, rewards=False)
    assert unstopped.resumed == 0 and [t.to_record() for t in resumed.tasks] == [t.to_record() for t in unstopped.tasks]
    one_run = {k: v for k, v in unstopped.to_dict().items() if k not in ("seconds", "resumed")}
    assert {k: v for k, v in resumed.to_dict().items() if k not in ("seconds", "resumed")} == one_run
    assert resumed.tasks[0].single_turn is not None and resumed.tasks[0].shown  # read back whole, not as dicts
    # a re-minted record (another statement) is not the one its result was measured on
    changed = dataclasses.replace(tasks[0], problem_statement=tasks[0].problem_statement + " Again.")
    assert changed.instance_id not in feed_log.load(log, [changed])
    keys = {
        feed_log.settings_key(max_file_chars=c, tokenizer=t, rewards=r, variants=2)
        for c, t, r in ((16000, "tiny", True), (8000, "tiny", True), (16000, "qwen", True), (16000, "tiny", False))
    }
    assert len(keys) == 4

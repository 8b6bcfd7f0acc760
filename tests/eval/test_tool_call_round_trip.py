"""Evaluation reads a reply exactly as training wrote it: an agentic SFT row (the oracle conversation
train/sft_data.py builds), rendered with the chat template trl trains on (the tiny model's tokenizer
carries trl's Qwen2.5 template), parses back in the hf driver to the same tool calls, turn by turn, with
trl's parser (what GRPO uses) and with the Hermes fallback alike."""

from __future__ import annotations

import json

import pytest

from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord, task_id
from dbt_harvest.eval.drivers.hf import parse_reply, parse_tool_calls, response_parser

FILE = "models/orders.sql"
BROKEN = "select id, amount\nfrom {{ ref('stg_orders') }}\nwhere status = 'completed'\n"
FIXED = "select id, amount\nfrom {{ ref('stg_orders') }}\nwhere status in ('completed', \"shipped\")\n  -- a tab\there, a brace { and a quote '\n"


def _task() -> TaskRecord:
    commit = "0123456789abcdef0123456789abcdef01234567"
    broken_patch = make_patch(FILE, FIXED, BROKEN)
    return TaskRecord(
        instance_id=task_id("acme__shop", commit, "filter.flip_equality", FILE, broken_patch),
        pin="acme__shop@0123456789ab",
        repo="acme/shop",
        base_commit=commit,
        project_dir=".",
        split="train",
        split_group="acme/shop",
        family="filter",
        operator="filter.flip_equality",
        effect="wrong rows",
        file=FILE,
        broken_patch=broken_patch,
        fix_patch=make_patch(FILE, BROKEN, FIXED),
        wrong_repair_patches=(),
        grading=GradingSpec(
            gold=f"{'b' * 64}.duckdb", condition_tabs=("orders",), condition_cols=((0,),), ignore_orders=(True,)
        ),
        problem_statement="Shipped orders are missing.",
        local_checks=LocalChecks(True, 2, 0),
        gold_sha256="b" * 64,
        license="MIT",
        versions={"duckdb": "1.5.6"},
    )


@pytest.fixture(scope="module")
def tokenizer():
    from dbt_harvest.train.tiny import train_tokenizer

    return train_tokenizer()


def test_sft_transcript_parses_back_to_the_same_tool_calls(tokenizer) -> None:
    from dbt_harvest.train.sft_data import agentic_rows

    class Files:
        def broken_files(self, task: TaskRecord) -> dict[str, str]:
            return {FILE: BROKEN, "models/schema.yml": "version: 2\n"}

    (row,) = agentic_rows([_task()], Files(), 16000)
    messages, tools = json.loads(json.dumps(row["messages"])), row["tools"]
    assert response_parser(tokenizer) == "trl"  # trl recognises the template: its parser reads the replies
    turns = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(
            messages[:index], tools=tools, add_generation_prompt=True, tokenize=False
        )
        full = tokenizer.apply_chat_template(messages[: index + 1], tools=tools, tokenize=False)
        assert full.startswith(prompt)
        reply = full[len(prompt) :]
        ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
        prefix = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        expected = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
        for parser in ("trl", "hermes"):
            prose, calls = parse_reply(tokenizer, ids, prefix, tools, parser)
            assert [(c.name, c.arguments) for c in calls] == expected, (parser, reply)
            assert prose == (message.get("content") or "").strip(), (parser, reply)
        turns += 1
    assert turns >= 5  # at least: read the model, write the fix, validate, submit, and one inspection
    assert any(c["function"]["arguments"].get("content") == FIXED for m in messages for c in m.get("tool_calls") or [])


def test_a_malformed_call_is_recorded_not_dropped(tokenizer) -> None:
    reply = '<tool_call>\n{"name": "read_file", "arguments": {"path": \n</tool_call><|im_end|>'
    ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
    prefix = tokenizer("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    _, calls = parse_reply(tokenizer, ids, prefix, None, "trl")
    assert [c.name for c in calls] == ["<unparseable tool call>"]
    assert parse_tool_calls(reply)[1][0].name == "<unparseable tool call>"

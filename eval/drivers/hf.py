"""The hf driver: a local transformers causal LM, optionally with a peft (LoRA) adapter, greedy decoding.

The conversation is rendered with the tokenizer's own chat template and the same tool schemas trl uses
in training (``tool_schemas``), so an adapter trained with GRPO on RepairEnvironment sees at evaluation
exactly the prompt format it was trained on. Tool calls are read in the Hermes/Qwen form the template
asks for (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``). When the conversation outgrows
the model's context, the episode ends without a submission (rung 2).
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from eval.drivers.chat import AssistantTurn, ContextFull, ToolCall, play_chat
from eval.env.environment import RepairEnvironment
from eval.env.errors import EnvError
from core.task_record import TaskRecord

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>")


def parse_tool_calls(text: str) -> tuple[str, tuple[ToolCall, ...]]:
    """Split generated text into its prose and its tool calls (unparseable calls keep their raw text)."""
    calls = []
    for index, match in enumerate(_TOOL_CALL.finditer(text)):
        body = match.group(1).strip()
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            calls.append(ToolCall(id=f"call_{index}", name="<unparseable tool call>", arguments=body[:500]))
            continue
        if not isinstance(data, dict):
            calls.append(ToolCall(id=f"call_{index}", name="<unparseable tool call>", arguments=body[:500]))
            continue
        calls.append(ToolCall(id=f"call_{index}", name=str(data.get("name", "")), arguments=data.get("arguments", {})))
    prose = _TOOL_CALL.sub("", text)
    for marker in _END_MARKERS:
        prose = prose.replace(marker, "")
    return prose.strip(), tuple(calls)


def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat templates want tool-call arguments as dicts, not JSON text."""
    out = []
    for message in messages:
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                arguments = call["function"]["arguments"]
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except json.JSONDecodeError:
                        arguments = {"raw": arguments}
                calls.append({"type": "function", "function": {"name": call["function"]["name"], "arguments": arguments}})
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


class HFChat:
    """A loaded model + tokenizer that answers a conversation greedily."""

    def __init__(self, model_path: str, adapter: str | None = None, max_new_tokens: int = 512, device: str | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not Path(model_path).exists() and "/" not in model_path:
            raise EnvError(f"no model at {model_path}; pass a local folder (the hf driver never downloads on its own)")
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path)
        if adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, adapter)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(self.device).eval()
        self.max_new_tokens = max_new_tokens
        config = getattr(self.model, "config", None)
        self.context = int(getattr(config, "max_position_embeddings", 0) or 0) or 1 << 30
        self._lock = threading.Lock()

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        import torch

        encoded = self.tokenizer.apply_chat_template(
            _template_messages(messages), tools=tools, add_generation_prompt=True, tokenize=True,
            return_dict=True, return_tensors="pt",
        )
        length = int(encoded["input_ids"].shape[-1])
        if length + self.max_new_tokens > self.context:
            raise ContextFull(f"{length} prompt tokens + {self.max_new_tokens} new exceed the context of {self.context}")
        inputs = {k: v.to(self.device) for k, v in encoded.items()}
        with self._lock, torch.no_grad():
            output = self.model.generate(
                **inputs, do_sample=False, max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        text = self.tokenizer.decode(output[0][length:], skip_special_tokens=False)
        prose, calls = parse_tool_calls(text)
        return AssistantTurn(content=prose, tool_calls=calls, raw={"text": text})


class HFDriver:
    """A local model (base or base + adapter), greedy decoding."""

    name = "hf"
    parallel_safe = False  # one model, one generate at a time; episodes run one after another

    def __init__(self, model: str = "", adapter: str | None = None, max_new_tokens: int = 512, **_: Any) -> None:
        if not model:
            raise EnvError("the hf driver needs --model (a local model folder)")
        self.model_path, self.adapter, self.max_new_tokens = model, adapter, max_new_tokens
        self._chat: HFChat | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name, "model": self.model_path, "adapter": self.adapter, "decoding": "greedy",
            "max_new_tokens": self.max_new_tokens,
        }

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        if self._chat is None:
            self._chat = HFChat(self.model_path, self.adapter, self.max_new_tokens)
        play_chat(self._chat, env, task, observation)

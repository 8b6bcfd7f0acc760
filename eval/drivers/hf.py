"""The hf driver: a local transformers causal LM, optionally with a peft (LoRA) adapter, greedy decoding.

The conversation is rendered with the tokenizer's own chat template and the same tool schemas trl uses
in training (``tool_schemas``), so an adapter trained with GRPO on RepairEnvironment sees at evaluation
exactly the prompt format it was trained on. Replies are parsed by the same code GRPO's multi-turn
training uses, trl's ``parse_response`` (with the response template ``add_response_schema`` sets for the
chat templates trl recognises, and the prompt as prefix), so evaluation and training cannot read a
reply differently; for a chat template trl does not recognise (or without trl), and for a malformed
call trl would drop, tool calls are read in the Hermes/Qwen form (``<tool_call>{"name": ...,
"arguments": {...}}</tool_call>``) so a bad call is recorded, not lost. When the conversation outgrows
the model's context, the episode ends without a submission (rung 2). The model is loaded by ``prepare``
(before the audit's first episode): a folder that is missing or does not load fails the audit in one line.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.drivers.base import DriverError
from dbt_harvest.eval.drivers.chat import AssistantTurn, ContextFull, ToolCall, play_chat
from dbt_harvest.eval.env.environment import RepairEnvironment

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


def response_parser(tokenizer: Any) -> str:
    """Give ``tokenizer`` trl's response template when trl recognises its chat template; return which
    parser :func:`parse_reply` will use for it: ``"trl"`` or ``"hermes"`` (our regex)."""
    if (
        getattr(tokenizer, "response_template", None) is not None
        or getattr(tokenizer, "response_schema", None) is not None
    ):
        return "trl"
    try:
        from trl.chat_template_utils import add_response_schema
    except ImportError:
        return "hermes"
    try:
        add_response_schema(tokenizer)
    except (ValueError, TypeError, AttributeError):
        return "hermes"
    return "trl"


def parse_reply(
    tokenizer: Any,
    ids: list[int],
    prefix: list[int] | None = None,
    tools: list[dict[str, Any]] | None = None,
    parser: str = "trl",
) -> tuple[str, tuple[ToolCall, ...]]:
    """Split generated token ids (``prefix``: the prompt's ids) into prose and tool calls, with trl's
    ``parse_response`` (what GRPO training uses) when ``parser`` is ``"trl"`` and trl knows the tokenizer's
    template, else the Hermes regex."""
    text = tokenizer.decode(ids, skip_special_tokens=False)
    if parser != "trl" or response_parser(tokenizer) != "trl":  # a tokenizer not yet given trl's template gets it here
        return parse_tool_calls(text)
    from trl.chat_template_utils import parse_response

    parsed = parse_response(
        tokenizer, list(ids), prefix=list(prefix) if prefix is not None else None, tools=_schemas(tools)
    )
    found = parsed.get("tool_calls") or []
    if not found and "<tool_call>" in text:
        return parse_tool_calls(text)  # trl fell back to plain text on a malformed call: record it as one
    calls = tuple(
        ToolCall(
            id=f"call_{index}",
            name=str(call.get("function", {}).get("name", "")),
            arguments=call.get("function", {}).get("arguments", {}),
        )
        for index, call in enumerate(found)
    )
    prose = str(parsed.get("content") or "")
    for marker in _END_MARKERS:
        prose = prose.replace(marker, "")
    return prose.strip(), calls


def _schemas(tools: list[dict[str, Any]] | None) -> list[dict[Any, Any] | Callable[..., Any]] | None:
    """The tool schemas as the list type transformers and trl declare (a list is invariant in its items)."""
    return None if tools is None else list(tools)


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
                calls.append(
                    {"type": "function", "function": {"name": call["function"]["name"], "arguments": arguments}}
                )
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


class HFChat:
    """A loaded model + tokenizer that answers a conversation greedily."""

    def __init__(
        self,
        model_path: str,
        adapter: str | None = None,
        max_new_tokens: int = 512,
        device: str | None = None,
        revision: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs = {"revision": revision} if revision else {}
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, **kwargs)
        self.parser = response_parser(self.tokenizer)
        # a transformers model or its peft wrapper; Any, since transformers types .to through @wraps(Module.to),
        # which reads the device as the module, and the wrapper forwards .generate and .config untyped
        model: Any = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
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
            _template_messages(messages),
            tools=_schemas(tools),
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
        )
        if not isinstance(encoded, Mapping):  # tokenize and return_dict: a BatchEncoding of tensors
            raise DriverError(f"the tokenizer's chat template gave {type(encoded).__name__}, not the encoded prompt")
        length = int(encoded["input_ids"].shape[-1])
        if length + self.max_new_tokens > self.context:
            raise ContextFull(
                f"{length} prompt tokens + {self.max_new_tokens} new exceed the context of {self.context}"
            )
        inputs = {k: v.to(self.device) for k, v in encoded.items()}
        with self._lock, torch.no_grad():
            output = self.model.generate(
                **inputs,
                do_sample=False,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        ids = output[0][length:].tolist()
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        prose, calls = parse_reply(self.tokenizer, ids, encoded["input_ids"][0].tolist(), tools, self.parser)
        return AssistantTurn(content=prose, tool_calls=calls, raw={"text": text, "parser": self.parser})


def _looks_like_path(name: str) -> bool:
    """A local folder was meant (absolute, relative with ./ or ../, ~, or more than one '/'), not a Hub id."""
    return name.startswith(("/", ".", "~")) or name.count("/") != 1


class HFDriver:
    """A local model (base or base + adapter), greedy decoding."""

    name = "hf"
    parallel_safe = False  # one model, one generate at a time; episodes run one after another

    def __init__(
        self,
        model: str = "",
        adapter: str | None = None,
        max_new_tokens: int = 512,
        revision: str | None = None,
        **_: Any,
    ) -> None:
        if not model:
            raise DriverError("the hf driver needs --model (a local model folder)")
        self.model_path, self.adapter, self.max_new_tokens, self.revision = model, adapter, max_new_tokens, revision
        self._chat: HFChat | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model_path,
            "revision": self.revision,
            "adapter": self.adapter,
            "decoding": "greedy",
            "max_new_tokens": self.max_new_tokens,
        }

    def prepare(self) -> None:
        """Load the model (and adapter) now; raise DriverError in one line if either cannot be loaded."""
        if self._chat is not None:
            return
        if _looks_like_path(self.model_path) and not Path(self.model_path).expanduser().is_dir():
            raise DriverError(
                f"the hf driver has no model folder at {self.model_path}; pass --model a local model folder"
            )
        if self.adapter and not Path(self.adapter).is_dir():
            raise DriverError(
                f"the hf driver has no adapter folder at {self.adapter}; pass --adapter a peft adapter folder"
            )
        try:
            self._chat = HFChat(
                str(Path(self.model_path).expanduser()) if _looks_like_path(self.model_path) else self.model_path,
                self.adapter,
                self.max_new_tokens,
                revision=self.revision,
            )
        except Exception as exc:
            what = f"model {self.model_path}" + (f" with adapter {self.adapter}" if self.adapter else "")
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise DriverError(f"the hf driver cannot load {what}: {type(exc).__name__}: {first}") from None

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        self.prepare()
        assert self._chat is not None
        play_chat(self._chat, env, task, observation)

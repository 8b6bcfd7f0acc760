"""The openai driver: any OpenAI-compatible chat-completions endpoint with tool calling (vLLM, a hosted API).

Plain urllib, no SDK: one POST per turn to ``{base_url}/chat/completions`` with the tool schemas,
``temperature`` 0 and a fixed ``seed`` (deterministic decoding by default), ``tool_choice`` "auto". The
API key, when one is needed, comes from an environment variable (default ``OPENAI_API_KEY``) and is
never written to the run folder.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from eval.drivers.chat import AssistantTurn, ToolCall, play_chat
from eval.env.environment import RepairEnvironment
from eval.env.errors import EnvError
from core.task_record import TaskRecord


class EndpointError(EnvError):
    """The chat endpoint failed or answered something that is not a chat completion."""


@dataclass
class OpenAIChat:
    """One OpenAI-compatible endpoint and model, deterministic by default."""

    base_url: str
    model: str
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 2048
    timeout_s: float = 300.0
    retries: int = 2
    api_key_env: str = "OPENAI_API_KEY"
    extra: dict[str, Any] = field(default_factory=dict)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode("utf-8")
        last = ""
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:300]
                last = f"HTTP {exc.code} from {url}: {detail}"
                if exc.code < 500 and exc.code != 429:
                    break
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = f"cannot reach {url}: {exc}"
            except json.JSONDecodeError as exc:
                last = f"{url} answered with something that is not JSON ({exc})"
                break
            time.sleep(min(2.0 * (attempt + 1), 10.0))
        raise EndpointError(last or f"no answer from {url}")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        body = {
            "model": self.model,
            "messages": messages,
            "tools": [_openai_tool(t) for t in tools],
            "tool_choice": "auto",
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            **self.extra,
        }
        answer = self._post(body)
        try:
            message = answer["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"the endpoint's answer has no choices[0].message: {json.dumps(answer)[:300]}") from None
        calls = []
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            calls.append(ToolCall(
                id=str(call.get("id") or f"call_{index}"),
                name=str(function.get("name", "")),
                arguments=function.get("arguments", "{}"),
            ))
        return AssistantTurn(content=message.get("content") or "", tool_calls=tuple(calls), raw=message)


def _openai_tool(schema: dict[str, Any]) -> dict[str, Any]:
    function = {k: v for k, v in schema["function"].items() if k != "return"}
    return {"type": "function", "function": function}


class OpenAIDriver:
    """A model behind an OpenAI-compatible endpoint."""

    name = "openai"
    parallel_safe = True

    def __init__(self, base_url: str = "", model: str = "", **options: Any) -> None:
        if not base_url or not model:
            raise EnvError("the openai driver needs --base-url (e.g. http://127.0.0.1:8000/v1) and --model")
        self.chat = OpenAIChat(base_url=base_url, model=model, **options)

    def describe(self) -> dict[str, Any]:
        c = self.chat
        return {
            "name": self.name, "base_url": c.base_url, "model": c.model, "temperature": c.temperature,
            "seed": c.seed, "max_tokens": c.max_tokens,
        }

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        play_chat(self.chat, env, task, observation)

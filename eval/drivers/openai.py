"""The openai driver: any OpenAI-compatible chat-completions endpoint with tool calling (vLLM, a hosted API).

Plain urllib, no SDK: one POST per turn to ``{base_url}/chat/completions`` with the tool schemas,
``temperature`` 0 and a fixed ``seed`` (deterministic decoding by default), ``tool_choice`` "auto". The
API key, when one is needed, comes from an environment variable (default ``OPENAI_API_KEY``) and is
never written to the run folder. Before the first episode ``prepare`` checks the endpoint
(``GET /models``): unreachable, or listing models without ``--model``, fails the audit in one line.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from eval.drivers.base import DriverError
from eval.drivers.chat import AssistantTurn, ToolCall, play_chat
from eval.env.environment import RepairEnvironment
from core.task_record import TaskRecord


class EndpointError(DriverError):
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

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def check(self) -> None:
        """Reach the endpoint once (``GET {base_url}/models``) and, where it lists its models, find ours.

        An endpoint that cannot be reached, refuses the key, or lists models without this one raises
        EndpointError; one that answers but has no model list (404/405/501) is taken as reachable.
        """
        url = self.base_url.rstrip("/") + "/models"
        request = urllib.request.Request(url, headers=self._headers(), method="GET")
        try:
            with urllib.request.urlopen(request, timeout=min(self.timeout_s, 30.0)) as response:
                raw = response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405, 501):
                return
            raise EndpointError(f"{url} answered HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')[:200]}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EndpointError(f"cannot reach {url}: {reason}; is the server running at --base-url {self.base_url}?") from None
        try:
            listed = [str(m.get("id")) for m in json.loads(raw).get("data", []) if isinstance(m, dict)]
        except (json.JSONDecodeError, AttributeError):
            return  # not a model list: reachable is all we can say
        if listed and self.model not in listed:
            raise EndpointError(
                f"{self.base_url} does not serve model {self.model!r}; it lists {', '.join(sorted(listed)[:10])}"
            )

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = self._headers()
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
            raise DriverError("the openai driver needs --base-url (e.g. http://127.0.0.1:8000/v1) and --model")
        self.chat = OpenAIChat(base_url=base_url, model=model, **options)
        self._checked = False

    def prepare(self) -> None:
        """Check the endpoint is reachable and serves ``--model`` (EndpointError, one line, if not)."""
        if not self._checked:
            self.chat.check()
            self._checked = True

    def describe(self) -> dict[str, Any]:
        c = self.chat
        return {
            "name": self.name, "base_url": c.base_url, "model": c.model, "temperature": c.temperature,
            "seed": c.seed, "max_tokens": c.max_tokens,
        }

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        play_chat(self.chat, env, task, observation)

"""The openai driver: any OpenAI-compatible chat-completions endpoint with tool calling (vLLM, a hosted API).

Through the ``openai`` SDK (its retries with backoff on 408/409/429/5xx and connection errors, its
timeouts and its typed tool calls), pointed at ``--base-url``: one ``chat.completions.create`` per turn
with the tool schemas, ``temperature`` 0 and a fixed ``seed`` (deterministic decoding by default),
``tool_choice`` "auto". The API key, when one is needed, comes from an environment variable (default
``OPENAI_API_KEY``; a local server without one gets a placeholder) and is never written to the run
folder. Before the first episode ``prepare`` checks the endpoint (``models.list``): unreachable, or
listing models without ``--model``, fails the audit in one line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.eval.drivers.base import DriverError
from dbt_harvest.eval.drivers.chat import AssistantTurn, ToolCall, play_chat
from dbt_harvest.eval.env.environment import RepairEnvironment

#: sent as the key to a server that needs none (the SDK requires one); never a real credential
NO_KEY = "no-key"


class EndpointError(DriverError):
    """The chat endpoint failed or answered something that is not a chat completion."""


def openai_client(
    base_url: str, api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 300.0, retries: int = 2
) -> Any:
    """An ``openai.OpenAI`` client for ``base_url`` (the key from ``api_key_env``, or a placeholder)."""
    import openai

    return openai.OpenAI(
        base_url=base_url.rstrip("/"),
        api_key=os.environ.get(api_key_env) or NO_KEY,
        timeout=timeout_s,
        max_retries=retries,
    )


def _status_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    text = json.dumps(body) if isinstance(body, (dict, list)) else str(getattr(exc, "message", "") or exc)
    return " ".join(text.split())[:300]


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
    _client: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = openai_client(self.base_url, self.api_key_env, self.timeout_s, self.retries)
        return self._client

    def check(self) -> None:
        """Reach the endpoint once (``GET {base_url}/models``) and, where it lists its models, find ours.

        An endpoint that cannot be reached, refuses the key, or lists models without this one raises
        EndpointError; one that answers but has no model list (404/405/501) is taken as reachable.
        """
        import openai

        url = self.base_url.rstrip("/") + "/models"
        try:
            listed = [
                str(m.id)
                for m in self.client.with_options(timeout=min(self.timeout_s, 30.0), max_retries=0).models.list()
            ]
        except openai.APIStatusError as exc:
            if exc.status_code in (404, 405, 501):
                return
            raise EndpointError(f"{url} answered HTTP {exc.status_code}: {_status_detail(exc)}") from None
        except openai.APIConnectionError as exc:
            raise EndpointError(
                f"cannot reach {url}: {exc.__cause__ or exc}; is the server running at --base-url {self.base_url}?"
            ) from None
        except (openai.APIResponseValidationError, ValueError, TypeError, AttributeError):
            return  # not a model list: reachable is all we can say
        if listed and self.model not in listed:
            raise EndpointError(
                f"{self.base_url} does not serve model {self.model!r}; it lists {', '.join(sorted(listed)[:10])}"
            )

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantTurn:
        import openai

        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            answer = self.client.chat.completions.create(
                model=self.model,
                messages=messages,
                tools=[_openai_tool(t) for t in tools],
                tool_choice="auto",
                temperature=self.temperature,
                seed=self.seed,
                max_tokens=self.max_tokens,
                **self.extra,
            )
        except openai.APIStatusError as exc:
            raise EndpointError(f"HTTP {exc.status_code} from {url}: {_status_detail(exc)}") from None
        except openai.APIConnectionError as exc:  # timeouts included, after the SDK's retries
            raise EndpointError(f"cannot reach {url}: {exc.__cause__ or exc}") from None
        except openai.APIResponseValidationError as exc:
            raise EndpointError(f"{url} answered with something that is not a chat completion ({exc})") from None
        try:
            message = answer.choices[0].message
        except (AttributeError, IndexError, TypeError):
            raise EndpointError(f"the endpoint's answer has no choices[0].message: {str(answer)[:300]}") from None
        calls = []
        for index, call in enumerate(message.tool_calls or []):
            function = getattr(call, "function", None)
            calls.append(
                ToolCall(
                    id=str(getattr(call, "id", None) or f"call_{index}"),
                    name=str(getattr(function, "name", "") or ""),
                    arguments=getattr(function, "arguments", None) or "{}",
                )
            )
        return AssistantTurn(
            content=message.content or "", tool_calls=tuple(calls), raw=message.model_dump(exclude_none=True)
        )


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
            "name": self.name,
            "base_url": c.base_url,
            "model": c.model,
            "temperature": c.temperature,
            "seed": c.seed,
            "max_tokens": c.max_tokens,
        }

    def play(self, env: RepairEnvironment, task: TaskRecord, observation: str) -> None:
        play_chat(self.chat, env, task, observation)

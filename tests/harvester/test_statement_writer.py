"""The statement writer through the openai SDK against our own OpenAI-compatible server on 127.0.0.1:
its text is used when it does not leak, the template otherwise, and an endpoint that fails or cannot be
reached falls back to the template too."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from dbt_harvest.harvester.mint.statement import Symptom, statement_for, template_statement

SYMPTOMS = [Symptom("fct_orders", "One row per completed order.", 10, 12, (("amount", "Order total.", "higher"),))]


class Writer(BaseHTTPRequestHandler):
    reply: str = ""
    status: int = 200
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Writer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        message = {"role": "assistant", "content": Writer.reply}
        data = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            }
        ).encode()
        self.send_response(Writer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def writer_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    Writer.requests, Writer.status = [], 200
    server = HTTPServer(("127.0.0.1", 0), Writer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()


def test_the_writers_statement_is_used_when_it_does_not_leak(writer_url: str) -> None:
    Writer.reply = "  Our `fct_orders` report shows more orders than we actually completed.  "
    assert statement_for(SYMPTOMS, ["status = 'completed'"], writer=writer_url) == Writer.reply.strip()
    (request,) = Writer.requests
    assert request["path"] == "/v1/chat/completions" and request["body"]["temperature"] == 0
    assert request["body"]["messages"][1]["content"] == template_statement(SYMPTOMS)


def test_a_leaking_or_failing_writer_falls_back_to_the_template(writer_url: str) -> None:
    Writer.reply = "Remove the filter status = 'completed' in fct_orders."
    assert statement_for(SYMPTOMS, ["status = 'completed'"], writer=writer_url) == template_statement(SYMPTOMS)
    Writer.status, Writer.reply = 400, "bad request"
    assert statement_for(SYMPTOMS, ["status = 'completed'"], writer=writer_url) == template_statement(SYMPTOMS)


def test_an_unreachable_writer_falls_back_to_the_template() -> None:
    dead = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    assert statement_for(SYMPTOMS, [], writer=dead) == template_statement(SYMPTOMS)

"""The openai driver against our own OpenAI-compatible server on 127.0.0.1 replaying a scripted conversation."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from dbt_harvest.core.patching import apply_to_text, parse_patch
from dbt_harvest.eval.audit.rundir import RunDir
from dbt_harvest.eval.audit.runner import AuditOptions, run_audit
from dbt_harvest.eval.drivers import make_driver
from dbt_harvest.eval.ladder import OFFICIAL_PASS

pytestmark = pytest.mark.slow


def _call(index: int, name: str, arguments: Any) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": text}}


class Replay(BaseHTTPRequestHandler):
    script: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Replay.requests.append({"path": self.path, "body": body})
        message = Replay.script[len(Replay.requests) - 1]
        data = json.dumps(
            {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_openai_driver_plays_a_tool_calling_conversation(dev_world, tmp_path) -> None:
    task = dev_world.tasks[0]
    with dev_world.env():
        from dbt_harvest.harvester.workspace import template

        broken = apply_to_text((template(dev_world.pin) / task.file).read_text(), parse_patch(task.broken_patch)[0])
    fixed = apply_to_text(broken, parse_patch(task.fix_patch)[0])
    Replay.requests = []
    Replay.script = [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [_call(0, "list_files", {"path": "models"})]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call(1, "read_file", {"path": task.file}), _call(2, "read_file", "{not json")],
        },
        {"role": "assistant", "content": "The filter on succeeded payments is missing."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_call(3, "write_file", {"path": task.file, "content": fixed})],
        },
        {"role": "assistant", "content": None, "tool_calls": [_call(4, "submit", {})]},
    ]
    server = HTTPServer(("127.0.0.1", 0), Replay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        driver = make_driver("openai", base_url=f"http://127.0.0.1:{server.server_port}/v1", model="scripted")
        run = RunDir(tmp_path / "openai")
        with dev_world.env():
            run_audit(run, "dev", [task], driver, AuditOptions(workers=1), pins=dev_world.pins)
    finally:
        server.shutdown()
    verdict = run.read_episode(task.instance_id)
    assert verdict["rung"] == OFFICIAL_PASS and verdict["official"] == 1, verdict
    assert verdict["invalid_actions"] == 2  # the unparseable arguments and the reply without a tool call
    assert len(Replay.requests) == 5 and all(r["path"] == "/v1/chat/completions" for r in Replay.requests)
    first = Replay.requests[0]["body"]
    assert first["temperature"] == 0 and first["model"] == "scripted"
    assert {t["function"]["name"] for t in first["tools"]} == {
        "list_files",
        "read_file",
        "write_file",
        "query",
        "dbt",
        "validate",
        "submit",
    }
    assert task.problem_statement in first["messages"][1]["content"]
    third = Replay.requests[2]["body"]["messages"]
    tool_answers = [m for m in third if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_answers] == ["call_0", "call_1", "call_2"]
    # the read_file answer is the task's (broken) model file; the unparseable call is answered with an error
    assert "order_id" in tool_answers[1]["content"] and not tool_answers[1]["content"].startswith("error:")
    assert tool_answers[2]["content"].startswith("error:")
    assert json.loads(run.run_file.read_text())["driver"]["temperature"] == 0.0

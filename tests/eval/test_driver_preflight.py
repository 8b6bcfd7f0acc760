"""A model driver that cannot play fails `harvest audit` before the first episode: exit 1, one line on stderr,
no run folder, and (on the sealed split) no unseal spent. Before, every episode "crashed" and the audit
reported 0/N with exit 0.

Through the installed `harvest` command, against the dev tasks of the harvested example and our own
OpenAI-compatible servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def _harvest(world: Any, *args: str | Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("harvest")
    assert exe, "harvest must be on PATH (pip install -e .)"
    env = {**os.environ, "HARVEST_HOME": str(world.home), "HARVEST_PINS": str(world.pins), "OMP_NUM_THREADS": "1"}
    return subprocess.run([exe, *map(str, args)], env=env, capture_output=True, text=True, timeout=300)


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-1500:], proc.stderr[-1500:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-1500:]
    for word in words:
        assert word in lines[0], lines[0]


class Models(BaseHTTPRequestHandler):
    """An endpoint that lists its models and refuses to chat (a preflight must never reach chat)."""

    served: list[str] = ["qwen3-4b"]
    chats = 0

    def do_GET(self) -> None:
        data = json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in Models.served]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        Models.chats += 1
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_hf_driver_that_cannot_load_fails_before_the_first_episode(dev_world, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _refused(
        _harvest(
            dev_world,
            "audit",
            "--split",
            "dev",
            "--driver",
            "hf",
            "--model",
            tmp_path / "no-such-model",
            "--run-dir",
            run,
        ),
        "no model folder",
        "no-such-model",
    )
    junk = tmp_path / "not-a-model"
    junk.mkdir()
    (junk / "config.json").write_text("{not json")
    _refused(
        _harvest(dev_world, "audit", "--split", "dev", "--driver", "hf", "--model", junk, "--run-dir", run),
        "cannot load model",
        str(junk),
    )
    assert not run.exists()


def test_openai_endpoint_unreachable_or_without_the_model_fails_up_front(dev_world, tmp_path: Path) -> None:
    run = tmp_path / "run"
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    _refused(
        _harvest(
            dev_world,
            "audit",
            "--split",
            "dev",
            "--driver",
            "openai",
            "--base-url",
            dead,
            "--model",
            "m",
            "--run-dir",
            run,
        ),
        "cannot reach",
        dead,
    )
    Models.chats = 0
    with _server() as url:
        _refused(
            _harvest(
                dev_world,
                "audit",
                "--split",
                "dev",
                "--driver",
                "openai",
                "--base-url",
                url,
                "--model",
                "qwen3-8b",
                "--run-dir",
                run,
            ),
            "does not serve model 'qwen3-8b'",
            "qwen3-4b",
        )
    assert Models.chats == 0 and not run.exists()


def test_a_sealed_audit_whose_model_cannot_load_spends_no_unseal(test_world, tmp_path: Path) -> None:
    from tests.recipes import frozen_run

    recipe = frozen_run(tmp_path / "runs", "sft-broken-base")  # its base-tiny folder was never built
    _refused(
        _harvest(test_world, "audit", "--split", "test", "--recipe", recipe, "--run-dir", tmp_path / "run"),
        "sft-broken-base",
    )
    _refused(
        _harvest(
            test_world,
            "audit",
            "--split",
            "test",
            "--recipe",
            recipe,
            "--model",
            tmp_path / "nothing",
            "--run-dir",
            tmp_path / "run",
        ),
        "no model folder",
    )
    assert not (test_world.pins / "_unseals.jsonl").exists() and not (tmp_path / "run").exists()

"""Bad requests to `harvest serve openenv`'s app (issue 36): a 4xx and one line, never a traceback or a 500;
HTTP resets count toward the session cap. The app is the real one (``make_app`` over a built dataset,
uvicorn on 127.0.0.1, OpenEnv's own WebSocket client), every request bounded in count and time."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture()
def server(dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[str]]]:
    """(base URL, dev task ids) of the app on a free loopback port, one session slot, a fresh HARVEST_HOME."""
    import uvicorn

    from dbt_harvest.eval.adapters.openenv_server import make_app

    folder, mirror, packages, ids = dataset
    monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HARVEST_PINS", str(tmp_path / "pins"))
    monkeypatch.setenv("HARVEST_PACKAGE_MIRROR", str(packages))
    (tmp_path / "home").mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = make_app(str(folder), "dev", repo_mirror=mirror, max_concurrent_envs=1)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}", ids
    finally:
        server.should_exit = True
        thread.join(30)


def _post(url: str, body: dict | bytes) -> tuple[int, dict]:
    import httpx

    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = httpx.post(url, content=data, headers={"content-type": "application/json"}, timeout=300)
    return answer.status_code, answer.json()


def _one_line(detail: object) -> str:
    assert isinstance(detail, str) and "\n" not in detail and "Traceback" not in detail, detail
    return detail


def test_bad_http_requests_are_4xx_with_one_line(server) -> None:
    base, _ = server
    code, body = _post(f"{base}/reset", {"instance_id": "no.such.task"})
    assert code == 400 and "no task 'no.such.task'" in _one_line(body["detail"])
    code, body = _post(f"{base}/reset", {})
    assert code == 400 and "instance_id" in _one_line(body["detail"])
    code, body = _post(f"{base}/step", {"action": {"tool": "read_file", "args": {"path": "x", "mode": "rb"}}})
    assert code == 400 and "reset" in _one_line(body["detail"])  # HTTP steps have no episode
    code, body = _post(f"{base}/reset", b"x" * (2 << 20))
    assert code == 413 and "bytes" in _one_line(body["detail"])


def test_unknown_tool_arguments_over_the_websocket_are_one_line(server) -> None:
    from dbt_harvest.eval.adapters.openenv_server import RepairAction, RepairEnvClient

    base, ids = server
    with RepairEnvClient(base_url=base, message_timeout_s=300).sync() as client:
        first = client.reset(instance_id=ids[0])
        assert not first.done
        for args, why in (
            ({"path": "models", "mode": "rb"}, "unknown argument(s) mode"),
            ({"path": 7}, "must be a str"),
            ({}, "missing required argument 'path'"),
        ):
            with pytest.raises(Exception) as caught:
                client.step(RepairAction(tool="read_file", args=args))
            message = str(caught.value)
            assert why in message and "TypeError" not in message and "Traceback" not in message, message
        listed = client.step(RepairAction(tool="list_files", args={"path": "."}))  # the session still works
        assert "dbt_project.yml" in listed.observation.text


def test_http_resets_count_toward_the_session_cap(server) -> None:
    from dbt_harvest.eval.adapters.openenv_server import RepairEnvClient

    base, ids = server
    with RepairEnvClient(base_url=base, message_timeout_s=300).sync() as client:
        client.reset(instance_id=ids[0])  # the one slot is this session's
        code, body = _post(f"{base}/reset", {"instance_id": ids[0]})
        assert code == 429 and "session slots" in _one_line(body["detail"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the session's slot comes back when it closes
        code, body = _post(f"{base}/reset", {"instance_id": ids[0]})
        if code != 429:
            break
        time.sleep(0.5)
    assert code == 200 and body["observation"]["instance_id"] == ids[0]

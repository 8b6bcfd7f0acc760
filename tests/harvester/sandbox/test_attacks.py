"""The adversarial suite for the sandboxed runner: each attack project must fail, clearly, and leave the
host untouched.

One project per kind of attack (tests/harvester/sandbox/attacks/<kind>), several models per project, one dbt run
each: dbt keeps going after a failing model, so every model's fate is reported per node. Every test
checks that each attack node failed with a one-line reason naming the cause, that the secret written
outside the workspace never reached it, and that nothing outside the workspace changed.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path

import pytest
from sandbox_support import ATTACK_LIMITS, ATTACKS, CLOCK, SECRET, make_workspace, snapshot, workspace_mentions

from dbt_harvest.harvester.sandbox import DbtStep, QueryStep, SandboxRun, run_steps
from dbt_harvest.harvester.sandbox.command import ALLOWED_ENV, SET_INSIDE_ENV

PERMISSION = "file system operations are disabled by configuration"


def run_attack(
    kind: str, tmp_path: Path, outside: Path, extra_vars: dict[str, object] | None = None, steps: list | None = None
) -> tuple[SandboxRun, Path]:
    workspace = make_workspace(tmp_path, ATTACKS / kind, "attack")
    (workspace / "escape.csv").symlink_to(outside / "secret.csv")
    variables = {"outside": str(outside), **(extra_vars or {})}
    before = snapshot(outside)
    run = run_steps(
        workspace,
        ".",
        [DbtStep(("run", "--vars", json.dumps(variables))), *(steps or [])],
        clock=CLOCK,
        limits=ATTACK_LIMITS,
        stop_on_failure=False,
    )
    assert snapshot(outside) == before, "something outside the workspace changed"
    assert workspace_mentions(workspace, SECRET) == [], "a secret from outside reached the workspace"
    return run, workspace


def node_messages(run: SandboxRun) -> dict[str, tuple[str, str]]:
    """model name -> (status, message) of the first dbt step."""
    return {
        node["unique_id"].rsplit(".", 1)[-1]: (node["status"], node["message"]) for node in run.steps[0].detail["nodes"]
    }


def assert_failed(nodes: dict[str, tuple[str, str]], name: str, *needles: str) -> None:
    status, message = nodes[name]
    assert status == "error", f"{name} was not stopped: {status} {message}"
    assert "\n" not in message
    assert any(needle in message for needle in needles), f"{name}: unclear reason: {message}"


def test_reads_outside_the_workspace_fail(bwrap: None, tmp_path: Path, outside: Path) -> None:
    run, _ = run_attack("read_outside", tmp_path, outside)
    assert not run.ok and not run.killed_reason
    nodes = node_messages(run)
    assert_failed(nodes, "csv_outside", PERMISSION)
    assert_failed(nodes, "text_outside", PERMISSION)
    assert_failed(nodes, "system_file", PERMISSION)
    assert_failed(nodes, "attach_outside", PERMISSION)
    assert_failed(nodes, "unlock_duckdb", "the configuration has been locked")
    # DuckDB's check is on the path's text: a symlink inside the workspace passes it; bubblewrap does not
    # expose the target, so the file is simply not there
    assert_failed(nodes, "symlink_escape", "No files found")
    # Python models bypass DuckDB entirely; only the sandbox's file system stops them
    assert_failed(nodes, "py_read_outside", "FileNotFoundError")
    assert run.steps[0].first_error.startswith("model.attack_read_outside.")


def test_writes_outside_the_workspace_fail(bwrap: None, tmp_path: Path, outside: Path) -> None:
    marker = Path(f"/tmp/harvest-sandbox-marker-{uuid.uuid4().hex}.txt")
    run, workspace = run_attack("write_outside", tmp_path, outside, {"tmp_marker": str(marker)})
    assert "harvest_lockdown" in (workspace / ".harvest_profile" / "profiles.yml").read_text()
    nodes = node_messages(run)
    assert_failed(nodes, "copy_to_outside", PERMISSION)
    assert_failed(nodes, "py_write_outside", "FileNotFoundError", "Read-only file system")
    assert_failed(nodes, "py_rewrite_profile", "Read-only file system")
    # writing to /tmp succeeds, but into the sandbox's private tmpfs: the host never sees the file
    assert nodes["py_write_tmp"][0] == "success"
    assert not marker.exists()
    assert not (outside / "copied.csv").exists() and not (outside / "py_written.txt").exists()


def test_network_is_unreachable(bwrap: None, tmp_path: Path, outside: Path) -> None:
    # a server on the host's loopback: a sandbox sharing the host network could reach it
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    try:
        run, _ = run_attack("network", tmp_path, outside, {"port": port})
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    nodes = node_messages(run)
    assert_failed(nodes, "install_httpfs", PERMISSION)
    assert_failed(nodes, "load_httpfs", "Loading external extensions is disabled")
    assert_failed(nodes, "read_url", "requires the extension httpfs")
    assert_failed(nodes, "py_socket", "ConnectionRefusedError", "Network is unreachable")
    assert_failed(nodes, "py_dns", "name resolution", "gaierror")


def test_secrets_in_the_environment_are_not_visible(
    bwrap: None, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = {
        "HF_TOKEN": "hf_planted_secret",
        "OPENAI_API_KEY": "sk-planted-secret",
        "AWS_SECRET_ACCESS_KEY": "aws-planted-secret",
        "HARVEST_CANARY_SECRET": "canary-planted-secret",
    }
    for key, value in planted.items():
        monkeypatch.setenv(key, value)
    query = QueryStep("build.duckdb", "select * from main.env_secrets")
    dump = QueryStep("build.duckdb", "select source, name, value from main.py_environ", max_rows=1000)
    run, workspace = run_attack("secrets", tmp_path, outside, steps=[query, dump])
    assert run.ok, run.first_error
    row = run.steps[1].detail["rows"][0]
    assert row == ["absent", "absent", "absent", "absent"]
    seen = run.steps[2].detail["rows"]
    own = {name for source, name, _ in seen if source == "self"}
    assert own and own <= ALLOWED_ENV | SET_INSIDE_ENV, own - ALLOWED_ENV - SET_INSIDE_ENV
    assert not any(value in str(seen) for value in planted.values())
    for value in planted.values():
        assert workspace_mentions(workspace, value) == []
    home_rows = [(name, value) for source, name, value in seen if source == "home"]
    assert home_rows == [("/tmp/home", "")]  # a fresh, empty home, not the user's
    assert os.environ["HF_TOKEN"] == "hf_planted_secret"  # the parent still has it

"""Tasks from a dataset, not from our store: self-contained rows, `harvest tasks materialize` on an empty
HARVEST_HOME (offline, through --repo-mirror and the package mirror), `harvest score --task` agreeing with
the audit, and RepairEnvironment built from a dataset row.

The dataset is built by `harvest dataset build` from the eval world's dev tasks (real sandboxed
harvest of the embedded example); every command after the build runs as a user on a fresh machine would:
a subprocess with an empty HARVEST_HOME, no pins, its own HF_HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbt_harvest.harvester.gold_digest import content_digest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HARVEST = [sys.executable, "-m", "dbt_harvest"]


def _fresh_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A fresh machine: empty HARVEST_HOME and pins, its own HF_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARVEST_", "HF_"))}
    env.update(
        {
            "HARVEST_HOME": str(tmp / "fresh-home"),
            "HARVEST_PINS": str(tmp / "fresh-pins"),
            "HF_HOME": str(tmp / "fresh-hf"),
            "HF_HUB_OFFLINE": "1",
        }
    )
    env.update(extra)
    return env


def _harvest(env: dict[str, str], *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*HARVEST, *args], env=env, capture_output=True, text=True, timeout=600, cwd=env["HARVEST_HOME"] + "/.."
    )
    if ok:
        assert done.returncode == 0, f"harvest {' '.join(args)}: {done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def hub_world(dev_world, example_harvest, tmp_path_factory):
    """(dataset folder, repo mirror, package mirror, rows by id) built from the eval world's dev tasks."""
    from datasets import load_dataset

    root = tmp_path_factory.mktemp("hub-tasks")
    # `harvest dataset build`, as the user runs it, on the eval world's store
    env = _fresh_env(root, HARVEST_HOME=str(dev_world.home), HARVEST_PINS=str(dev_world.pins))
    built = subprocess.run(
        [*HARVEST, "dataset", "build", "--out", str(root / "ds"), "--split", "dev", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert json.loads(built.stdout)["splits"] == {"dev": len(dev_world.tasks)}
    # the repository, as a user's offline mirror holds it: <owner>/<name>, a plain clone
    url = dev_world.pin.url
    owner, name = url.split("://", 1)[-1].rstrip("/").split("/")[-2:]
    mirror = root / "repos"
    (mirror / owner).mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", str(example_harvest.example.project_repo), str(mirror / owner / name)],
        check=True,
        capture_output=True,
    )
    rows = {r["instance_id"]: r for r in load_dataset(str(root / "ds"), split="dev")}
    return root, mirror, example_harvest.example.mirror, rows


def test_rows_are_self_contained(hub_world, dev_world) -> None:
    root, _, _, rows = hub_world
    pin = dev_world.pin
    card = (root / "ds" / "README.md").read_text()
    for task in dev_world.tasks:
        row = rows[task.instance_id]
        assert (row["origin_url"], row["base_commit"], row["tree"], row["project_dir"]) == (
            pin.url,
            pin.commit,
            pin.tree,
            pin.project_dir,
        )
        assert (
            row["clock"] == pin.clock
            and row["database_file"] == "build.duckdb"
            and row["profile_schema"] == pin.profile_schema
        )
        assert [(p["name"], p["commit"]) for p in row["packages"]] == [
            (p.name, p.commit) for p in pin.packages
        ] and row["packages"]
        assert row["compat_patch_sha256"] == pin.compat_patch_sha256
        assert row["condition_tabs"] == list(task.grading.condition_tabs)
        assert row["condition_cols"] == [list(c) for c in task.grading.condition_cols]
        assert row["gold_file"] == f"gold/{row['gold_sha256']}.duckdb"
        assert content_digest(root / "ds" / row["gold_file"]) == row["gold_sha256"]
        assert (
            row["FAIL_TO_PASS"] == [f"duckdb_match({', '.join(task.grading.condition_tabs)})"] and row["PASS_TO_PASS"]
        )
        assert row["version"].startswith("dbt-core==") and row["environment_setup"] == "pip install " + row["version"]
        assert "graded_tables" not in row and "wrong_repair_patches" not in row
    for column in rows[dev_world.tasks[0].instance_id]:
        assert f"`{column}`" in card, f"the card does not document {column}"
    assert "SWE-bench" in card and "FAIL_TO_PASS" in card


def test_materialize_on_an_empty_home_and_score_agrees_with_the_audit(hub_world, dev_world, tmp_path: Path) -> None:
    from dbt_harvest.core.patching import apply_patch
    from dbt_harvest.eval.audit.report import write_report
    from dbt_harvest.eval.audit.rundir import RunDir
    from dbt_harvest.eval.audit.runner import AuditOptions, run_audit
    from dbt_harvest.eval.drivers.scripted import NoopDriver, OracleDriver

    root, mirror, packages, rows = hub_world
    task = dev_world.tasks[0]
    env = _fresh_env(tmp_path)
    Path(env["HARVEST_HOME"]).mkdir()
    out = tmp_path / "task"
    done = json.loads(
        _harvest(
            env,
            "tasks",
            "materialize",
            str(root / "ds"),
            task.instance_id,
            str(out),
            "--repo-mirror",
            str(mirror),
            "--package-mirror",
            str(packages),
            "--json",
        ).stdout
    )
    row = rows[task.instance_id]
    assert done["gold_sha256"] == row["gold_sha256"] == content_digest(out / "grader" / "gold.duckdb")
    assert json.loads((out / "grader" / "spec.json").read_text())["condition_tabs"] == row["condition_tabs"]
    assert not (out / "project" / ".git").exists() and not list((out / "project").rglob("*.duckdb"))
    broken_text = (out / "project" / task.file).read_text()
    # the same task as the store's: our own workspace of it holds the same broken file
    from dbt_harvest.eval.env.workspace import discard, materialize

    with dev_world.env():
        ws = materialize(task, dev_world.pins, tmp_path / "scratch")
        try:
            assert (ws.root / task.file).read_text() == broken_text
            listing = sorted(p.relative_to(ws.root).as_posix() for p in ws.root.rglob("*") if p.is_file())
        finally:
            discard(ws)
    ours = sorted(p.relative_to(out / "project").as_posix() for p in (out / "project").rglob("*") if p.is_file())
    assert set(ours) - set(listing) == {
        f"{task.project_dir.strip('./') + '/' if task.project_dir not in ('', '.') else ''}profiles.yml"
    }

    # a materialized copy must not depend on the dataset or the mirror staying there
    scores = {}
    noop_copy = tmp_path / "noop"
    subprocess.run(["cp", "-a", str(out), str(noop_copy)], check=True)
    apply_patch(out / "project", task.fix_patch)
    for name, folder in (("oracle", out), ("noop", noop_copy)):
        got = json.loads(
            _harvest(
                env, "score", "--task", f"{root / 'ds'}:{task.instance_id}", "--workspace", str(folder), "--json"
            ).stdout
        )
        scores[name] = got["official"]["score"]
    # the audit on the same submissions, from our store
    audit = {}
    for driver in (OracleDriver(), NoopDriver()):
        run = RunDir(tmp_path / f"audit-{driver.name}")
        with dev_world.env():
            run_audit(run, "dev", [task], driver, AuditOptions(workers=1), pins=dev_world.pins)
            write_report(run)
        audit[driver.name] = run.read_episode(task.instance_id)["official"]
    assert scores == audit == {"oracle": 1, "noop": 0}


def test_materialize_refuses_a_tampered_gold_and_an_unknown_id(hub_world, dev_world, tmp_path: Path) -> None:
    import shutil

    root, mirror, packages, rows = hub_world
    task = dev_world.tasks[0]
    env = _fresh_env(tmp_path)
    Path(env["HARVEST_HOME"]).mkdir()
    unknown = _harvest(env, "tasks", "materialize", str(root / "ds"), "no.such.task", str(tmp_path / "x"), ok=False)
    assert unknown.returncode == 1 and "no task 'no.such.task'" in unknown.stderr and not (tmp_path / "x").exists()
    copy = tmp_path / "ds-copy"
    shutil.copytree(root / "ds", copy)
    gold = copy / rows[task.instance_id]["gold_file"]
    gold.chmod(0o644)
    gold.write_bytes(gold.read_bytes()[:-1] + b"\x01")
    bad = _harvest(
        env,
        "tasks",
        "materialize",
        str(copy),
        task.instance_id,
        str(tmp_path / "y"),
        "--repo-mirror",
        str(mirror),
        "--package-mirror",
        str(packages),
        ok=False,
    )
    assert bad.returncode == 1 and "changed since the build" in bad.stderr and not (tmp_path / "y").exists()


def test_materialize_from_the_loopback_hub(hub_world, dev_world, tmp_path: Path, monkeypatch) -> None:
    """Published (dev, private) to the fake Hub; a fresh machine materializes by repo id and scores by it."""
    sys.path.insert(0, str(ROOT / "tests" / "corpora"))
    from fake_hub import FakeHub

    from dbt_harvest.corpora.publish import publish

    root, mirror, packages, rows = hub_world
    task = dev_world.tasks[-1]
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_TOKEN", "hf_fake_token_for_tests")
        publish(root / "ds", "acme/dbt-repair", "dev", private=True, timeout=10)
        env = _fresh_env(tmp_path, HF_ENDPOINT=hub.endpoint, HF_TOKEN="hf_fake_token_for_tests")
        env.pop("HF_HUB_OFFLINE")
        Path(env["HARVEST_HOME"]).mkdir()
        out = tmp_path / "task"
        done = json.loads(
            _harvest(
                env,
                "tasks",
                "materialize",
                "acme/dbt-repair",
                task.instance_id,
                str(out),
                "--repo-mirror",
                str(mirror),
                "--package-mirror",
                str(packages),
                "--json",
            ).stdout
        )
        assert (
            done["gold_sha256"]
            == rows[task.instance_id]["gold_sha256"]
            == content_digest(out / "grader" / "gold.duckdb")
        )
        assert (out / "project" / task.file).is_file()
        # the gold scored against itself through the row's spec: 1 (the spec and gold come from the Hub row)
        same = json.loads(
            _harvest(
                env,
                "score",
                "--task",
                f"acme/dbt-repair:{task.instance_id}",
                "--pred",
                str(out / "grader" / "gold.duckdb"),
                "--json",
            ).stdout
        )
        assert same["official"]["score"] == 1
        assert hub.unexpected == []


# ------------------------------------------------------------------ the environment from a dataset row


def _oracle_text(current: str, patch: str) -> str:
    from dbt_harvest.core.patching import apply_to_text, parse_patch

    (file_patch,) = parse_patch(patch)
    return apply_to_text(current, file_patch)


@pytest.fixture()
def fresh_home(tmp_path: Path, monkeypatch, hub_world):
    """This process as a fresh machine: empty HARVEST_HOME and pins, the package mirror for offline vendoring."""
    _, _, packages, _ = hub_world
    for name, value in _fresh_env(tmp_path).items():
        if name.startswith(("HARVEST_", "HF_")):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("HARVEST_PACKAGE_MIRROR", str(packages))
    Path(os.environ["HARVEST_HOME"]).mkdir()
    return Path(os.environ["HARVEST_HOME"])


def test_repair_environment_from_a_dataset_row(hub_world, dev_world, fresh_home: Path) -> None:
    from dbt_harvest.eval.env.environment import RepairEnvironment

    root, mirror, _, rows = hub_world
    task = dev_world.tasks[0]
    row = rows[task.instance_id]
    rewards = {}
    for name in ("oracle", "noop"):
        env = RepairEnvironment.from_dataset(str(root / "ds"), "dev", repo_mirror=mirror)
        with env:
            observation = env.reset(instance_id=task.instance_id)
            assert observation.startswith(row["problem_statement"])
            if name == "oracle":
                env.write_file(task.file, _oracle_text(env.read_file(task.file), row["patch"]))
            env.submit()
            rewards[name] = env.get_reward()
    assert rewards == {"oracle": 1.0, "noop": 0.0}
    assert not list((fresh_home / "tasks").glob("*")) if (fresh_home / "tasks").exists() else True  # no store used
    assert (fresh_home / "gold" / f"{row['gold_sha256']}.duckdb").is_file()


def test_openenv_server_oracle_one_noop_zero_concurrently(hub_world, dev_world, fresh_home: Path) -> None:
    """The OpenEnv app on 127.0.0.1 (uvicorn), two of its own clients at once, each its own session."""
    import socket
    import threading
    import time

    import uvicorn

    from dbt_harvest.eval.adapters.openenv_server import RepairAction, RepairEnvClient, make_app

    root, mirror, _, rows = hub_world
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            make_app(str(root / "ds"), "dev", repo_mirror=mirror, max_concurrent_envs=2),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    results: dict[str, object] = {}

    def play(name: str, instance_id: str) -> None:
        try:
            with RepairEnvClient(base_url=f"http://127.0.0.1:{port}", message_timeout_s=300).sync() as client:
                first = client.reset(instance_id=instance_id)
                assert first.observation.text.startswith(rows[instance_id]["problem_statement"]) and not first.done
                if name == "oracle":
                    path = rows[instance_id]["file"]
                    current = client.step(RepairAction(tool="read_file", args={"path": path})).observation.text
                    wrote = client.step(
                        RepairAction(
                            tool="write_file",
                            args={"path": path, "content": _oracle_text(current, rows[instance_id]["patch"])},
                        )
                    )
                    assert wrote.reward == 0.0 and not wrote.done
                last = client.step(RepairAction(tool="submit"))
                results[name] = (last.done, last.reward)
        except BaseException as exc:
            results[name] = exc

    started = time.perf_counter()
    try:
        players = [
            threading.Thread(target=play, args=("oracle", dev_world.tasks[0].instance_id)),
            threading.Thread(target=play, args=("noop", dev_world.tasks[1].instance_id)),
        ]
        for p in players:
            p.start()
        for p in players:
            p.join(600)
    finally:
        server.should_exit = True
        thread.join(30)
    print(f"two concurrent OpenEnv episodes: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    assert results == {"oracle": (True, 1.0), "noop": (True, 0.0)}, results


def test_a_row_is_checked_against_its_own_hashes(hub_world, dev_world, fresh_home: Path, tmp_path: Path) -> None:
    """What a Hub row cannot vouch for by a manifest: the export's tree id, the compat patch, the gold."""
    import shutil

    from dbt_harvest.core.errors import HarvestError
    from dbt_harvest.corpora.materialize import DatasetRef, MaterializeError, gold_for, row_source
    from dbt_harvest.harvester.task_tree import broken_tree

    root, mirror, _, rows = hub_world
    row = rows[dev_world.tasks[0].instance_id]
    broken_tree(row_source(row, mirror), row["broken_patch"], tmp_path / "good")  # the row as published
    with pytest.raises(HarvestError, match="tree is"):
        broken_tree(row_source({**row, "tree": "0" * 40}, mirror), row["broken_patch"], tmp_path / "bad-tree")
    with pytest.raises(HarvestError, match="compat patch does not match"):
        broken_tree(
            row_source({**row, "compat_patch_sha256": "a" * 64}, mirror), row["broken_patch"], tmp_path / "bad-compat"
        )
    copy = tmp_path / "ds"
    shutil.copytree(root / "ds", copy)
    gold = copy / row["gold_file"]
    gold.chmod(0o644)
    gold.unlink()  # another gold in its place: other tables under the row's gold name
    import duckdb

    con = duckdb.connect(str(gold))
    con.execute("CREATE TABLE swapped AS SELECT 1 AS x")
    con.close()
    with pytest.raises(MaterializeError, match="is not gold"):
        gold_for(DatasetRef("copy", copy), row)
    assert not (fresh_home / "gold" / f"{row['gold_sha256']}.duckdb").exists()  # nothing unverified installed
    with pytest.raises(MaterializeError, match="holds no copy"):
        row_source(row, tmp_path / "empty-mirror")


def test_harvest_serve_openenv_serves_a_reset(hub_world, dev_world, tmp_path: Path) -> None:
    """`harvest serve openenv` as a subprocess on a fresh machine; OpenEnv's client resets a task through it."""
    import socket
    import time
    import urllib.request

    from dbt_harvest.eval.adapters.openenv_server import RepairAction, RepairEnvClient

    root, mirror, packages, rows = hub_world
    env = _fresh_env(tmp_path)
    Path(env["HARVEST_HOME"]).mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            *HARVEST,
            "serve",
            "openenv",
            str(root / "ds"),
            "--split",
            "dev",
            "--port",
            str(port),
            "--repo-mirror",
            str(mirror),
            "--package-mirror",
            str(packages),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                break
            except OSError:
                assert server.poll() is None, server.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.5)
        task = dev_world.tasks[0]
        with RepairEnvClient(base_url=f"http://127.0.0.1:{port}", message_timeout_s=300).sync() as client:
            first = client.reset(instance_id=task.instance_id)
            assert first.observation.text.startswith(rows[task.instance_id]["problem_statement"])
            listing = client.step(RepairAction(tool="list_files", args={"path": "models"}))
            assert task.file in listing.observation.text and not listing.done and listing.reward == 0.0
    finally:
        server.terminate()
        server.wait(30)


class _ScriptedSeat:
    """The model's seat in a verifiers episode, played by a script: each turn gets the engine's payload (JSON:
    observation + action schema) and replies with the next action as JSON, as a model would."""

    def __init__(self, script) -> None:
        self.script, self.rewards, self.payloads = script, {}, []

    def interaction(self, task):
        import contextlib
        from types import SimpleNamespace

        seat = self

        class Interaction:
            trace = SimpleNamespace(
                record_reward=lambda name, value: seat.rewards.__setitem__(name, value),
                stop=lambda reason: seat.rewards.__setitem__("stopped", reason),
            )

            async def turn(self, payload: str):
                seat.payloads.append(json.loads(payload))
                reply = json.dumps(seat.script(seat.payloads[-1]))
                return SimpleNamespace(terminated=False, last_reply=reply)

        @contextlib.asynccontextmanager
        async def opened():
            yield Interaction()

        return opened()


def test_verifiers_load_environment_oracle_one_noop_zero(hub_world, dev_world, fresh_home: Path) -> None:
    """verifiers' own OpenEnv engine (`OpenEnvEnv.run`) drives our server; the model's seat is a script."""
    import asyncio
    import socket
    import threading
    import time
    from types import SimpleNamespace

    import uvicorn

    from dbt_harvest.eval.adapters.openenv_server import make_app
    from dbt_harvest.eval.adapters.verifiers_env import load_environment

    root, mirror, _, rows = hub_world
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            make_app(str(root / "ds"), "dev", repo_mirror=mirror, max_concurrent_envs=2),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        env = load_environment(str(root / "ds"), "dev", base_url=f"http://127.0.0.1:{port}")
        tasks = {t.data.reset["instance_id"]: t for t in env.taskset}
        assert sorted(tasks) == sorted(rows)
        task = dev_world.tasks[0]
        row = rows[task.instance_id]

        def oracle(payload: dict) -> dict:
            observation = payload["observation"]
            assert payload["action_schema"]["title"] == "RepairAction"
            if not observation.get("tool"):
                assert observation["text"].startswith(row["problem_statement"])
                return {"tool": "read_file", "args": {"path": row["file"]}}
            if observation["tool"] == "read_file":
                return {
                    "tool": "write_file",
                    "args": {"path": row["file"], "content": _oracle_text(observation["text"], row["patch"])},
                }
            return {"tool": "submit", "args": {}}

        seats = {"oracle": _ScriptedSeat(oracle), "noop": _ScriptedSeat(lambda payload: {"tool": "submit", "args": {}})}
        for seat in seats.values():
            asyncio.run(env.run(tasks[task.instance_id], SimpleNamespace(player=seat)))
    finally:
        server.should_exit = True
        thread.join(30)
    assert {name: seat.rewards for name, seat in seats.items()} == {
        "oracle": {"openenv_reward": 1.0},
        "noop": {"openenv_reward": 0.0},
    }
    assert [p["observation"].get("tool") for p in seats["oracle"].payloads] == ["", "read_file", "write_file"]

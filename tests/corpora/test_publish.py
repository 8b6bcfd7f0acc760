"""`harvest publish` against a real HTTP server on 127.0.0.1: files arrive byte-identical; refusals hold."""

from __future__ import annotations

import hashlib
import json
import socket
import time

import pytest
from click.testing import CliRunner
from fake_hub import FakeHub
from test_dataset import _populate

from dbt_harvest.cli import main
from dbt_harvest.core import atomic
from dbt_harvest.corpora.build import build_dataset
from dbt_harvest.corpora.errors import DatasetBuildError, PublishError
from dbt_harvest.corpora.publish import publish


@pytest.fixture
def built(world, make, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token_for_tests")
    _populate(world, make)
    out = world.root / "dist" / "ds"
    build_dataset(out, home=world.home, pins=world.pins)
    return out


def test_upload_arrives_byte_identical(built, monkeypatch):
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = publish(built, "acme/dbt-repair", "train", timeout=10)
    assert hub.unexpected == []
    assert hub.repos["acme/dbt-repair"]["type"] == "dataset"
    received = hub.files["acme/dbt-repair"]
    assert sorted(received) == sorted(f.path for f in result.files)
    assert any(p.startswith("gold/") for p in received) and "README.md" in received
    for f in result.files:
        assert len(received[f.path]) == f.size
        assert hashlib.sha256(received[f.path]).hexdigest() == f.sha256  # byte-identical to what was staged
        if f.path != "README.md":
            assert received[f.path] == (built / f.path).read_bytes()
    assert not any("dev-" in p for p in received)
    card = received["README.md"].decode()
    assert "path: data/train-" in card and "data/dev-" not in card and "| dev |" not in card
    # the train split's corpus report and its chart travel with it; the dev split's stay behind
    assert "(corpus_report-train.png)" in card and "corpus_report-train.png" in received
    assert "corpus_report-dev.png" not in received and "### dev" not in card
    assert result.commit_url.endswith(f"/commit/{hub.commits['acme/dbt-repair'][-1]}")
    assert hub.validated == [card]  # the Hub's YAML check saw the card that arrived


def test_dry_run_lists_exactly_what_would_go_and_contacts_nothing(built, monkeypatch):
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = CliRunner().invoke(
            main, ["publish", str(built), "--repo-id", "acme/x", "--split", "train", "--dry-run", "--json"]
        )
        assert result.exit_code == 0, result.output
        assert hub.calls == []
        data = json.loads(result.output)
        planned = {f["path"]: f for f in data["files"]}
        real = publish(built, "acme/x", "train")
    assert set(planned) == set(hub.files["acme/x"])
    for path, blob in hub.files["acme/x"].items():
        assert planned[path]["size"] == len(blob)
        assert planned[path]["sha256"] == hashlib.sha256(blob).hexdigest()
    assert data["dry_run"] is True and real.dry_run is False


def test_refusals(built, world, make):
    with pytest.raises(PublishError, match="never uploaded"):
        publish(built, "acme/x", "test", private=True, dry_run=True)
    with pytest.raises(PublishError, match="--private"):
        publish(built, "acme/x", "dev", dry_run=True)
    assert {f.path.split("-")[0] for f in publish(built, "acme/x", "dev", private=True, dry_run=True).files} >= {
        "data/dev"
    }
    private = world.root / "private"
    build_dataset(private, home=world.home, pins=world.pins, public=False)
    with pytest.raises(PublishError, match="private build"):
        publish(private, "acme/x", "train", dry_run=True)
    result = CliRunner().invoke(main, ["publish", str(built), "--repo-id", "acme/x", "--split", "test"])
    assert result.exit_code == 1 and result.output.startswith("error:")


def test_tampered_folder_is_not_published(built):
    shard = sorted((built / "data").glob("train-*"))[0]
    shard.write_bytes(shard.read_bytes()[:-1])
    with pytest.raises(DatasetBuildError, match="changed since the build"):
        publish(built, "acme/x", "train", dry_run=True)


def test_dev_private_upload(built, monkeypatch):
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        publish(built, "acme/dbt-repair-dev", "dev", private=True, timeout=10)
    assert (
        hub.repos["acme/dbt-repair-dev"].get("visibility") == "private"
        or hub.repos["acme/dbt-repair-dev"].get("private") is True
    )
    assert any(p.startswith("data/dev-") for p in hub.files["acme/dbt-repair-dev"])


def test_offline_is_one_honest_line(built, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    result = CliRunner().invoke(
        main, ["publish", str(built), "--repo-id", "acme/x", "--split", "train", "--timeout", "5"]
    )
    assert result.exit_code == 1
    assert result.output.startswith("error: could not reach the Hub") and "offline" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert time.monotonic() - start < 60
    assert atomic.sha256_file(built / "build.json")  # the folder is untouched


@pytest.mark.timeout(300)  # the failure this guards against is a hang
def test_a_hub_that_never_answers_times_out_in_one_line(built, monkeypatch):
    """A server that takes the connection and never replies: without a per-request timeout the upload would
    hang for ever (huggingface_hub passes ``timeout=None`` on its calls); with --timeout 2 it is one line."""
    from huggingface_hub import get_session

    hooks_before = {k: list(v) for k, v in get_session().event_hooks.items()}
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        start = time.monotonic()
        result = CliRunner().invoke(
            main, ["publish", str(built), "--repo-id", "acme/x", "--split", "train", "--timeout", "2"]
        )
        waited = time.monotonic() - start
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    assert waited < 120, waited  # a hang guard, not a speed target: retries may add a few timeouts
    assert {k: list(v) for k, v in get_session().event_hooks.items()} == hooks_before  # given back as it was


def _load_from_hub(hub: FakeHub, repo_id: str, tmp_path) -> dict[str, list[str]]:
    """`load_dataset(repo_id)` as a user runs it, in a fresh process pointed at the fake Hub: split -> ids."""
    import os
    import subprocess
    import sys

    script = (
        "import json, sys; from datasets import load_dataset; ds = load_dataset(sys.argv[1]); "
        "print(json.dumps({s: sorted(ds[s]['instance_id']) for s in ds}))"
    )
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(tmp_path / "hf-user"),
        "HF_TOKEN": "hf_fake_token_for_tests",
    }
    done = subprocess.run([sys.executable, "-c", script, repo_id], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_private_upload_refuses_a_repo_that_exists_and_is_public(built, monkeypatch):
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        hub.make_repo("acme/dbt-repair", private=False)
        result = CliRunner().invoke(
            main, ["publish", str(built), "--repo-id", "acme/dbt-repair", "--split", "dev", "--private"]
        )
        assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
        assert (
            "exists and is public" in result.output
            and "make it private" in result.output
            and "--repo-id" in result.output
        )
        assert hub.files["acme/dbt-repair"] == {} and hub.repos["acme/dbt-repair"]["private"] is False
        hub.make_repo("acme/dbt-repair-dev", private=True)  # an existing private one is fine
        publish(built, "acme/dbt-repair-dev", "dev", private=True, timeout=10)
    assert any(p.startswith("data/dev-") for p in hub.files["acme/dbt-repair-dev"]) and hub.unexpected == []


def test_publishing_one_split_keeps_the_other_listed_and_loadable(built, world, make, monkeypatch, tmp_path):
    from corpora_world import make_task

    from dbt_harvest.corpora.ledger import group_of
    from dbt_harvest.corpora.store import store_task

    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        dev = publish(built, "acme/dbt-repair", "dev", private=True, timeout=10)
        train = publish(built, "acme/dbt-repair", "train", timeout=10)  # into the private repo: it stays private
        assert (dev.card_splits, train.card_splits, train.repo_private) == (("dev",), ("train", "dev"), True)
        card = hub.files["acme/dbt-repair"]["README.md"].decode()
        assert "| train | 4 |" in card and "| dev | 2 |" in card and hub.repos["acme/dbt-repair"]["private"] is True
        loaded = _load_from_hub(hub, "acme/dbt-repair", tmp_path / "first")
        assert {s: len(ids) for s, ids in loaded.items()} == {"train": 4, "dev": 2}
        # a rebuild with one more training task: its train replaces the old one, dev (another build now) stays
        trainrepo = next(p for p in world.repos.values() if p.id.startswith("r__trainrepo"))
        extra = make_task(trainrepo, "train", group_of(trainrepo.id, world.pins), 77)
        store_task(extra, world.home, world.pins)
        rebuilt = world.root / "dist" / "ds2"
        build_dataset(rebuilt, home=world.home, pins=world.pins, splits=["train"])
        again = publish(rebuilt, "acme/dbt-repair", "train", timeout=10)
        assert again.card_splits == ("train", "dev")
        shards = [p for p in hub.files["acme/dbt-repair"] if p.startswith("data/train-")]
        assert shards and all(p in {f.path for f in again.files} for p in shards)  # the old train shards are gone
        loaded = _load_from_hub(hub, "acme/dbt-repair", tmp_path / "second")
        assert len(loaded["train"]) == 5 and extra.instance_id in loaded["train"] and len(loaded["dev"]) == 2
    assert hub.unexpected == []


def test_the_fake_hub_answers_a_missing_file_to_head_without_a_body():
    """A HEAD answer that carried a body opened the next answer on the same connection with it, so the
    client saw 'illegal status line' and retried (load_dataset of a repo id, after its HEAD of a file the
    repository does not have)."""
    import http.client

    with FakeHub() as hub:
        hub.make_repo("acme/x", files={"README.md": b"hello"})
        connection = http.client.HTTPConnection(hub.endpoint.removeprefix("http://"), timeout=10)
        connection.request("HEAD", "/datasets/acme/x/resolve/main/missing.py")
        missing = connection.getresponse()
        missing.read()
        connection.request("GET", "/datasets/acme/x/resolve/main/README.md")
        found = connection.getresponse()
        assert (missing.status, found.status, found.read()) == (404, 200, b"hello")
        connection.close()

"""`harvest publish` against a real HTTP server on 127.0.0.1: files arrive byte-identical; refusals hold."""

from __future__ import annotations

import hashlib
import json
import socket
import time

import pytest
from click.testing import CliRunner

from corpora.build import build_dataset
from corpora.errors import DatasetBuildError, PublishError
from corpora.publish import publish
from fake_hub import FakeHub
from core import atomic
from cli import main
from test_dataset import _populate


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
    assert "data/train-*" in card and "data/dev-*" not in card and "| dev |" not in card
    assert result.commit_url.endswith("/commit/abc")
    assert hub.validated == [card]  # the Hub's YAML check saw the card that arrived


def test_dry_run_lists_exactly_what_would_go_and_contacts_nothing(built, monkeypatch):
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        result = CliRunner().invoke(main, ["publish", str(built), "--repo-id", "acme/x", "--split", "train", "--dry-run", "--json"])
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
    assert {f.path.split("-")[0] for f in publish(built, "acme/x", "dev", private=True, dry_run=True).files} >= {"data/dev"}
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
    assert hub.repos["acme/dbt-repair-dev"].get("visibility") == "private" or hub.repos["acme/dbt-repair-dev"].get("private") is True
    assert any(p.startswith("data/dev-") for p in hub.files["acme/dbt-repair-dev"])


def test_offline_is_one_honest_line(built, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    result = CliRunner().invoke(main, ["publish", str(built), "--repo-id", "acme/x", "--split", "train", "--timeout", "5"])
    assert result.exit_code == 1
    assert result.output.startswith("error: could not reach the Hub") and "offline" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert time.monotonic() - start < 60
    assert atomic.sha256_file(built / "build.json")  # the folder is untouched

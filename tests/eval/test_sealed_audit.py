"""The sealed test split: only `harvest audit --split test --recipe M` reads it, M must be frozen with hashes
that check out, the unseal and the result are recorded in pins/, and a second audit of the recipe is refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main

pytestmark = pytest.mark.slow


def _manifest(folder: Path, recipe: str, frozen: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / "adapter.bin"
    weights.write_bytes(b"weights of " + recipe.encode())
    path = folder / "manifest.json"
    path.write_text(json.dumps({"recipe": recipe, "frozen": frozen,
                                "hashes": {"adapter.bin": hashlib.sha256(weights.read_bytes()).hexdigest()}}))
    return path


def test_sealed_test_audit_once_per_frozen_recipe(test_world, tmp_path: Path) -> None:  # noqa: ANN001
    from corpora.errors import FirewallError
    from corpora.store import load_tasks

    runner = CliRunner()

    def audit(manifest: Path, name: str):  # noqa: ANN202
        with test_world.env():
            return runner.invoke(main, ["audit", "--split", "test", "--driver", "noop", "--recipe", str(manifest),
                                        "--run-dir", str(tmp_path / name), "--json"])

    # training paths cannot read it, nor can anyone without the audit's token
    for purpose in ("train", "eval"):
        with pytest.raises(FirewallError):
            load_tasks("test", test_world.home, test_world.pins, purpose=purpose)
    # a recipe that is not frozen, or whose files changed, is refused before anything is read
    assert "not frozen" in audit(_manifest(tmp_path / "draft", "draft", frozen=False), "r0").output
    changed = _manifest(tmp_path / "changed", "changed")
    (changed.parent / "adapter.bin").write_bytes(b"retrained after freezing")
    assert "changed" in audit(changed, "r1").output
    assert not (test_world.pins / "_unseals.jsonl").exists()

    manifest = _manifest(tmp_path / "sft-7", "sft-7")
    result = audit(manifest, "r2")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert (summary["split"], summary["n"], summary["official"]) == ("test", 1, 0)
    assert summary["sealed"]["recipe"] == "sft-7"
    unseals = [json.loads(l) for l in (test_world.pins / "_unseals.jsonl").read_text().splitlines()]
    results = [json.loads(l) for l in (test_world.pins / "_test_audits.jsonl").read_text().splitlines()]
    assert [u["recipe"] for u in unseals] == ["sft-7"]
    assert len(results) == 1 and results[0]["recipe"] == "sft-7" and results[0]["n"] == 1
    assert results[0]["task_set_sha256"] == summary["task_set_sha256"] and results[0]["unseal_commitment"] == unseals[0]["commitment"]

    again = audit(manifest, "r3")
    assert again.exit_code == 1 and "already" in again.output
    resumed = audit(manifest, "r2")  # the finished run folder cannot be replayed either
    assert resumed.exit_code == 1 and "already" in resumed.output
    assert len((test_world.pins / "_test_audits.jsonl").read_text().splitlines()) == 1

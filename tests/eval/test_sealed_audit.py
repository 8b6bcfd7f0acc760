"""The sealed test split: only `harvest audit --split test --recipe RUN` reads it, RUN must be a run folder frozen
by `harvest train freeze` whose manifest, adapter and config still verify, the unseal and the result are recorded
in pins/, and a second audit of the recipe is refused. (The same with a really trained recipe, through the
installed `harvest` command: tests/train/test_sealed_chain.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.corpora.recipe import ADAPTER_DIR, MANIFEST_NAME
from tests.recipes import finished_run, frozen_run

pytestmark = pytest.mark.slow


def test_sealed_test_audit_once_per_frozen_recipe(test_world, tmp_path: Path) -> None:
    from dbt_harvest.corpora.errors import FirewallError
    from dbt_harvest.corpora.store import load_tasks

    runner = CliRunner()

    def audit(recipe: Path, name: str):
        with test_world.env():
            return runner.invoke(
                main,
                [
                    "audit",
                    "--split",
                    "test",
                    "--driver",
                    "noop",
                    "--recipe",
                    str(recipe),
                    "--run-dir",
                    str(tmp_path / name),
                    "--json",
                ],
            )

    # training paths cannot read it, nor can anyone without the audit's token
    for purpose in ("train", "eval"):
        with pytest.raises(FirewallError):
            load_tasks("test", test_world.home, test_world.pins, purpose=purpose)
    # a recipe that is not frozen, or whose files changed, is refused before anything is read
    assert "not frozen" in audit(finished_run(tmp_path, "draft"), "r0").output
    changed = frozen_run(tmp_path, "changed")
    (changed / ADAPTER_DIR / "adapter_model.safetensors").write_bytes(b"retrained after freezing")
    assert "adapter changed" in audit(changed, "r1").output
    assert not (test_world.pins / "_unseals.jsonl").exists()

    recipe = frozen_run(tmp_path, "sft-7")
    result = audit(recipe / MANIFEST_NAME, "r2")  # the manifest's path names its run folder too
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert (summary["split"], summary["n"], summary["official"]) == ("test", 1, 0)
    assert summary["sealed"]["recipe"].startswith("sft-7@")
    unseals = [json.loads(line) for line in (test_world.pins / "_unseals.jsonl").read_text().splitlines()]
    results = [json.loads(line) for line in (test_world.pins / "_test_audits.jsonl").read_text().splitlines()]
    assert [u["recipe"] for u in unseals] == [summary["sealed"]["recipe"]]
    assert len(results) == 1 and results[0]["recipe"] == summary["sealed"]["recipe"] and results[0]["n"] == 1
    assert (
        results[0]["task_set_sha256"] == summary["task_set_sha256"]
        and results[0]["unseal_commitment"] == unseals[0]["commitment"]
    )

    again = audit(recipe, "r3")
    assert again.exit_code == 1 and "already" in again.output
    resumed = audit(recipe, "r2")  # the finished run folder cannot be replayed either
    assert resumed.exit_code == 1 and "already" in resumed.output
    assert len((test_world.pins / "_test_audits.jsonl").read_text().splitlines()) == 1

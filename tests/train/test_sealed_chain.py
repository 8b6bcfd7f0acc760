"""The sealed test audit end to end through the installed `harvest` command, on real minted tasks:

`harvest train sft` (tiny model, no --json) -> `harvest train freeze RUN` -> `harvest audit --split test
--recipe RUN` audits every sealed task once (k/N over all of them) with the recipe's own model, and a
second audit of the recipe is refused in one line.

The world: the session's example minted into the train split (``minted_example``, tests/conftest.py),
copied, plus the original ``clock`` fixture project pinned, reserved for test and minted into the sealed
store here, all through the CLI. Both repositories are pinned from local bare git repositories, so the
training step also finds its projects through the pins (not by a repository name).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from train_world import CONFIGS, write_config

pytestmark = pytest.mark.slow


def harvest(env: dict[str, str], *args: str | Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """Run the installed `harvest` console script (the real entry point) in ``env``."""
    exe = shutil.which("harvest")
    assert exe, "harvest must be on PATH (pip install -e .)"
    return subprocess.run([exe, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"{proc.args}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def chain_world(minted_example, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], list[str]]:
    """(root, the env that points harvest at it, the sealed task file names)."""
    from tests.fixtures import fixture_repo

    root = tmp_path_factory.mktemp("sealed-chain")
    shutil.copytree(minted_example.home, root / "home", symlinks=True)
    shutil.copytree(minted_example.pins, root / "pins")
    env = {
        **os.environ,
        "HARVEST_HOME": str(root / "home"),
        "HARVEST_PINS": str(root / "pins"),
        "HF_HOME": str(root / "hf"),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("HARVEST_MANIFEST_KEY", None)
    clock = fixture_repo("clock", root / "clock")
    pin = json.loads(ok(harvest(env, "add", f"{clock.path}@{clock.head}", "--json")).stdout)["id"]
    # the copied ledger reserved the example for train; naming the new repository for test redraws the
    # reservation (--force; the example stays in train and the ledger keeps the history)
    ok(harvest(env, "split", "assign", "--force", "--test-group", pin))
    ok(harvest(env, "mint", pin, "--max-per-model", "1"))
    sealed = sorted(p.name for p in (root / "home" / "sealed" / "test").glob("*.json"))
    assert sealed and json.loads((root / "pins" / "_sealed.json").read_text())["count"] == len(sealed)
    return root, env, sealed


def test_train_freeze_then_audit_the_sealed_split_once(chain_world, tmp_path: Path) -> None:
    root, env, sealed = chain_world
    raw = tomllib.loads((CONFIGS / "sft-tiny.toml").read_text())
    raw["run"].update(name="sft-chain", output_dir=str(tmp_path / "runs"))
    raw["data"].update(max_rows=2)  # tasks and repos unset: the train split of HARVEST_HOME, found through its pins
    config = write_config(raw, tmp_path / "sft-chain.toml")
    run_dir = tmp_path / "runs" / "sft-chain"

    trained = ok(harvest(env, "train", "sft", "--config", config))
    assert trained.stdout.splitlines()[0] == f"run: {run_dir}"
    assert trained.stdout.splitlines()[-1] == "manifest: sha256 signed; steps 2"

    frozen = ok(harvest(env, "train", "freeze", run_dir))
    assert frozen.stdout.startswith(f"frozen: {run_dir} as recipe sft-chain@")
    recipe = json.loads((run_dir / "FROZEN.json").read_text())["recipe"]

    audited = ok(
        harvest(
            env,
            "audit",
            "--split",
            "test",
            "--recipe",
            run_dir,
            "--run-dir",
            tmp_path / "audit",
            "--max-turns",
            "2",
            "--max-new-tokens",
            "8",
            "--json",
        )
    )
    summary = json.loads(audited.stdout.strip().splitlines()[-1])
    n = len(sealed)
    assert (summary["split"], summary["n"]) == ("test", n) and 0 <= summary["official"] <= n
    assert sum(summary["ladder"].values()) == n and not summary["missing"]
    assert summary["sealed"]["recipe"] == recipe
    # the recipe's own model played: its base from the run folder, its adapter
    driver = json.loads((tmp_path / "audit" / "run.json").read_text())["driver"]
    assert (driver["name"], driver["model"], driver["adapter"]) == (
        "hf",
        str(run_dir / "base-tiny"),
        str(run_dir / "adapter"),
    )
    assert len(list((tmp_path / "audit" / "episodes").glob("*.json"))) == n  # every sealed task, once
    pins = root / "pins"
    unseals = [json.loads(line) for line in (pins / "_unseals.jsonl").read_text().splitlines()]
    results = [json.loads(line) for line in (pins / "_test_audits.jsonl").read_text().splitlines()]
    assert [u["recipe"] for u in unseals] == [recipe] and [r["recipe"] for r in results] == [recipe]
    assert (results[0]["n"], results[0]["official"]) == (n, summary["official"])

    again = harvest(
        env, "audit", "--split", "test", "--recipe", run_dir, "--driver", "noop", "--run-dir", tmp_path / "again"
    )
    assert again.returncode == 1
    assert (
        len(again.stderr.strip().splitlines()) == 1 and again.stderr.startswith("error: ") and "already" in again.stderr
    )
    assert not (tmp_path / "again").exists()
    assert len((pins / "_test_audits.jsonl").read_text().splitlines()) == 1
    assert len((pins / "_unseals.jsonl").read_text().splitlines()) == 1


def test_the_experiment_compares_base_and_trained_on_the_sealed_split_once_per_arm(chain_world, tmp_path: Path) -> None:
    """`harvest experiment` end to end in the default run (the e2e chain adds dev audits, the gates, GRPO and a
    kill after training): SFT, freeze, the sealed split audited once by each arm, compared task by task; run
    again, every step is kept and the report is the same."""
    import tomli_w

    source, _, sealed = chain_world
    root = tmp_path / "world"  # a copy: this recipe's sealed audits stay out of the other test's ledger
    shutil.copytree(source, root, symlinks=True)
    env = {
        **os.environ,
        "HARVEST_HOME": str(root / "home"),
        "HARVEST_PINS": str(root / "pins"),
        "HF_HOME": str(root / "hf"),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("HARVEST_MANIFEST_KEY", None)
    raw = tomllib.loads((CONFIGS / "sft-tiny.toml").read_text())
    raw["run"].update(name="sft-exp")  # the experiment writes it under its own folder
    raw["data"].update(max_rows=2)
    raw["train"].update(max_steps=1)
    write_config(raw, tmp_path / "sft.toml")
    recipe = tmp_path / "experiment.toml"
    recipe.write_text(
        tomli_w.dumps(
            {
                "experiment": {
                    "name": "sealed-exp",
                    "claim": "the protocol compares base and trained on the sealed split",
                    "output_dir": str(tmp_path / "experiments"),
                    "gate": False,
                    "dev": False,
                },
                "train": {"sft": "sft.toml"},
                "audit": {"driver": "hf", "workers": 1, "max_turns": 2, "max_new_tokens": 8},
            }
        )
    )

    # the world's sealed split is a handful of tasks: the power step refuses before training or unsealing
    unseals = root / "pins" / "_unseals.jsonl"
    unsealed_before = unseals.read_text() if unseals.exists() else ""
    refused = harvest(env, "experiment", recipe, "--json")
    assert refused.returncode == 1 and refused.stdout == "", refused.stderr[-2000:]
    assert "error: the sealed split is underpowered: minimum detectable effect on" in refused.stderr
    assert "--allow-underpowered" in refused.stderr.splitlines()[-1]
    assert not (tmp_path / "experiments" / "sealed-exp" / "runs").exists()  # no training started
    assert (unseals.read_text() if unseals.exists() else "") == unsealed_before  # nothing unsealed

    first = ok(harvest(env, "experiment", recipe, "--allow-underpowered", "--json"))
    report = json.loads(first.stdout)
    assert report["power"]["n"] == len(sealed) and report["power"]["underpowered"] is True
    assert report["power"]["base_rate_source"].startswith("assumed")  # dev = false: no dev-base pass rate
    assert "**This result is underpowered**" in (tmp_path / "experiments" / "sealed-exp" / "report.md").read_text()
    exp = report["sealed"]
    assert exp["base"]["n"] == exp["trained"]["n"] == exp["n"] == len(sealed)
    assert [t["instance_id"] for t in exp["tasks"]] == sorted(t["instance_id"] for t in exp["tasks"])
    assert len(exp["tasks"]) == len(sealed) and exp["ci_low"] <= exp["difference"] <= exp["ci_high"]
    assert report["recipe"].startswith("sft-exp@")
    for name in ("report.md", "report.json", "report.png"):
        assert (tmp_path / "experiments" / "sealed-exp" / name).stat().st_size > 0
    ledger = [json.loads(line) for line in (root / "pins" / "_test_audits.jsonl").read_text().splitlines()]
    assert sorted(e.get("arm", "recipe") for e in ledger if e["recipe"] == report["recipe"]) == ["base", "recipe"]

    again = ok(harvest(env, "experiment", recipe, "--json"))
    assert "sealed-base: done before, kept" in again.stderr and "sft: done before, kept" in again.stderr
    assert "power: done before, kept" in again.stderr  # allowed once, recorded: a rerun needs no flag
    assert json.loads(again.stdout)["sealed"] == exp
    assert len((root / "pins" / "_test_audits.jsonl").read_text().splitlines()) == len(ledger)

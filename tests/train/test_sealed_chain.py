"""The sealed test audit end to end through the installed `harvest` command, on real minted tasks:

`harvest train sft` (tiny model, no --json) -> `harvest train freeze RUN` -> `harvest audit --split test
--recipe RUN` audits every sealed task once (k/N over all of them) with the recipe's own model, and a
second audit of the recipe is refused in one line.

The world: the session's example minted into the train split (``minted_example``, tests/conftest.py),
copied, plus the original ``clock`` fixture project pinned, reserved for test and minted into the sealed
store here, all through the CLI. Both repositories are pinned from local bare git repositories, so the
training step also finds its projects through the pins (not by a repository name).

`harvest experiment` runs here too, with its Spider 2.0-DBT leg: the world's train tasks exported in
Spider2's layout (`harvest export spider2`), two of them standing in for the benchmark's sealed part
(tests/e2e/spider2_as_sealed.py: an export of our own tasks has no sealed part), imported (`harvest spider2
import`), and named by the recipe.
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

from tests.e2e.spider2_as_sealed import as_sealed

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


#: exported instances standing in for Spider2's sealed part (the rest of its 48 are absent: they count 0)
SPIDER2_PLAYED = 2


def spider2_checkout(env: dict[str, str], folder: Path) -> tuple[Path, dict[str, str]]:
    """The world's train tasks exported in Spider2's layout, SPIDER2_PLAYED of them under sealed ids of the
    committed split, imported; -> (the checkout, exported id -> sealed id)."""
    export = folder / "spider2-export"
    exported = json.loads(ok(harvest(env, "export", "spider2", "--split", "train", export, "--json")).stdout)
    assert len(exported["exported"]) >= SPIDER2_PLAYED, exported
    names = as_sealed(export, folder / "spider2-dbt", SPIDER2_PLAYED)
    imported = json.loads(ok(harvest(env, "spider2", "import", folder / "spider2-dbt", "--json")).stdout)
    assert imported["benchmark"] is True
    assert imported["parts"]["sealed"] == {"instances": 48, "playable": SPIDER2_PLAYED}, imported["parts"]
    return folder / "spider2-dbt", names


def check_spider2_leg(env: dict[str, str], report: dict, checkout: Path, names: dict[str, str], pins: Path) -> None:
    """Both arms audited Spider2's sealed part once, over all 48 instances, the absent ones named and counted
    0; the evaluate.py line each arm reports is what `harvest score --spider2` computes from the databases
    it kept; the ledger holds one start and one result per arm; the report says all of it."""
    from dbt_harvest.eval.spider2.split import committed

    sealed, played = committed().sealed, set(names.values())
    absent = sorted(set(sealed) - played)
    part = report["spider2"]
    assert part["checkout"] == str(checkout.resolve()) and part["base"]["n"] == part["trained"]["n"] == part["n"] == 48
    for arm in ("base", "trained"):
        result = part[arm]
        assert 0 <= result["official"] <= SPIDER2_PLAYED and result["submitted"] <= SPIDER2_PLAYED
        assert [u["instance_id"] for u in result["unplayable"]] == absent
        assert all("not in this checkout's metadata" in u["reason"] for u in result["unplayable"])
        scored = json.loads(
            ok(
                harvest(
                    env,
                    "score",
                    "--spider2",
                    "--results",
                    result["results_dir"],
                    "--gold",
                    checkout / "evaluation_suite" / "gold",
                    "--json",
                )
            ).stdout
        )
        evaluate = result["evaluate_py"]
        assert (evaluate["line"], evaluate["submitted"], evaluate["stops"]) == (
            scored["official_line"],
            scored["submitted"],
            scored["official_crash"],
        )
        assert evaluate["says"].startswith("evaluate.py prints: " if evaluate["line"] else "evaluate.py stops")
    assert [(u["instance_id"], u["arms"]) for u in part["unplayable"]] == [(i, ["base", "trained"]) for i in absent]
    assert len(part["tasks"]) == 48 and part["ci_low"] <= part["difference"] <= part["ci_high"]
    folder = Path(report["folder"])
    assert (folder / "compare-spider2" / "compare.json").is_file()
    text = (folder / "report.md").read_text()
    assert "## Spider 2.0-DBT, sealed part (each arm audited once)" in text
    assert f"{len(absent)} instance(s) could not be played; each counts 0" in text
    assert all(f"- `{i}` (base, trained): " in text for i in absent)
    assert part["base"]["evaluate_py"]["says"] in text and part["trained"]["evaluate_py"]["says"] in text
    ledger = [json.loads(line) for line in (pins / "_spider2_audits.jsonl").read_text().splitlines()]
    assert [(e["event"], e["arm"]) for e in ledger if e["recipe"] == report["recipe"]] == [
        ("start", "recipe"),
        ("result", "recipe"),
        ("start", "base"),
        ("result", "base"),
    ]
    assert [e["official"] for e in ledger if e["event"] == "result"] == [
        part["trained"]["official"],
        part["base"]["official"],
    ]


def test_the_experiment_compares_base_and_trained_on_the_sealed_split_once_per_arm(chain_world, tmp_path: Path) -> None:
    """`harvest experiment` end to end in the default run (the e2e chain adds dev audits, the gates, GRPO and a
    kill after training): SFT, freeze, the sealed split audited once by each arm, Spider2's sealed part too
    (a stand-in made from an export), compared task by task; run again, every step is kept and the report
    is the same; a Spider2 audit the ledger holds is claimed by the experiment whose run folder it is, and a
    direct second sealed Spider2 audit of the recipe is refused."""
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
    checkout, names = spider2_checkout(env, tmp_path)
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
                "audit": {
                    "driver": "hf",
                    "workers": 1,
                    "max_turns": 2,
                    "max_new_tokens": 8,
                    "spider2": "spider2-dbt",  # relative to the recipe
                },
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
    check_spider2_leg(env, report, checkout, names, root / "pins")
    spider2_ledger = (root / "pins" / "_spider2_audits.jsonl").read_text()

    again = ok(harvest(env, "experiment", recipe, "--json"))
    assert "sealed-base: done before, kept" in again.stderr and "sft: done before, kept" in again.stderr
    assert "spider2-trained: done before, kept" in again.stderr and "spider2-base: done before, kept" in again.stderr
    assert "power: done before, kept" in again.stderr  # allowed once, recorded: a rerun needs no flag
    assert json.loads(again.stdout)["sealed"] == exp and json.loads(again.stdout)["spider2"] == report["spider2"]
    assert len((root / "pins" / "_test_audits.jsonl").read_text().splitlines()) == len(ledger)

    # killed after the base arm's Spider2 result was recorded, before the state file said so: the rerun claims
    # the audit its own run folder holds (nothing is played again), and the human lines give the Spider2 leg
    state_file = tmp_path / "experiments" / "sealed-exp" / "experiment.json"
    state = json.loads(state_file.read_text())
    for step in ("spider2-base", "compare", "report"):
        del state["steps"][step]
    state_file.write_text(json.dumps(state))
    claimed = ok(harvest(env, "experiment", recipe))
    assert "spider2-base: running" in claimed.stderr and "spider2-trained: done before, kept" in claimed.stderr
    base, trained = report["spider2"]["base"], report["spider2"]["trained"]
    assert f"spider2 sealed: base {base['official']}/48 ({base['evaluate_py']['says']})" in claimed.stdout
    assert f"spider2 sealed: trained {trained['official']}/48" in claimed.stdout
    assert "spider2 sealed: 46 instance(s) could not be played and count 0" in claimed.stdout
    assert (root / "pins" / "_spider2_audits.jsonl").read_text() == spider2_ledger
    assert json.loads(state_file.read_text())["steps"]["spider2-base"]["result"] == base

    # the once-only ledger: a second sealed Spider2 audit of the same recipe and arm is refused, nothing recorded
    run_dir = Path(report["training"]["sft"]["run_dir"])
    for arm in ("recipe", "base"):
        refused = harvest(
            env,
            "audit",
            "--benchmark",
            "spider2-dbt",
            "--split",
            "sealed",
            "--spider2",
            checkout,
            "--recipe",
            run_dir,
            "--arm",
            arm,
            "--allow-unavailable",
            "--run-dir",
            tmp_path / f"spider2-again-{arm}",
        )
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "already started its sealed Spider2 audit" in refused.stderr
    assert (root / "pins" / "_spider2_audits.jsonl").read_text() == spider2_ledger


def test_the_sealed_split_is_verified_by_lock_hash_and_check_names_only(chain_world) -> None:
    """`harvest tasks verify --sealed`: a seeded sample of the sealed tasks is rebuilt from its pin and passes
    every check, reported by the first digits of its lock hash; nothing of a task (id, statement, a check's
    detail) reaches the output. Ids cannot be named with --sealed, nor a public split."""
    from dbt_harvest.core.task_record import read_task
    from dbt_harvest.corpora.tasklock import record_sha256

    root, env, sealed = chain_world
    records = [read_task(root / "home" / "sealed" / "test" / name) for name in sealed]
    names = {f"sealed:{record_sha256(r)[:12]}" for r in records}
    proc = ok(harvest(env, "tasks", "verify", "--sealed", "--sample", "1", "--seed", "3", "--json", timeout=900))
    report = json.loads(proc.stdout)
    assert (report["summary"]["tasks"], report["summary"]["ok"]) == (1, 1), report
    [task] = report["tasks"]
    assert task["instance_id"] in names and task["ok"]
    assert task["checks"] and all(check == {"ok": True, "detail": ""} for check in task["checks"].values())
    said = proc.stdout + proc.stderr
    for record in records:
        assert record.instance_id not in said and record.problem_statement[:60] not in said
    assert harvest(env, "tasks", "verify", "--sealed", "--split", "train").returncode == 2
    assert harvest(env, "tasks", "verify", "--sealed", "--all").returncode == 2
    assert harvest(env, "tasks", "verify", "--sealed", records[0].instance_id).returncode == 2

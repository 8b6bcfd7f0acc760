"""SFT on CPU with the tiny model: both row formats, adapter reload, manifest, freeze, firewall, gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from train_world import World, other_split, tiny_raw, write_config

from dbt_harvest.cli import main
from dbt_harvest.corpora.errors import FirewallError
from dbt_harvest.corpora.recipe import REQUIRED_FIELDS, freeze, read_manifest, verify_frozen
from dbt_harvest.train.configs import config_from_dict
from dbt_harvest.train.errors import FreezeError, ManifestError
from dbt_harvest.train.project import GitProjectSource
from dbt_harvest.train.sft import run_sft
from dbt_harvest.train.sft_data import agentic_rows, load_train_tasks, single_turn_rows
from tests.checkout import IN_CHECKOUT


@pytest.fixture(scope="module")
def single_turn_run(world: World, tmp_path_factory: pytest.TempPathFactory):
    import os

    os.environ["HARVEST_HOME"] = str(world.home)
    out = tmp_path_factory.mktemp("runs")
    config = config_from_dict(tiny_raw("sft-tiny.toml", world, out), where="sft-tiny")
    return run_sft(config)


def test_single_turn_sft_saves_a_reloadable_adapter(single_turn_run) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result = single_turn_run
    assert result.manifest["metrics"]["global_step"] == 2
    base_dir = result.run_dir / "base-tiny"
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), result.adapter_dir)
    tokenizer = AutoTokenizer.from_pretrained(result.adapter_dir)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "fix"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 3
    lora = [n for n, _ in model.named_parameters() if "lora_A" in n]
    assert lora and all("q_proj" in n or "v_proj" in n for n in lora)
    assert torch.is_tensor(out)


def test_manifest_fields_signature_and_tamper_detection(single_turn_run, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = single_turn_run.run_dir
    manifest = read_manifest(run_dir)
    assert set(REQUIRED_FIELDS) <= set(manifest)
    assert manifest["dataset"]["split"] == "train" and len(manifest["dataset"]["sha256"]) == 64
    assert manifest["base_model"] == {"id": "tiny://", "revision": "local", "path": "base-tiny"}
    assert manifest == single_turn_run.manifest  # what the run returns is the signed manifest on disk
    assert manifest["seed"] == 0 and manifest["claim_under_test"]
    assert manifest["versions"]["trl"] and manifest["versions"]["dbt-harvest"]
    # the code's commit where it runs from a git checkout of dbt-harvest (an sdist or a wheel has none)
    assert bool(manifest["project_git"]["commit"]) == IN_CHECKOUT
    assert manifest["signature"]["kind"] == "sha256"
    tampered = run_dir.parent / "tampered"
    tampered.mkdir()
    data = json.loads((run_dir / "manifest.json").read_text())
    data["metrics"]["global_step"] = 999
    (tampered / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="altered"):
        read_manifest(tampered)
    with pytest.raises(ManifestError, match="HMAC signature is required"):
        read_manifest(run_dir, require_hmac=True)


def test_hmac_signing_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    from dbt_harvest.corpora.recipe import sign, verify

    monkeypatch.setenv("HARVEST_MANIFEST_KEY", "k1")
    signed = sign({"a": 1})
    assert signed["signature"]["kind"] == "hmac-sha256"
    assert verify(signed, require_hmac=True) == signed
    monkeypatch.setenv("HARVEST_MANIFEST_KEY", "k2")
    with pytest.raises(ManifestError, match="altered"):
        verify(signed)
    monkeypatch.delenv("HARVEST_MANIFEST_KEY")
    with pytest.raises(ManifestError, match="set HARVEST_MANIFEST_KEY"):
        verify(signed)


def test_freeze_then_verify_and_detect_a_changed_adapter_or_config(single_turn_run) -> None:
    run_dir = single_turn_run.run_dir
    with pytest.raises(FreezeError, match="not frozen"):
        verify_frozen(run_dir)
    result = CliRunner().invoke(main, ["train", "freeze", str(run_dir / "manifest.json")])
    assert result.exit_code == 0, result.output
    frozen = verify_frozen(run_dir)
    assert frozen.adapter_sha256 == single_turn_run.manifest["adapter_sha256"]
    assert frozen.recipe.startswith("sft-tiny@") and f"recipe {frozen.recipe}" in result.output
    assert (run_dir / "FROZEN.json").is_file()
    again = CliRunner().invoke(main, ["train", "freeze", str(run_dir)])
    assert again.exit_code == 1 and "already frozen" in again.output
    for rel, old, new, what in (
        ("adapter/adapter_config.json", '"r": 8', '"r": 9', "adapter changed"),
        ("config.toml", "max_steps = 2", "max_steps = 3", "config changed"),
    ):
        path = run_dir / rel
        original = path.read_text()
        path.write_text(original.replace(old, new))
        try:
            with pytest.raises(FreezeError, match=what):
                verify_frozen(run_dir)
        finally:
            path.write_text(original)
    assert verify_frozen(run_dir) == frozen
    with pytest.raises(FreezeError, match="no run folder"):
        verify_frozen(run_dir.parent / "nothing")


def test_freeze_refuses_an_unfinished_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "half"
    (run_dir / "adapter").mkdir(parents=True)
    with pytest.raises(FreezeError, match="no manifest"):
        freeze(run_dir)
    assert not (run_dir / "FROZEN.json").exists()


def test_agentic_sft_trains_on_assistant_turns(world: World, tmp_path: Path) -> None:
    raw = tiny_raw(
        "sft-tiny.toml",
        world,
        tmp_path,
        data={"format": "agentic", "episodes": "scripted"},
        run={"name": "sft-agentic"},
    )
    result = run_sft(config_from_dict(raw, where="agentic"))
    assert result.manifest["metrics"]["global_step"] == 2
    assert result.manifest["dataset"]["format"] == "agentic"
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()


def test_agentic_rows_keep_tool_arguments_exact(world: World) -> None:
    from dbt_harvest.eval.env import tool_schemas
    from dbt_harvest.train.sft_data import to_dataset

    rows = agentic_rows([world.task], GitProjectSource(world.repos), 4000, variants=4)
    names = {t["function"]["name"] for t in tool_schemas()}
    for row in to_dataset(rows):
        calls = [m["tool_calls"][0]["function"] for m in row["messages"] if m.get("tool_calls")]
        assert {c["name"] for c in calls} <= names  # the environment's tools, not invented ones
        assert {"name": "read_file", "arguments": {"path": "models/paid_revenue.sql"}} in calls
        for call in calls:  # each call carries exactly its own arguments (no null-filled keys)
            assert all(value is not None for value in call["arguments"].values())
        assert [c["name"] for c in calls][-2:] == ["validate", "submit"]
        write = next(c for c in calls if c["name"] == "write_file")
        assert set(write["arguments"]) == {"path", "content"}


def test_firewall_refuses_dev_and_test_records(world: World, tmp_path: Path) -> None:
    from dbt_harvest.core.task_record import write_task

    project = GitProjectSource(world.repos)
    for split in ("dev", "test"):
        with pytest.raises(FirewallError, match="non-train"):
            single_turn_rows([other_split(world.task, split)], project, 4000)
    mixed = tmp_path / "tasks"
    write_task(world.task, mixed)
    write_task(other_split(world.task, "dev"), mixed)
    with pytest.raises(FirewallError):
        load_train_tasks(str(mixed))


def test_gate_reports_and_writes_no_adapter(world: World, tmp_path: Path) -> None:
    config = write_config(tiny_raw("sft-tiny.toml", world, tmp_path, train={"max_steps": 40}), tmp_path / "c.toml")
    result = CliRunner().invoke(main, ["train", "sft", "--config", str(config), "--gate", "--json"])
    assert result.exit_code == 0, result.output
    gate = json.loads(result.stdout)["gate"]  # stdout holds exactly the one JSON object (logs and bars on stderr)
    assert gate["total_steps"] == 40 and gate["step_seconds"] > 0
    assert gate["projected_seconds"] == pytest.approx(gate["step_seconds"] * 40, rel=0.05, abs=0.2)
    assert gate["peak_memory_bytes"] > 0 and gate["peak_memory_source"] == "cpu-rss"
    assert not (tmp_path / "sft-tiny" / "adapter").exists()
    assert not (tmp_path / "sft-tiny" / "manifest.json").exists()


def test_cli_refuses_a_bad_config_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[run]\nkind = "sft"\nname = "x"\nclaim_under_test = "c"\n[model]\nbase = "tiny://"\n[train]\nlerning_rate = 1.0\n'
    )
    result = CliRunner().invoke(main, ["train", "sft", "--config", str(bad)])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and "lerning_rate" in result.output


def test_train_sft_cli_reports_without_json(world: World, tmp_path: Path) -> None:
    """The installed `harvest` command, no --json: exit 0 and one line per fact (the manifest is signed first)."""
    import os
    import shutil
    import subprocess

    harvest = shutil.which("harvest")
    assert harvest, "harvest must be on PATH (pip install -e .)"
    config = write_config(tiny_raw("sft-tiny.toml", world, tmp_path, run={"name": "sft-cli"}), tmp_path / "c.toml")
    proc = subprocess.run(
        [harvest, "train", "sft", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HARVEST_HOME": str(world.home), "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = read_manifest(tmp_path / "sft-cli")
    assert proc.stdout.splitlines() == [
        f"run: {tmp_path / 'sft-cli'}",
        f"adapter: {tmp_path / 'sft-cli' / 'adapter'} (sha256 {manifest['adapter_sha256'][:12]})",
        "manifest: sha256 signed; steps 2",
    ]


def test_a_run_continues_an_adapter_and_records_which(single_turn_run, world: World, tmp_path: Path) -> None:
    from dbt_harvest.corpora.recipe import folder_sha256
    from dbt_harvest.train.errors import TrainConfigError

    start = single_turn_run.adapter_dir
    raw = tiny_raw("sft-tiny.toml", world, tmp_path, model={"init_adapter": str(start)}, run={"name": "sft-continued"})
    result = run_sft(config_from_dict(raw, where="continued"))
    assert result.manifest["init_adapter"] == {"path": str(start), "sha256": folder_sha256(start)}
    assert folder_sha256(result.adapter_dir) != folder_sha256(start)  # trained further, saved as its own adapter
    assert json.loads((result.adapter_dir / "adapter_config.json").read_text())["r"] == 8
    missing = tiny_raw(
        "sft-tiny.toml",
        world,
        tmp_path,
        model={"init_adapter": str(tmp_path / "nowhere")},
        run={"name": "sft-no-adapter"},
    )
    with pytest.raises(TrainConfigError, match="not a peft adapter folder"):
        config_from_dict(missing, where="missing")  # refused before anything is loaded or written

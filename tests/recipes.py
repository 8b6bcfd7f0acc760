"""Run folders for the sealed-split tests that need a frozen recipe but not a trained model.

``finished_run`` writes what `harvest train sft|grpo` leaves behind — ``config.toml``, ``adapter/`` and a
``manifest.json`` signed by ``corpora.recipe.sign`` with every required field — without torch, so the
corpora and eval tests can freeze it with the real ``corpora.recipe.freeze`` and unseal it. The real
train -> freeze -> audit chain is tests/train/test_sealed_chain.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import tomli_w

from dbt_harvest.corpora.recipe import ADAPTER_DIR, CONFIG_NAME, MANIFEST_NAME, folder_sha256, freeze, sign


def finished_run(folder: Path, name: str, *, weights: bytes | None = None, dataset: str = "d" * 64) -> Path:
    """A completed run folder named ``name`` under ``folder`` (not frozen); returns the run folder."""
    run_dir = folder / name
    (run_dir / ADAPTER_DIR).mkdir(parents=True, exist_ok=True)
    (run_dir / ADAPTER_DIR / "adapter_model.safetensors").write_bytes(weights or b"weights of " + name.encode())
    config = {
        "run": {"kind": "sft", "name": name, "output_dir": str(folder), "claim_under_test": "a test recipe"},
        "model": {"base": "tiny://"},
        "train": {"learning_rate": 0.0001},
    }
    (run_dir / CONFIG_NAME).write_text(tomli_w.dumps(config))
    body = {
        "format": 1,
        "run": name,
        "kind": "sft",
        "status": "completed",
        "claim_under_test": "a test recipe",
        "dataset": {"sha256": dataset, "split": "train", "tasks": 1, "format": "single_turn"},
        "config": config,
        "base_model": {"id": "tiny://", "revision": "local", "path": "base-tiny"},
        "adapter_sha256": folder_sha256(run_dir / ADAPTER_DIR),
        "project_git": {"commit": None, "dirty": None},
        "seed": 0,
        "versions": {},
        "hardware": {},
        "timings": {},
        "metrics": {"global_step": 1},
    }
    (run_dir / MANIFEST_NAME).write_text(json.dumps(sign(body), sort_keys=True, indent=1) + "\n")
    return run_dir


def frozen_run(folder: Path, name: str, **kwargs: object) -> Path:
    """``finished_run`` frozen by the real ``corpora.recipe.freeze``; returns the run folder."""
    run_dir = finished_run(folder, name, **kwargs)  # type: ignore[arg-type]
    freeze(run_dir)
    return run_dir

"""Load the base model and tokenizer a config names: a Hub id at a revision, a local folder, or tiny://.

``tiny://`` builds the CPU test model (train/tiny.py) into the run folder once, so tests and smoke runs
never download anything. The revision a run actually used is returned so the manifest can record it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.train.configs import TINY_SCHEME, RunConfig
from dbt_harvest.train.errors import TrainError


@dataclass(frozen=True)
class BaseModel:
    model: Any  # transformers.PreTrainedModel
    tokenizer: Any  # transformers.PreTrainedTokenizerBase
    model_id: str
    revision: str
    local_path: str


def resolve_base(config: RunConfig) -> tuple[str, str]:
    """(path or id to load, revision) for the config's base model; builds tiny:// on first use."""
    base = config.model.base
    if base.startswith(TINY_SCHEME):
        import os
        import shutil
        import tempfile

        from dbt_harvest.train.tiny import TinySpec, build_tiny

        folder = config.run_dir / "base-tiny"
        if not (folder / "config.json").is_file():  # build aside, rename into place: ranks may race here
            config.run_dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".base-tiny.", dir=config.run_dir))
            build_tiny(tmp, TinySpec(seed=config.run.seed))
            try:
                os.rename(tmp, folder)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                if not (folder / "config.json").is_file():
                    raise
        return str(folder), "local"
    if Path(base).is_dir():
        return base, "local"
    return base, config.model.revision


def load_base(config: RunConfig) -> BaseModel:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, revision = resolve_base(config)
    local_only = config.model.local_files_only or revision == "local"
    kwargs: dict[str, Any] = {"local_files_only": local_only}
    if revision != "local":
        kwargs["revision"] = revision
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, config.model.dtype), **kwargs)
    except (OSError, ValueError) as exc:
        raise TrainError(
            f"cannot load base model {config.model.base!r} at {revision!r}: {str(exc).splitlines()[0]}"
        ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return BaseModel(model, tokenizer, config.model.base, revision, path)


def lora_config(config: RunConfig):  # -> peft.LoraConfig
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora.r,
        lora_alpha=config.lora.alpha,
        lora_dropout=config.lora.dropout,
        target_modules=list(config.lora.target_modules),
        task_type="CAUSAL_LM",
    )


def trainable_model(config: RunConfig, base: BaseModel) -> tuple[Any, Any]:
    """(model, peft_config) for a trainer: the base and a fresh LoRA from [lora], or, with ``[model]
    init_adapter``, the base with that adapter loaded trainable (no new LoRA: training continues it)."""
    if not config.model.init_adapter:
        return base.model, lora_config(config)
    from peft import PeftModel

    folder = Path(config.model.init_adapter)
    if not (folder / "adapter_config.json").is_file():
        raise TrainError(f"[model] init_adapter {folder} is not a peft adapter folder (no adapter_config.json)")
    try:
        return PeftModel.from_pretrained(base.model, str(folder), is_trainable=True), None
    except (OSError, ValueError, RuntimeError) as exc:
        raise TrainError(
            f"cannot load [model] init_adapter {folder} on {config.model.base}: {str(exc).splitlines()[0]}"
        ) from None


def init_adapter_record(config: RunConfig) -> dict[str, str] | None:
    """What the manifest records of the adapter a run continued (its folder digest), or None."""
    if not config.model.init_adapter:
        return None
    from dbt_harvest.corpora.recipe import folder_sha256

    return {"path": config.model.init_adapter, "sha256": folder_sha256(Path(config.model.init_adapter))}

"""Config validation: real configs parse; every malformed config is refused with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.configs import config_from_dict, load_config
from train.errors import TrainConfigError

REAL = Path(__file__).resolve().parents[2] / "train" / "configs"


def base(**extra):
    raw = {
        "run": {"kind": "sft", "name": "r", "claim_under_test": "c"},
        "model": {"base": "tiny://"},
        "train": {"use_cpu": True, "bf16": False},
    }
    for k, v in extra.items():
        raw[k] = {**raw.get(k, {}), **v}
    return raw


@pytest.mark.parametrize("name", ["sft-qwen-4b.toml", "grpo-qwen-4b.toml"])
def test_real_configs_parse_and_name_a_real_base(name: str) -> None:
    config = load_config(REAL / name)
    assert not config.is_tiny and config.model.base.startswith("Qwen/")
    assert config.lora.r == 8 and config.lora.alpha == 16
    assert config.data.split == "train"


@pytest.mark.parametrize(
    "raw, message",
    [
        (base(train={"lerning_rate": 1e-4}), "unknown key(s) in [train]: 'lerning_rate'"),
        ({**base(), "optimizer": {}}, "unknown section(s) 'optimizer'"),
        (base(data={"split": "dev"}), "training reads the train split only"),
        (base(train={"max_steps": "ten"}), "[train] max_steps must be an integer"),
        (base(run={"kind": "dpo"}), "[run] kind = 'dpo'"),
        (base(run={"claim_under_test": " "}), "claim_under_test"),
        (base(grpo={"num_generations": 4}), "section [grpo] is for kind = \"grpo\""),
        (base(train={"use_cpu": True, "bf16": True}), "bf16 must be false when use_cpu"),
        (base(lora={"target_modules": []}), "target_modules"),
        (
            base(run={"kind": "grpo"}, grpo={"num_generations": 3}, train={"gradient_accumulation_steps": 4}),
            "must divide",
        ),
        (base(run={"kind": "grpo"}, reward={"backend": "duckdb_sql"}, grpo={"num_generations": 8}), "[reward] inputs"),
    ],
)
def test_bad_configs_are_refused(raw: dict, message: str) -> None:
    with pytest.raises(TrainConfigError) as info:
        config_from_dict(raw, where="x.toml")
    assert message in str(info.value)
    assert str(info.value).startswith("x.toml:")


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(TrainConfigError, match="no config file"):
        load_config(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nkind=")
    with pytest.raises(TrainConfigError, match="not valid TOML"):
        load_config(bad)

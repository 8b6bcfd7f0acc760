"""Config validation: real configs parse; every malformed config is refused with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbt_harvest.train.configs import config_from_dict, load_config
from dbt_harvest.train.errors import TrainConfigError

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
        (base(grpo={"num_generations": 4}), 'section [grpo] is for kind = "grpo"'),
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


def test_any_trl_field_passes_through_to_trls_own_config(tmp_path: Path) -> None:
    """[train] keys that are not ours but are fields of trl's config reach trl unchanged, through
    HfArgumentParser; ours keep their meaning; --gate still means one step and nothing saved."""
    from trl import GRPOConfig, SFTConfig

    from dbt_harvest.train.runner import trl_arguments

    raw = base(
        train={
            "weight_decay": 0.125,
            "lr_scheduler_type": "cosine",
            "max_grad_norm": 0.5,
            "report_to": "none",
            "disable_tqdm": False,
            "save_total_limit": 1,
        }
    )
    config = config_from_dict(raw, where="x.toml")
    assert dict(config.train.trl)["weight_decay"] == 0.125
    args = trl_arguments(SFTConfig, config, tmp_path, completion_only_loss=True)
    assert isinstance(args, SFTConfig)
    assert (args.weight_decay, args.lr_scheduler_type.value, args.max_grad_norm, args.save_total_limit) == (
        0.125,
        "cosine",
        0.5,
        1,
    )
    assert args.report_to == [] or args.report_to == "none" or args.report_to == ["none"]
    assert args.disable_tqdm is False and args.use_cpu and not args.bf16 and args.output_dir == str(tmp_path)
    gate = trl_arguments(SFTConfig, config, tmp_path, gate=True)
    assert gate.max_steps == 1 and gate.save_strategy.value == "no"

    grpo = config_from_dict(
        base(
            run={"kind": "grpo"},
            grpo={"num_generations": 2},
            train={"gradient_accumulation_steps": 2, "loss_type": "dr_grpo", "scale_rewards": "none"},
        )
    )
    grpo_args = trl_arguments(GRPOConfig, grpo, tmp_path, num_generations=2)
    assert (grpo_args.loss_type, grpo_args.scale_rewards) == ("dr_grpo", "none")


@pytest.mark.parametrize("on", [True, False])
def test_gradient_checkpointing_reaches_trl_without_a_deprecation_warning(on: bool, tmp_path: Path) -> None:
    """Our [train] gradient_checkpointing goes in as transformers' activation_checkpointing (the old name
    warns on every run); the old attribute still mirrors it for code that reads it."""
    import warnings

    from trl import SFTConfig

    from dbt_harvest.train.runner import trl_arguments

    config = config_from_dict(base(train={"gradient_checkpointing": on}), where="x.toml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = trl_arguments(SFTConfig, config, tmp_path)
    assert not [w for w in caught if "checkpointing" in str(w.message)], [str(w.message) for w in caught]
    assert args.gradient_checkpointing is on and getattr(args, "activation_checkpointing", on) is on


@pytest.mark.parametrize(
    "train, message",
    [
        ({"weight_decay": "lots"}, "[train] weight_decay must be a number"),
        ({"seed": 1}, "[train] seed is set by [run] seed"),
        ({"output_dir": "elsewhere"}, "[train] output_dir is set by [run]"),
        ({"not_a_trl_field": 1}, "any field of trl's SFTConfig"),
    ],
)
def test_pass_through_keys_are_still_checked(train: dict, message: str) -> None:
    with pytest.raises(TrainConfigError) as info:
        config_from_dict(base(train=train), where="x.toml")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_trl_refusals_are_one_line_config_errors(tmp_path: Path) -> None:
    from trl import SFTConfig

    from dbt_harvest.train.runner import trl_arguments

    config = config_from_dict(base(train={"lr_scheduler_type": "sideways"}), where="x.toml")
    with pytest.raises(TrainConfigError) as info:
        trl_arguments(SFTConfig, config, tmp_path)
    assert str(info.value).startswith("x.toml: trl refused the [train] arguments:") and "sideways" in str(info.value)
    assert "\n" not in str(info.value)

"""Training run configs: one TOML file per run, parsed into frozen dataclasses and validated.

A config is the recipe a manifest records and `harvest train freeze` seals, so it must mean exactly
what it says: unknown sections and keys are refused (a typo such as ``lerning_rate`` never silently
falls back to a default), every value is type-checked, and each error names the file, the key and
what to do. Sections: ``[run] [model] [lora] [data] [train]`` for both kinds, ``[grpo] [reward]``
for GRPO only.

``[train]`` takes our own keys (below) and, besides them, any field of trl's own config dataclass for
the run's kind (``SFTConfig`` / ``GRPOConfig``, e.g. ``lr_scheduler_type``, ``weight_decay``,
``report_to``, ``disable_tqdm``, ``loss_type``): such keys pass through to trl unchanged, and the
trainer arguments are built by trl's own parser (``HfArgumentParser.parse_dict``, see
:func:`trl_arguments`). A key that is neither ours nor a trl field is refused by name; the keys the run
sets itself (``output_dir``, ``seed``, ``data_seed`` from ``[run]``; the ``[grpo]`` keys) are refused in
``[train]`` so that a config has one place for each value. ``report_to`` and progress bars default to
what trl does (transformers 5: no reporting, a tqdm bar on stderr).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from dbt_harvest.train.errors import TrainConfigError

KINDS = ("sft", "grpo")
SFT_FORMATS = ("single_turn", "agentic")
EPISODE_KINDS = ("environment", "scripted")
GRPO_MODES = ("single_turn", "multi_turn")
REWARD_BACKENDS = ("harvester", "duckdb_sql")
SHAPINGS = ("none", "strict_bonus")
DTYPES = ("float32", "bfloat16", "float16")
#: ``[model] base`` with this scheme builds the tiny CPU model (train/tiny.py) instead of loading one.
TINY_SCHEME = "tiny://"


@dataclass(frozen=True)
class RunSection:
    kind: str
    name: str
    output_dir: str = "runs"
    seed: int = 0
    claim_under_test: str = ""


@dataclass(frozen=True)
class ModelSection:
    base: str
    revision: str = "main"
    dtype: str = "bfloat16"
    local_files_only: bool = False
    #: a LoRA adapter folder to continue training (e.g. GRPO after SFT; the run's [lora] is then the
    #: adapter's own); "" = a fresh adapter from [lora]
    init_adapter: str = ""


@dataclass(frozen=True)
class LoraSection:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class DataSection:
    tasks: str = ""  # folder of task records; "" = HARVEST_HOME/tasks
    repos: str = ""  # folder of git repositories named owner__repo(.git); "" = each task's pin (train/project.py)
    split: str = "train"
    format: str = "single_turn"
    max_rows: int = 0  # 0 = every train task
    max_file_chars: int = 16000
    #: agentic rows: "environment" plays each investigation in the real eval environment (needs the
    #: task's pin); "scripted" renders it from the project's files (for [data] repos without pins)
    episodes: str = "environment"
    #: agentic rows: investigations per task (train/investigation.py); identical renderings are kept once
    variants: int = 2


@dataclass(frozen=True)
class TrainSection:
    max_steps: int = -1
    num_train_epochs: float = 1.0
    learning_rate: float = 2e-4
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 8
    max_length: int = 8192
    save_steps: int = 50
    logging_steps: int = 1
    warmup_steps: int = 0
    use_cpu: bool = False
    bf16: bool = True
    gradient_checkpointing: bool = True
    resume: bool = True
    #: further trl config fields (``[train]`` keys that are not ours), passed to trl unchanged, sorted by key
    trl: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class GrpoSection:
    mode: str = "single_turn"
    num_generations: int = 8
    max_completion_length: int = 2048
    temperature: float = 1.0
    beta: float = 0.0
    max_tool_calling_iterations: int = 20
    environment: str = "dbt_harvest.eval.env:RepairEnvironment"  # module:Class, used when mode = "multi_turn"


@dataclass(frozen=True)
class RewardSection:
    backend: str = "harvester"
    workers: int = 4
    timeout_s: float = 120.0
    shaping: str = "none"  # no shaping by default; anything else is recorded in the manifest
    inputs: str = ""  # duckdb_sql backend: folder of <pin>.duckdb source databases


@dataclass(frozen=True)
class RunConfig:
    """A validated training config. ``source`` is the file it came from, ``raw`` its parsed TOML."""

    run: RunSection
    model: ModelSection
    lora: LoraSection
    data: DataSection
    train: TrainSection
    grpo: GrpoSection | None = None
    reward: RewardSection | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def run_dir(self) -> Path:
        return Path(self.run.output_dir) / self.run.name

    @property
    def is_tiny(self) -> bool:
        return self.model.base.startswith(TINY_SCHEME)

    def with_overrides(self, **sections: Any) -> RunConfig:
        """A copy with whole sections replaced (used by --gate and tests)."""
        return dataclasses.replace(self, **sections)


_SECTIONS: dict[str, type] = {
    "run": RunSection,
    "model": ModelSection,
    "lora": LoraSection,
    "data": DataSection,
    "train": TrainSection,
    "grpo": GrpoSection,
    "reward": RewardSection,
}


def load_config(path: Path) -> RunConfig:
    """Read and validate a TOML run config; raise TrainConfigError naming the first problem."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainConfigError(f"no config file at {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TrainConfigError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise TrainConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    return config_from_dict(raw, where=str(path))


def config_from_dict(raw: dict[str, Any], where: str = "config") -> RunConfig:
    """Validate a parsed config mapping (see load_config)."""
    unknown = sorted(set(raw) - set(_SECTIONS))
    if unknown:
        raise TrainConfigError(
            f"{where}: unknown section(s) {', '.join(map(repr, unknown))}; known: {', '.join(_SECTIONS)}"
        )
    for required in ("run", "model"):
        if required not in raw:
            raise TrainConfigError(f"{where}: missing section [{required}]")
    run: RunSection = _section(RunSection, raw.get("run", {}), "run", where)
    if run.kind not in KINDS:
        raise TrainConfigError(f"{where}: [run] kind = {run.kind!r}; use one of {', '.join(KINDS)}")
    sections = {name: _section(cls, raw.get(name, {}), name, where, run.kind) for name, cls in _SECTIONS.items()}
    if run.kind == "sft":
        for only_grpo in ("grpo", "reward"):
            if only_grpo in raw:
                raise TrainConfigError(f'{where}: section [{only_grpo}] is for kind = "grpo", not "sft"')
    config = RunConfig(
        run=run,
        model=sections["model"],
        lora=sections["lora"],
        data=sections["data"],
        train=sections["train"],
        grpo=sections["grpo"] if run.kind == "grpo" else None,
        reward=sections["reward"] if run.kind == "grpo" else None,
        source=where,
        raw=raw,
    )
    _check_values(config, where)
    return config


#: trl config fields the run sets from other sections; refused in [train] (one place for each value)
SET_BY_RUN = {"output_dir": "[run] output_dir and name", "seed": "[run] seed", "data_seed": "[run] seed"}
#: our [train] keys that are not trl fields
OWN_TRAIN_KEYS = ("resume",)


def trl_config_class(kind: str) -> type:
    """trl's config dataclass for a run kind (imports trl; raise TrainConfigError when it is missing)."""
    try:
        from trl import GRPOConfig, SFTConfig
    except ImportError as exc:
        raise TrainConfigError(
            f"trl is not installed ({exc}); [train] keys other than ours need it: pip install 'dbt-harvest[train]'"
        ) from None
    return SFTConfig if kind == "sft" else GRPOConfig


def _trl_extras(values: dict[str, Any], kind: str, where: str) -> tuple[tuple[str, Any], ...]:
    """[train] keys that are not ours: each must be a field of trl's config for ``kind``, of a plain type."""
    if not values:
        return ()
    cls = trl_config_class(kind)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    ours = [f.name for f in dataclasses.fields(TrainSection) if f.name != "trl"]
    unknown = sorted(k for k in values if k not in fields)
    if unknown:
        raise TrainConfigError(
            f"{where}: unknown key(s) in [train]: {', '.join(map(repr, unknown))}; known: ours ({', '.join(ours)}) "
            f"and any field of trl's {cls.__name__} (see `harvest train {kind} --help`)"
        )
    grpo_keys = {f.name for f in dataclasses.fields(GrpoSection)}
    for key, value in values.items():
        if key in SET_BY_RUN:
            raise TrainConfigError(f"{where}: [train] {key} is set by {SET_BY_RUN[key]}; remove it from [train]")
        if kind == "grpo" and key in grpo_keys:
            raise TrainConfigError(f"{where}: [train] {key} belongs in [grpo]; move it there")
        _check_trl_value(value, fields[key].type, f"{where}: [train] {key}")
    return tuple(sorted(values.items()))


def _check_trl_value(value: Any, annotation: Any, label: str) -> None:
    """Type-check a pass-through value where trl's annotation is a plain bool/int/float/str (or that or
    None); richer annotations (unions, lists, enums) are left to trl's own checks when the run starts."""
    if value is None:
        return
    args = (
        [a for a in typing.get_args(annotation) if a is not type(None)] if typing.get_args(annotation) else [annotation]
    )
    plain = {bool: "bool", int: "int", float: "float", str: "str"}
    if len(args) == 1 and args[0] in plain:
        _coerce(value, plain[args[0]], label)


def _section(cls: type, values: Any, name: str, where: str, kind: str = "") -> Any:
    if not isinstance(values, dict):
        raise TrainConfigError(f"{where}: [{name}] must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    extras: tuple[tuple[str, Any], ...] = ()
    if cls is TrainSection:
        fields.pop("trl")
        extras = _trl_extras({k: v for k, v in values.items() if k not in fields}, kind, where)
        values = {k: v for k, v in values.items() if k in fields}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise TrainConfigError(
            f"{where}: unknown key(s) in [{name}]: {', '.join(map(repr, unknown))}; known: {', '.join(fields)}"
        )
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        kwargs[key] = _coerce(value, fields[key].type, f"{where}: [{name}] {key}")
    missing = [
        f.name
        for f in fields.values()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in kwargs
    ]
    if missing:
        raise TrainConfigError(f"{where}: [{name}] is missing required key(s): {', '.join(missing)}")
    if extras:
        kwargs["trl"] = extras
    return cls(**kwargs)


def _coerce(value: Any, annotation: Any, label: str) -> Any:
    kind = str(annotation)
    if kind == "bool":
        if not isinstance(value, bool):
            raise TrainConfigError(f"{label} must be true or false, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TrainConfigError(f"{label} must be an integer, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TrainConfigError(f"{label} must be a number, got {value!r}")
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise TrainConfigError(f"{label} must be a string, got {value!r}")
        return value
    if kind.startswith("tuple[str"):
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise TrainConfigError(f"{label} must be a list of non-empty strings, got {value!r}")
        return tuple(value)
    raise TrainConfigError(f"{label}: unsupported field type {kind}")  # pragma: no cover - programming error


def _check_values(config: RunConfig, where: str) -> None:
    """Refuse a config whose values cannot make a run, section by section (the first bad value raises)."""

    def bad(label: str, msg: str) -> TrainConfigError:
        return TrainConfigError(f"{where}: {label} {msg}")

    _check_run_and_model(config, bad)
    _check_lora(config.lora, bad)
    _check_data(config.data, bad)
    _check_train(config.train, bad)
    if config.grpo is not None:
        _check_grpo(config.grpo, config.train, bad)
    if config.reward is not None:
        _check_reward(config.reward, bad)


_Bad: TypeAlias = Callable[[str, str], TrainConfigError]  # (section and key, what is wrong) -> the error to raise


def _check_run_and_model(config: RunConfig, bad: _Bad) -> None:
    """[run] names a plain folder and says its claim; [model] names a base, a known dtype, a real adapter."""
    if not config.run.name or "/" in config.run.name or config.run.name.startswith("."):
        raise bad("[run] name", "must be a plain folder name (no '/', not hidden)")
    if not config.run.claim_under_test.strip():
        raise bad("[run] claim_under_test", "must say what this run is meant to show (it goes in the manifest)")
    if config.model.dtype not in DTYPES:
        raise bad("[model] dtype", f"= {config.model.dtype!r}; use one of {', '.join(DTYPES)}")
    if not config.model.base:
        raise bad("[model] base", "must name a model id, a local folder, or tiny://")
    if config.model.init_adapter and not (Path(config.model.init_adapter) / "adapter_config.json").is_file():
        raise bad(
            "[model] init_adapter",
            f"= {config.model.init_adapter!r} is not a peft adapter folder (no adapter_config.json)",
        )


def _check_lora(lora: LoraSection, bad: _Bad) -> None:
    """[lora]: positive rank and alpha, a dropout in [0, 1), at least one target module."""
    if lora.r < 1 or lora.alpha < 1:
        raise bad("[lora]", "r and alpha must be >= 1")
    if not 0.0 <= lora.dropout < 1.0:
        raise bad("[lora] dropout", "must be in [0, 1)")
    if not lora.target_modules:
        raise bad("[lora] target_modules", "must list at least one module name")


def _check_data(data: DataSection, bad: _Bad) -> None:
    """[data]: the train split only, a known format and episode kind, sane variants and size limits."""
    if data.split != "train":
        raise bad(
            "[data] split",
            f"= {data.split!r}; training reads the train split only (dev/test are for evaluation)",
        )
    if data.format not in SFT_FORMATS:
        raise bad("[data] format", f"= {data.format!r}; use one of {', '.join(SFT_FORMATS)}")
    if data.episodes not in EPISODE_KINDS:
        raise bad("[data] episodes", f"= {data.episodes!r}; use one of {', '.join(EPISODE_KINDS)}")
    if data.format == "agentic" and data.episodes == "environment" and data.repos:
        raise bad(
            "[data] episodes", '= "environment" needs each task\'s pin; with [data] repos use episodes = "scripted"'
        )
    if not 1 <= data.variants <= 16:
        raise bad("[data] variants", "must be between 1 and 16")
    if data.max_rows < 0 or data.max_file_chars < 256:
        raise bad("[data]", "max_rows must be >= 0 and max_file_chars >= 256")


def _check_train(t: TrainSection, bad: _Bad) -> None:
    """[train]: a step count or epochs, positive sizes and learning rate, no bf16 on the CPU."""
    if t.max_steps == 0 or t.max_steps < -1:
        raise bad("[train] max_steps", "must be -1 (use num_train_epochs) or >= 1")
    if t.max_steps == -1 and t.num_train_epochs <= 0:
        raise bad("[train] num_train_epochs", "must be > 0 when max_steps = -1")
    for name in (
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "max_length",
        "save_steps",
        "logging_steps",
    ):
        if getattr(t, name) < 1:
            raise bad(f"[train] {name}", "must be >= 1")
    if t.learning_rate <= 0:
        raise bad("[train] learning_rate", "must be > 0")
    if t.use_cpu and t.bf16:
        raise bad("[train] bf16", "must be false when use_cpu = true")


def _check_grpo(g: GrpoSection, t: TrainSection, bad: _Bad) -> None:
    """[grpo]: a known mode, groups of two or more that divide the effective batch, a module:Class environment."""
    if g.mode not in GRPO_MODES:
        raise bad("[grpo] mode", f"= {g.mode!r}; use one of {', '.join(GRPO_MODES)}")
    if g.num_generations < 2:
        raise bad("[grpo] num_generations", "must be >= 2 (GRPO compares completions within a group)")
    if g.max_completion_length < 1 or g.max_tool_calling_iterations < 1:
        raise bad("[grpo]", "max_completion_length and max_tool_calling_iterations must be >= 1")
    if ":" not in g.environment:
        raise bad("[grpo] environment", "must be 'module:Class'")
    world = int(os.environ.get("WORLD_SIZE", "1"))  # set by torchrun / accelerate launch
    effective = t.per_device_train_batch_size * t.gradient_accumulation_steps * world
    if effective % g.num_generations:
        raise bad(
            "[grpo] num_generations",
            f"= {g.num_generations} must divide per_device_train_batch_size × gradient_accumulation_steps "
            f"× processes = {effective}",
        )


def _check_reward(r: RewardSection, bad: _Bad) -> None:
    """[reward]: a known backend and shaping, sane workers and timeout, inputs for the DuckDB backend."""
    if r.backend not in REWARD_BACKENDS:
        raise bad("[reward] backend", f"= {r.backend!r}; use one of {', '.join(REWARD_BACKENDS)}")
    if r.shaping not in SHAPINGS:
        raise bad("[reward] shaping", f"= {r.shaping!r}; use one of {', '.join(SHAPINGS)}")
    if r.workers < 0 or r.timeout_s <= 0:
        raise bad("[reward]", "workers must be >= 0 and timeout_s > 0")
    if r.backend == "duckdb_sql" and not r.inputs:
        raise bad("[reward] inputs", 'is required for backend = "duckdb_sql" (folder of <pin>.duckdb)')


def config_keys_help(kind: str) -> str:
    """The config keys of a run kind, one section a line, for `harvest train <kind> --help`."""
    sections = ["run", "model", "lora", "data", "train"] + (["grpo", "reward"] if kind == "grpo" else [])
    trl_name = "SFTConfig" if kind == "sft" else "GRPOConfig"
    lines = []
    for name in sections:
        keys = [f.name for f in dataclasses.fields(_SECTIONS[name]) if f.name != "trl"]
        line = f"[{name}] {', '.join(keys)}"
        if name == "train":
            line += f"; and any other field of trl's {trl_name} (e.g. lr_scheduler_type, weight_decay, report_to, disable_tqdm)"
        lines.append(line)
    return "\n".join(lines)

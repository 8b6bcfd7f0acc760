"""Fuzzed bad input: pin files, task records and training configs are accepted or refused in one line.

Every document comes from a hypothesis generator that breaks a valid one (fields dropped, retyped,
added, nested tables broken) or is junk bytes. The readers must return a record or raise their own
error type (a HarvestError) whose message is one line; never another exception. The same goes through
the CLI (`harvest show FILE`, `harvest tasks show ID`, `harvest train sft --config FILE`): exit code 1 or
2, one line on stderr, no Python traceback. (Repository specs are fuzzed in tests/harvester/test_specs.py.)
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt_harvest.cli import main
from dbt_harvest.core.errors import HarvestError, PinError
from dbt_harvest.core.pin import Column, PackageRecord, Pin, TableRecord, read_pin
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord, TaskRecordError, read_task, task_from_dict, task_id
from dbt_harvest.train.configs import load_config
from dbt_harvest.train.errors import TrainConfigError
from tests.fuzz.strategies import broken_dict, json_values, junk_bytes, toml_values

REPO = Path(__file__).resolve().parents[2]
SFT_CONFIG = REPO / "train" / "configs" / "sft-qwen-4b.toml"
FUZZ = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
CLI_FUZZ = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _pin() -> Pin:
    return Pin(
        id="fuzz__shop@0123456789ab",
        spec="fuzz/shop@0123456",
        url="https://github.com/fuzz/shop.git",
        commit="0123456789abcdef0123456789abcdef01234567",
        tree="e" * 40,
        ref="",
        root_commits=("a" * 40,),
        project_dir=".",
        project_name="shop",
        profile_schema="main",
        clock="2024-07-01 00:00:00",
        license="MIT",
        created_at="2024-01-01T00:00:00Z",
        gold_sha256="b" * 64,
        compat_patch_sha256="",
        versions={"duckdb": "1.5.6"},
        packages=(PackageRecord("shop_utils", "hub:fuzz/shop_utils", ">=0.2.0,<1.0.0", "0.3.1", "c" * 40, "/m"),),
        tables=(TableRecord("main.orders", 3, "d" * 32, True, False, (Column("id", "INTEGER"),), "model.shop.orders"),),
        model_files={"models/orders.sql": "f" * 64},
    )


def _task(split: str = "train") -> TaskRecord:
    broken = "--- a/models/orders.sql\n+++ b/models/orders.sql\n@@ -1 +1 @@\n-select 1 as id\n+select 2 as id\n"
    fix = broken.replace("-select 1", "-select X").replace("+select 2", "+select 1").replace("-select X", "-select 2")
    pin = _pin()
    return TaskRecord(
        instance_id=task_id("fuzz__shop", pin.commit, "filter.flip_equality", "models/orders.sql", broken),
        pin=pin.id,
        repo="fuzz/shop",
        base_commit=pin.commit,
        project_dir=".",
        split=split,
        split_group="fuzz/shop",
        family="filter",
        operator="filter.flip_equality",
        effect="wrong rows",
        file="models/orders.sql",
        broken_patch=broken,
        fix_patch=fix,
        wrong_repair_patches=("--- a\n+++ b\n",),
        grading=GradingSpec(
            gold=f"{'b' * 64}.duckdb", condition_tabs=("orders",), condition_cols=((0,),), ignore_orders=(True,)
        ),
        problem_statement="Orders come out wrong.",
        local_checks=LocalChecks(True, 2, 0),
        gold_sha256="b" * 64,
        license="MIT",
        versions={"duckdb": "1.5.6"},
    )


def _one_line(exc: BaseException) -> None:
    """A refusal names what is wrong on one line: no line break of its own (input it quotes is quoted with
    repr, which escapes line breaks), so the CLI's one_line has nothing to flatten."""
    message = str(exc)
    assert message.strip(), f"empty message from {type(exc).__name__}"
    assert "\n" not in message and "\r" not in message, f"not one line: {message!r}"


def _clean_cli(result: Any) -> str:
    """The CLI failed cleanly: exit 1 or 2 through SystemExit, one line on stderr, no traceback."""
    assert result.exit_code in (1, 2), (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    stderr = result.stderr
    assert "Traceback" not in stderr and "Traceback" not in result.stdout
    lines = [line for line in stderr.splitlines() if line.strip()]
    if result.exit_code == 1:
        assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    else:  # click's usage errors: usage lines, then exactly one "Error: ..." line
        assert sum(line.startswith("Error: ") for line in lines) == 1, stderr
    return stderr


# pins ----------------------------------------------------------------------------------------------

_PIN_DICT = tomllib.loads(_pin().to_toml())


@FUZZ
@given(broken_dict(_PIN_DICT, toml_values))
def test_fuzzed_pin_files_are_read_or_refused(tmp_path_factory: pytest.TempPathFactory, data: dict) -> None:
    path = tmp_path_factory.mktemp("pin") / "p.toml"
    path.write_text(tomli_w.dumps(data))
    try:
        read_pin(path)
    except PinError as exc:
        _one_line(exc)


@FUZZ
@given(junk_bytes | st.integers(min_value=0, max_value=2000))
def test_junk_and_truncated_pin_files_are_refused(tmp_path_factory: pytest.TempPathFactory, junk: Any) -> None:
    text = _pin().to_toml().encode()
    data = text[:junk] if isinstance(junk, int) else junk
    path = tmp_path_factory.mktemp("pin") / "p.toml"
    path.write_bytes(data)
    try:
        pin = read_pin(path)
    except PinError as exc:
        _one_line(exc)
    else:
        assert data == text or data.startswith(text[: len(data)])  # only the whole file (or a cut at its end)
        assert pin == _pin()


@CLI_FUZZ
@given(broken_dict(_PIN_DICT, toml_values) | junk_bytes)
def test_harvest_show_of_a_bad_pin_file_fails_in_one_line(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    folder = tmp_path_factory.mktemp("show")
    path = folder / "bad.toml"
    path.write_bytes(doc if isinstance(doc, bytes) else tomli_w.dumps(doc).encode())
    result = CliRunner().invoke(main, ["show", str(path)], env={"HARVEST_PINS": str(folder)})
    if result.exit_code != 0:
        _clean_cli(result)


# task records --------------------------------------------------------------------------------------

_TASK_DICT = json.loads(_task().to_json())


@FUZZ
@given(broken_dict(_TASK_DICT, json_values))
def test_fuzzed_task_records_are_read_or_refused(data: dict) -> None:
    try:
        task_from_dict(data)
    except TaskRecordError as exc:
        _one_line(exc)


@pytest.mark.parametrize("key", ["\r", "a\nb", "x\u2028y"])
def test_a_nested_key_with_a_line_break_is_refused_on_one_line(key: str) -> None:
    """Found by the fuzzer above: an unknown key inside local_checks was quoted raw into the message."""
    data = json.loads(json.dumps(_TASK_DICT))
    data["local_checks"] = {**data["local_checks"], key: 1}
    with pytest.raises(TaskRecordError) as caught:
        task_from_dict(data)
    _one_line(caught.value)


@FUZZ
@given(json_values)
def test_task_records_of_any_json_shape_are_refused(data: Any) -> None:
    with pytest.raises(TaskRecordError) as caught:
        task_from_dict(data)
    _one_line(caught.value)


@FUZZ
@given(junk_bytes | st.integers(min_value=0, max_value=4000))
def test_junk_and_truncated_task_files_are_refused(tmp_path_factory: pytest.TempPathFactory, junk: Any) -> None:
    text = _task().to_json().encode()
    data = text[:junk] if isinstance(junk, int) else junk
    path = tmp_path_factory.mktemp("task") / "t.json"
    path.write_bytes(data)
    try:
        record = read_task(path)
    except TaskRecordError as exc:
        _one_line(exc)
    else:
        assert record == _task()  # a task file is never read from a part of itself


@CLI_FUZZ
@given(broken_dict(_TASK_DICT, json_values) | junk_bytes)
def test_harvest_tasks_show_with_a_bad_record_fails_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, doc: Any
) -> None:
    root = tmp_path_factory.mktemp("tasks")
    folder = root / "home" / "tasks" / "train"
    folder.mkdir(parents=True)
    (folder / "bad.json").write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    env = {"HARVEST_HOME": str(root / "home"), "HARVEST_PINS": str(root / "pins")}
    result = CliRunner().invoke(main, ["tasks", "show", _task().instance_id], env=env)
    _clean_cli(result)  # nothing is pinned, so even a valid record is refused (no ledger) in one line


# training configs ----------------------------------------------------------------------------------

_CONFIG_DICT = tomllib.loads(SFT_CONFIG.read_text())


def _write_config(folder: Path, doc: Any) -> Path:
    path = folder / "run.toml"
    path.write_bytes(doc if isinstance(doc, bytes) else tomli_w.dumps(doc).encode())
    return path


@FUZZ
@given(broken_dict(_CONFIG_DICT, toml_values) | junk_bytes)
def test_fuzzed_training_configs_are_read_or_refused(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    path = _write_config(tmp_path_factory.mktemp("cfg"), doc)
    try:
        load_config(path)
    except TrainConfigError as exc:
        _one_line(exc)


@CLI_FUZZ
@given(broken_dict(_CONFIG_DICT, toml_values) | junk_bytes)
def test_harvest_train_sft_with_a_bad_config_fails_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, doc: Any
) -> None:
    path = _write_config(tmp_path_factory.mktemp("cfg"), doc)
    try:
        load_config(path)
    except TrainConfigError:
        pass
    else:
        return  # a valid config would start training; only refused ones go through the CLI
    result = CliRunner().invoke(main, ["train", "sft", "--config", str(path)])
    _clean_cli(result)


def test_valid_documents_are_accepted(tmp_path: Path) -> None:
    """The generators start from documents the readers accept (so the fuzz is not all trivially refused)."""
    pin_file = tmp_path / "p.toml"
    pin_file.write_text(_pin().to_toml())
    assert read_pin(pin_file) == _pin()
    assert task_from_dict(_TASK_DICT) == _task()
    assert load_config(SFT_CONFIG).run.kind == "sft"
    assert issubclass(TrainConfigError, HarvestError) and issubclass(TaskRecordError, HarvestError)
    assert replace(_task(), split="dev").split == "dev"


def test_a_record_written_with_the_retired_timings_field_reads_and_writes_without_it() -> None:
    """Records minted before ``timings`` moved to the mint's reports still load; the field is dropped,
    so re-writing them gives the bytes a fresh mint writes. Any other unknown field is still refused."""
    old = {**_TASK_DICT, "timings": {"confirm": 1.5}}
    record = task_from_dict(old)
    assert record == _task() and "timings" not in record.to_json()
    with pytest.raises(TaskRecordError, match="unknown field"):
        task_from_dict({**_TASK_DICT, "timing": {}})

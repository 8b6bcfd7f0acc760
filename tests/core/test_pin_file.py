"""Pin files: deterministic TOML round trip, and every malformed file refused with a PinError."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt_harvest.core.errors import PinError
from dbt_harvest.core.pin import Column, PackageRecord, Pin, TableRecord, pin_from_dict, read_pin, write_pin


def _pin() -> Pin:
    return Pin(
        id="acme__shop@0123456789ab",
        spec="acme/shop@0123456",
        url="https://github.com/acme/shop.git",
        commit="0123456789abcdef0123456789abcdef01234567",
        tree="f" * 40,
        ref="",
        root_commits=("a" * 40,),
        project_dir=".",
        project_name="shop",
        profile_schema="main",
        clock="2024-07-01 00:00:00",
        license="MIT",
        created_at="2026-01-01T00:00:00Z",
        gold_sha256="b" * 64,
        compat_patch_sha256="",
        versions={"duckdb": "1.5.6", "python": "3.11.7"},
        packages=(
            PackageRecord("shop_utils", "hub:harvestlabs/shop_utils", ">=0.2.0,<1.0.0", "0.3.1", "c" * 40, "/m"),
        ),
        tables=(TableRecord("main.orders", 3, "d" * 32, True, False, (Column("id", "INTEGER"),), "model.shop.orders"),),
        model_files={"models/orders.sql": "e" * 64},
    )


def test_round_trip_is_exact_and_deterministic(tmp_path: Path) -> None:
    pin = _pin()
    path = write_pin(pin, tmp_path)
    assert read_pin(path) == pin
    first = path.read_bytes()
    write_pin(read_pin(path), tmp_path)
    assert path.read_bytes() == first
    assert pin.gradable_tables == pin.tables


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("commit"), "missing field 'commit'"),
        (lambda d: d.update(commit="abc"), "not a 40-hex sha"),
        (lambda d: d.update(gold_sha256="zz"), "not a sha256"),
        (lambda d: d.update(extra=1), "unknown field"),
        (lambda d: d.update(format=99), "not supported"),
        (lambda d: d["tables"][0].pop("rows"), "malformed"),
        (lambda d: d.update(versions={"a": 1}), "versions"),
    ],
)
def test_malformed_pins_are_refused(tmp_path: Path, mutate, message: str) -> None:
    data = tomllib.loads(_pin().to_toml())
    mutate(data)
    path = tmp_path / "p.toml"
    path.write_text(tomli_w.dumps(data))
    with pytest.raises(PinError, match=message):
        read_pin(path)


def test_truncated_pin_is_refused(tmp_path: Path) -> None:
    text = _pin().to_toml()
    path = tmp_path / "p.toml"
    for cut in (10, len(text) // 2, len(text) - 5):
        path.write_text(text[:cut])
        with pytest.raises(PinError):
            read_pin(path)


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(sorted(Pin.__dataclass_fields__) + ["junk"]), _values, max_size=8))
def test_fuzzed_pin_dicts_never_traceback(data: dict) -> None:
    base = tomllib.loads(_pin().to_toml())
    base.update(data)
    try:
        pin_from_dict(base)
    except PinError as exc:
        assert str(exc)

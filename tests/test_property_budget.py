"""The property-test budget follows the hypothesis profile: a fifth by default, everything under deep."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.property_budget import DEEP_EXAMPLES, cases, variants

ROOT = Path(__file__).resolve().parents[1]


def test_cases_follow_the_active_profile() -> None:
    was_deep = settings.default.max_examples >= DEEP_EXAMPLES
    try:
        settings.load_profile("deep")
        assert cases(2500) == 2500
        settings.load_profile("harvest")
        assert cases(2500) == 500 and cases(100) == 50
    finally:
        settings.load_profile("deep" if was_deep else "harvest")


def test_enumerated_variants_follow_the_active_profile() -> None:
    every = {"a": 1, "b": 2, "c": 3}
    was_deep = settings.default.max_examples >= DEEP_EXAMPLES
    try:
        settings.load_profile("deep")
        assert variants(every, default=("c", "a")) == every
        settings.load_profile("harvest")
        assert list(variants(every, default=("c", "a"))) == ["a", "c"]  # the enumeration's order
        with pytest.raises(KeyError, match="'z'"):
            variants(every, default=("a", "z"))
    finally:
        settings.load_profile("deep" if was_deep else "harvest")


def test_the_command_line_profile_reaches_the_test_modules(tmp_path: Path) -> None:
    """``--hypothesis-profile=deep`` is loaded before the modules compute their counts at import."""
    probe = ROOT / "tests" / f"test_zz_profile_probe_{tmp_path.name}.py"
    probe.write_text("from tests.property_budget import cases\n\ndef test_probe():\n    print('CASES', cases(2500))\n")
    try:
        seen = {}
        for profile in ("harvest", "deep"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-s",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:xdist",
                    f"--hypothesis-profile={profile}",
                    str(probe),
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout[-2000:]
            seen[profile] = int(done.stdout.split("CASES ", 1)[1].split()[0])
        assert seen == {"harvest": 500, "deep": 2500}
    finally:
        probe.unlink()

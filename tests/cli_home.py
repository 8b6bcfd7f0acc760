"""The CLI run in-process against one test folder's home and pins (``<root>/home``, ``<root>/pins``).

Tests that drive a whole stage through ``harvest`` (history mining, the reach fixture) share these two calls
rather than each writing its own CliRunner wrapper.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dbt_harvest.cli import main


def run_cli(root: Path, *args: str) -> tuple[int, str, str]:
    """``harvest ARGS`` with HARVEST_HOME=<root>/home and HARVEST_PINS=<root>/pins: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(
        main, list(args), env={"HARVEST_HOME": str(root / "home"), "HARVEST_PINS": str(root / "pins")}
    )
    return result.exit_code, result.stdout, result.stderr


def cli_json(root: Path, *args: str) -> dict:
    """``harvest ARGS --json``, which must exit 0: its parsed output."""
    code, out, err = run_cli(root, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def error_lines(err: str) -> list[str]:
    """stderr's lines less the progress heartbeat of a slow command (``harvesting …``): what a refusal printed."""
    return [line for line in err.splitlines() if line.strip() and not line.startswith("harvesting ")]

"""Strings from repository content reach the terminal escaped (issue 14, class 7).

A repository names its folders, models and tables; an agent writes its own text. Printed raw, an ESC or
OSC sequence in one of them retitles the terminal, writes hyperlinks or the clipboard (OSC 52), clears
the screen or moves the cursor to forge output. Human output shows every control character escaped
(``\\x1b``); ``--json`` output stays exact (json escapes them itself), so machines still read the name.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.pin import Column, SkippedPath, TableRecord, write_pin
from dbt_harvest.harvester.gitrepos import make_git_repo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from test_pin_file import _pin

TITLE = "\x1b]0;owned\x07"  # OSC 0: set the window title
LINK = "\x1b]8;;https://evil.invalid\x07click\x1b]8;;\x07"  # OSC 8: a hyperlink
CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: write the clipboard
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def _run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    env = {"HARVEST_HOME": str(tmp_path / "home"), "HARVEST_PINS": str(tmp_path / "pins")}
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def _hostile_pin(tmp_path: Path) -> Path:
    pin = _pin()
    table = TableRecord(
        f"main.orders{TITLE}", 3, "d" * 32, True, False, (Column("id", "INTEGER"),), "model.shop.orders"
    )
    pin = replace(
        pin,
        tables=(table,),
        skipped=(
            SkippedPath(f"models/{CLEAR}x.sql", f"symlink leaves the tree (-> {LINK})"),
            SkippedPath(f"seeds/\u202eevil.csv{CLIPBOARD}", "file of 9 bytes is over the bound\x9b"),
        ),
    )
    return write_pin(pin, tmp_path / "pins")


def test_show_escapes_repository_strings_and_json_stays_exact(tmp_path: Path) -> None:
    path = _hostile_pin(tmp_path)
    code, out, err = _run(tmp_path, "show", str(path))
    assert code == 0, err
    for raw in RAW:
        assert raw not in out, f"{raw!r} reached the terminal"
    assert "\\x1b]0;owned\\x07" in out and "\\u202e" in out
    code, out, _ = _run(tmp_path, "show", str(path), "--json")
    shown = json.loads(out)
    assert code == 0 and shown["tables"][0]["name"] == f"main.orders{TITLE}"
    assert shown["skipped"][0]["path"] == f"models/{CLEAR}x.sql"


def test_add_escapes_names_from_the_repository_in_its_one_line_error(tmp_path: Path) -> None:
    repo = make_git_repo(
        None,
        tmp_path / "repo",
        commits=[
            {
                "files": {
                    f"proj{TITLE}{CLIPBOARD}/dbt_project.yml": "name: p\n",
                    "README.md": "no project at the root\n",
                }
            }
        ],
    )
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}")
    assert code == 1 and err.startswith("error: no dbt project") and len(err.strip().splitlines()) == 1, err
    for raw in RAW:
        assert raw not in err and raw not in out
    assert "\\x1b]0;owned\\x07" in err


def test_a_wall_bound_of_inf_is_refused_in_one_line(tmp_path: Path) -> None:
    """`--timeout inf` used to be accepted: a build without any wall bound."""
    for value in ("inf", "nan", "-1", "0", "1e12"):
        code, _, err = _run(tmp_path, "add", "acme/shop@" + "0" * 40, "--timeout", value)
        assert code in (1, 2) and "wall" in err and len(err.strip().splitlines()) == 1, (value, err)

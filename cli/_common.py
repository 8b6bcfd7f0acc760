"""Shared CLI plumbing: one place that turns a HarvestError into one clear line and exit code 1, and one
place that makes what reaches a terminal safe.

Names of tables, models and files, error messages, problem statements and patches come from repository
content or agent output. Printed raw, an ESC or OSC sequence in one of them retitles the terminal,
writes a hyperlink or the clipboard (OSC 52), clears the screen or moves the cursor to forge output.
So every human-output path shows such strings through ``shown`` (``markup`` where rich parses markup):
control characters (C0 but tab and, for blocks, newline; DEL; C1) and invisible format characters
(bidi overrides, zero-width) are written as ``\\x1b``, ``\\u202e``... And as a backstop, ``main`` wraps
stdout and stderr in ``TerminalStream``, which lets through only the styling and cursor sequences rich
and progress bars emit (CSI ... m/K/A-D/G/H/J/h/l) and escapes every other control character. JSON output
is unaffected: ``json.dumps`` already escapes every character either would touch.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import unicodedata
from collections.abc import Callable
from typing import Any, ParamSpec, TextIO, TypeVar

import click

from dbt_harvest.core.errors import HarvestError

P = ParamSpec("P")
R = TypeVar("R")

#: Sequences the backstop lets through: SGR styling, erase line/screen, cursor moves, cursor show/hide.
_ALLOWED_CSI = re.compile(r"\x1b\[[0-9;?]{0,32}[mKABCDGHJhl]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape_char(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(value: object, *, lines: bool = False) -> str:
    """``value`` as it may reach a terminal: every control and invisible format character escaped
    (``\\x1b``, ``\\u202e``); tabs kept, and line breaks too when ``lines`` (a patch, a statement)."""
    out = []
    for char in str(value):
        if char == "\t" or (lines and char == "\n"):
            out.append(char)
        elif ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or unicodedata.category(char) in ("Cf", "Zl", "Zp"):
            out.append(_escape_char(char))
        else:
            out.append(char)
    return "".join(out)


def markup(value: object) -> str:
    """``shown(value)`` for a rich markup string: its square brackets cannot open a style or a link."""
    from rich.markup import escape

    return escape(shown(value))


def say(text: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of text that may hold repository content (lines kept, everything else escaped)."""
    click.echo(shown(text, lines=True), err=err, nl=nl)


def backstop(text: str) -> str:
    """Escape every control character of ``text`` except newline, tab, carriage return and the allowed
    CSI sequences (what rich's styles and status line and progress bars write)."""
    out, pos = [], 0
    for match in _ALLOWED_CSI.finditer(text):
        out.append(
            _CONTROL.sub(
                lambda m: _escape_char(m.group()) if m.group() not in "\n\r" else m.group(), text[pos : match.start()]
            )
        )
        out.append(match.group())
        pos = match.end()
    out.append(_CONTROL.sub(lambda m: _escape_char(m.group()) if m.group() not in "\n\r" else m.group(), text[pos:]))
    return "".join(out)


class TerminalStream:
    """A text stream that passes everything through ``backstop`` (and forwards the rest to ``stream``)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("TerminalStream takes text")  # so click never treats it as a binary stream
        self._stream.write(backstop(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_terminal() -> None:
    """Wrap stdout and stderr in ``TerminalStream`` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, TerminalStream):
            setattr(sys, name, TerminalStream(stream))


def one_line(message: str) -> str:
    """``message`` on one line: line breaks it quotes from user input (a key named "a\\nb") become spaces."""
    return " ".join(message.splitlines()) or "unknown error"


def fails_cleanly(func: Callable[P, R]) -> Callable[P, R]:
    """Run a command body; a HarvestError becomes ``error: <message>`` on stderr and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except HarvestError as exc:
            click.echo(f"error: {shown(one_line(str(exc)))}", err=True)
            sys.exit(1)

    return wrapper


def echo_json(obj: Any) -> None:
    """Print one JSON object on stdout, keys sorted, for machines."""
    click.echo(json.dumps(obj, sort_keys=True, default=str))


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
#: which statement a completion gets (``core.task_record.statement_of``): `dataset build` and `export spider2`
statement_option = click.option(
    "--statement",
    type=click.Choice(["full", "documentation"]),
    default="full",
    show_default=True,
    help="A completion's statement: its documentation and the facts about the expected table (full), or the "
    "documentation alone (Spider 2.0-DBT's shape). Repairs have one statement.",
)


def parse_aliases(values: tuple[str, ...]) -> dict[str, str]:
    """``--gold-alias ID=FILE`` values as instance id -> file name (a usage error names a malformed one)."""
    out: dict[str, str] = {}
    for value in values:
        iid, sep, name = value.partition("=")
        if not sep or not iid or not name:
            raise click.BadParameter(f"{value!r}: expected INSTANCE_ID=FILE", param_hint="--gold-alias")
        out[iid] = name
    return out

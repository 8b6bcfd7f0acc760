"""Shared CLI plumbing: one place that turns a HarvestError into one clear line and exit code 1."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from core.errors import HarvestError

F = TypeVar("F", bound=Callable[..., Any])


def one_line(message: str) -> str:
    """``message`` on one line: line breaks it quotes from user input (a key named "a\\nb") become spaces."""
    return " ".join(message.splitlines()) or "unknown error"


def fails_cleanly(func: F) -> F:
    """Run a command body; a HarvestError becomes ``error: <message>`` on stderr and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HarvestError as exc:
            click.echo(f"error: {one_line(str(exc))}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def echo_json(obj: Any) -> None:
    """Print one JSON object on stdout, keys sorted, for machines."""
    click.echo(json.dumps(obj, sort_keys=True, default=str))


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")

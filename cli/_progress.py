"""Progress on stderr in every mode: a rich bar on a terminal, periodic one-line updates when piped.

Long commands (mint, audit, add, demo) report through :func:`progress` (counted work) or :func:`working`
(one long step). On a terminal they draw a rich progress bar or spinner; when stderr is not a terminal
(a pipe, a CI log, ``--json`` captured by a script) they print plain lines such as
``mint: 3/12 model shards, 40 candidates, 2 kept (1m05s)``, at most one every ``HARVEST_PROGRESS_INTERVAL``
seconds (default 10; 0 prints every update), and a last one when the work ends if any was printed. A
command that finishes (or fails) within the first interval prints no progress at all, so a quick refusal
stays one ``error:`` line. Nothing here writes to stdout, so ``--json`` keeps stdout to one JSON object.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import click

DEFAULT_INTERVAL_S = 10.0


def interval_s() -> float:
    """Seconds between two piped progress lines (HARVEST_PROGRESS_INTERVAL, default 10)."""
    raw = os.environ.get("HARVEST_PROGRESS_INTERVAL", "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S


def stderr_is_terminal() -> bool:
    """True when stderr is an interactive terminal (rich draws there); False for pipes and files."""
    stream = sys.stderr  # what click's runner and a real terminal both put there (get_text_stream is deprecated)
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def elapsed(seconds: float) -> str:
    """``1m05s`` / ``42s``: a short elapsed time for one-line updates."""
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@dataclass
class Progress:
    """Counted work: ``advance()`` once per finished unit; ``detail`` is the current one-line summary."""

    label: str
    total: int | None
    unit: str
    _interval: float = field(default_factory=interval_s)
    _done: int = 0
    _detail: str = ""
    _started: float = field(default_factory=time.monotonic)
    _last_line: float = -1.0  # monotonic time of the last printed line (the start until one is)
    _printed: int = -1  # the count the last printed line showed (-1: none printed yet)
    _bar: Any = None  # (rich Progress, task id) on a terminal

    def advance(self, step: int = 1, detail: str | None = None) -> None:
        """Count ``step`` finished units and (optionally) replace the detail text."""
        self._done += step
        if detail is not None:
            self._detail = detail
        if self._bar is not None:
            bar, task = self._bar
            bar.update(task, advance=step, description=self._describe())
            return
        now = time.monotonic()
        if now - self._last_line >= self._interval:
            self._line(now)

    def grow(self, units: int) -> None:
        """``units`` more to do than the total said (a counted run that plans a further round)."""
        if self.total is None:
            return
        self.total += units
        if self._bar is not None:
            bar, task = self._bar
            bar.update(task, total=self.total)

    def note(self, text: str) -> None:
        """One line of its own (e.g. a verdict) above the bar, or plainly when piped."""
        if self._bar is not None:
            self._bar[0].console.print(text, markup=False, highlight=False)
        else:
            click.echo(text, err=True)

    def _describe(self) -> str:
        return f"{self.label}: {self._detail}" if self._detail else self.label

    def _line(self, now: float) -> None:
        self._last_line, self._printed = now, self._done
        count = f"{self._done}/{self.total}" if self.total is not None else str(self._done)
        detail = f", {self._detail}" if self._detail else ""
        click.echo(f"{self.label}: {count} {self.unit}{detail} ({elapsed(now - self._started)})", err=True)

    def finish(self) -> None:
        """Piped: print the final count, when progress was shown and the last line did not show it."""
        if self._bar is None and 0 <= self._printed != self._done:
            self._line(time.monotonic())


@contextlib.contextmanager
def progress(label: str, total: int | None, unit: str) -> Iterator[Progress]:
    """Report counted work on stderr: a rich bar on a terminal, one-line updates otherwise."""
    tracker = Progress(label, total, unit)
    if not stderr_is_terminal():
        tracker._last_line = time.monotonic()
        yield tracker
        tracker.finish()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    console = Console(stderr=True)
    with RichProgress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        tracker._bar = (bar, bar.add_task(label, total=total))
        yield tracker


@contextlib.contextmanager
def working(description: str) -> Iterator[None]:
    """One long step: a rich spinner on a terminal; piped, a heartbeat line (``<description> (40s)``)
    every interval until the step ends (none for a step shorter than one interval)."""
    if stderr_is_terminal():
        from rich.console import Console

        with Console(stderr=True).status(description, spinner="dots"):
            yield
        return
    started = time.monotonic()
    stop = threading.Event()
    every = interval_s() or 0.5

    def beat() -> None:
        while not stop.wait(every):
            click.echo(f"{description} ({elapsed(time.monotonic() - started)})", err=True)

    thread = threading.Thread(target=beat, name="harvest-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()

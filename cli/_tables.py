"""Tables for people whose identifiers are never cut: id columns do not wrap or fold, and the console is
made as wide as the table needs (a pipe gets the whole id; a terminal wraps the line, the id stays whole)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def id_table(*headers: str, ids: tuple[str, ...] = ()) -> Table:
    """A rich Table whose ``ids`` columns (by header) are never wrapped, folded or cut with an ellipsis."""
    table = Table()
    for header in headers:
        if header in ids:
            table.add_column(header, no_wrap=True, overflow="ignore")
        else:
            table.add_column(header)
    return table


def print_table(table: Table, console: Console | None = None) -> None:
    """Print ``table`` on stdout at least as wide as its widest row needs, so no id column is cut."""
    console = console or Console()
    needed = console.measure(table, options=console.options.update_width(100_000)).maximum
    if needed > console.width:
        console = Console(
            width=needed, file=console.file, force_terminal=console.is_terminal, no_color=console.no_color
        )
    console.print(table)

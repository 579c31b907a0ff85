"""Plain tables (:mod:`providers.tables`) drawn as Rich tables for the terminal."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from providers import tables


def rich_table(plain: tables.Table, *, status: bool = False) -> Table:
    """A table of plain cells as a Rich table; with ``status`` its last column says ok in green, failures in red."""
    table = Table(title=plain.title, title_justify="left", caption=plain.caption or None, caption_justify="left")
    for col in plain.columns:
        table.add_column(col.name, justify="right" if col.right else "left")
    for row in plain.rows:
        cells = [escape(cell) for cell in row.cells]
        if status:
            cells[-1] = "[green]ok[/]" if not row.failed else f"[red]{row.failed} failed[/]: {escape(row.reason)}"
        table.add_row(*cells, style="bold" if row.strong else "dim" if row.dim else "")
    return table

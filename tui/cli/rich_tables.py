"""Plain tables (:mod:`tokrace.providers.export.tables`) drawn as Rich tables for the terminal."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from tokrace.providers.export import tables


def rich_table(plain: tables.Table, *, status: bool = False) -> Table:
    """A table of plain cells as a Rich table; with ``status`` its last column says ok in green, failures in red."""
    table = Table(title=plain.title, title_justify="left", caption=plain.caption or None, caption_justify="left")
    last = len(plain.columns) - 1
    for i, col in enumerate(plain.columns):  # names and numbers never wrap; a status message may, between words
        table.add_column(col.name, justify="right" if col.right else "left", no_wrap=not (status and i == last))
    for row in plain.rows:
        cells = [escape(cell) for cell in row.cells]
        if status:
            cells[-1] = "[green]ok[/]" if not row.failed else f"[red]{row.failed} failed[/]: {escape(row.reason)}"
        table.add_row(*cells, style="bold" if row.strong else "dim" if row.dim else "")
    return table


def markdown_table(table: Table) -> list[str]:
    """A Rich table of text cells as GitHub-flavoured Markdown lines: its title as a heading line, the header, the
    alignment, a row per row, the caption under it. What the terminal shows, cell for cell, without the colours."""
    from rich.text import Text

    from tokrace.providers.export.markdown import text

    def plain(cell: object) -> str:
        return text(Text.from_markup(cell).plain if isinstance(cell, str) else str(cell))

    lines = [f"**{plain(table.title)}**", ""] if table.title else []
    lines.append("| " + " | ".join(plain(c.header) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if c.justify == "right" else ":---" for c in table.columns) + "|")
    columns = [list(c.cells) for c in table.columns]
    lines += ["| " + " | ".join(plain(column[i]) for column in columns) + " |" for i in range(table.row_count)]
    if table.caption:
        caption = Text.from_markup(table.caption).plain if isinstance(table.caption, str) else str(table.caption)
        lines += ["", *(f"*{text(line)}*  " for line in caption.splitlines() if line.strip())]
    return lines

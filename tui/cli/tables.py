"""Tables for people, never cut: as wide as the terminal when there is one, as wide as they need when piped (or with
``--wide``), and one block per row when even the terminal is too narrow for them.

A column that must never be cut (a name, a number, a file) is ``no_wrap``: it keeps its whole width. Other
columns wrap at word boundaries down to their longest word. When that is still too wide for the terminal, every
row becomes a block of "column: value" lines instead of a table whose cells Rich would cut with an ellipsis.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Final, TextIO

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tokrace.providers.model.errors import TokraceError

PIPED_WIDTH: Final[int] = 10_000
"""Piped output or ``--wide``: as wide as the content needs (a table takes its natural width, lines never wrap)."""

_wide = False


def set_wide(wide: bool) -> None:
    """``--wide``: lay tables out at their natural width even in a terminal."""
    global _wide
    _wide = wide


def console(file: TextIO | None = None, stderr: bool = False) -> Console:
    """A console for tables and sentences: the terminal's width in a terminal, unbounded when piped or wide. On
    stderr a sentence is never wrapped: a message stays one line in a log, however long a path in it is."""
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    out = Console(file=stream, stderr=stderr, soft_wrap=stderr)
    if _wide or not out.is_terminal:
        return Console(file=stream, stderr=stderr, width=PIPED_WIDTH, soft_wrap=stderr)
    return out


def err_console() -> Console:
    """The console for messages on stderr: plain (no highlighting), one line per message, never wrapped."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def column_needs(out: Console, table: Table) -> list[int]:
    """Each column's least width at which none of its cells is cut (padding included): a ``no_wrap`` column its
    widest cell, another its longest word; a header always wraps at its words."""
    options = out.options.update_width(PIPED_WIDTH)
    pad = table.padding[1] + table.padding[3]
    needs = []
    for column in table.columns:
        cells = [Measurement.get(out, options, cell) for cell in column.cells]
        body = max((m.maximum if column.no_wrap else m.minimum for m in cells), default=0)
        head = Measurement.get(out, options, column.header).minimum if table.show_header else 0
        needs.append(max(body, head) + pad)
    return needs


def required_width(out: Console, table: Table) -> int:
    """The least width at which no cell is cut."""
    return table._extra_width + sum(column_needs(out, table))


def stacked(table: Table) -> RenderableType:
    """The table as one block per row: the first cell as a heading, then "column: value" for the others."""
    blocks: list[RenderableType] = []
    if table.title:
        blocks.append(Text.from_markup(str(table.title), style="bold") if isinstance(table.title, str)
                      else table.title)
    headers = [Text.from_markup(c.header) if isinstance(c.header, str) else c.header for c in table.columns]
    rows = len(table.rows)
    for i in range(rows):
        cells = [list(column.cells)[i] for column in table.columns]
        head = cells[0]
        blocks.append(Text.from_markup(head, style="bold") if isinstance(head, str) else head)
        for header, cell in zip(headers[1:], cells[1:], strict=True):
            value = Text.from_markup(cell) if isinstance(cell, str) else cell
            label = Text(header.plain if isinstance(header, Text) else str(header), style="dim")
            line = Text.assemble("  ", label, ": ")
            if isinstance(value, Text):
                line.append_text(value)
                blocks.append(line)
            else:
                blocks.append(Group(line, value))
    if table.caption:
        blocks.append(Text.from_markup(table.caption, style="dim") if isinstance(table.caption, str)
                      else table.caption)
    return Group(*blocks)


def surely_fits(table: Table, width: int) -> bool:
    """Whether ``table`` fits ``width`` at its natural width, told from an upper bound of that width without
    Rich's measuring (a third of the time a thousand-row table takes to print): every cell, header and the title
    at twice its characters (a wide character takes two cells; markup and emoji codes only shorten), plus every
    column's padding and the table's edges. ``False`` means "measure it": a cell that is neither a string nor a
    ``Text``, or that holds a tab."""
    pad = table.padding[1] + table.padding[3]
    total = table._extra_width
    for column in table.columns:
        widest = max(column.width or 0, column.min_width or 0)
        for cell in itertools.chain((column.header, column.footer), column.cells):
            text = cell.plain if isinstance(cell, Text) else cell
            if not isinstance(text, str) or "\t" in text:
                return False
            widest = max(widest, 2 * len(text))
        total += widest + pad
    title = table.title.plain if isinstance(table.title, Text) else table.title or ""
    return isinstance(title, str) and max(total, table.width or 0, table.min_width or 0, 2 * len(title)) <= width


def print_table(out: Console, table: Table) -> None:
    """Print ``table`` whole: as a table when it fits the console, else one block per row."""
    if surely_fits(table, out.width) or \
            Measurement.get(out, out.options.update_width(PIPED_WIDTH), table).maximum <= out.width:
        out.print(table)  # it fits at its natural width
        return
    needs = column_needs(out, table)
    if table._extra_width + sum(needs) > out.width:
        out.print(stacked(table))
        return
    for column, need in zip(table.columns, needs, strict=True):
        if column.no_wrap:  # fixed, so Rich narrows only the columns that wrap at words
            column.width = max(need - table.padding[1] - table.padding[3], 1)
            if isinstance(column.header, str):
                column.header = Text.from_markup(column.header)
            if isinstance(column.header, Text):
                column.header.no_wrap = False
    out.print(table)


def write_text(text: str, target: str, what: str = "it") -> None:
    """Write ``text`` to the file ``target``, or to stdout for ``-``; a file that cannot be written is one
    :class:`TokraceError` naming it and ``what`` it was to hold."""
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TokraceError(f"{target}: cannot write {what} ({exc.strerror or exc})") from None

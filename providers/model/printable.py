"""Text from outside (files, servers, configs) made safe to show: a terminal obeys the control characters it is
sent, so a name holding ``ESC ] 52`` would write the clipboard and ``ESC [2J`` clear the screen. Every control
character (C0, DEL, C1, and ESC itself) becomes one visible character, so offsets into the text stay true."""

from __future__ import annotations

import re
from typing import Final

_PICTURES: Final[dict[int, str]] = {
    **{code: chr(0x2400 + code) for code in range(0x20)},  # ␀ … ␟, ESC as ␛
    0x09: " ",
    0x0D: " ",
    0x7F: "\u2421",  # ␡
    **{code: "\ufffd" for code in range(0x80, 0xA0)},  # C1 controls (a lone CSI is ESC [ to many terminals)
    0x2028: " ",  # line and paragraph separators break a line in some terminals and viewers
    0x2029: " ",
}
_KEEP_NEWLINE: Final[dict[int, str]] = {**_PICTURES, 0x0A: "\n"}
_ONE_LINE: Final[dict[int, str]] = {**_PICTURES, 0x0A: " "}
_LAYOUT: Final[dict[int, str]] = {code: pic for code, pic in _PICTURES.items()
                                  if code not in (0x09, 0x0D, 0x2028, 0x2029)}
_LAYOUT_UNSAFE: Final[re.Pattern[str]] = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_UNSAFE: Final[re.Pattern[str]] = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """``text`` with every control character but the newline replaced by one visible character (a tab and a
    carriage return read as a space): an answer's body, which keeps its lines."""
    if not _UNSAFE.search(text):
        return text
    return text.translate(_KEEP_NEWLINE)


def one_line(text: str) -> str:
    """``text`` safe to show in one line (a name, an id, a table cell): every control character a visible one, a
    newline a space."""
    if not _UNSAFE.search(text):
        return text
    return text.translate(_ONE_LINE)


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a character :func:`one_line` would replace (a config refuses such a name)."""
    return _UNSAFE.search(text) is not None


def without_controls(text: str) -> str:
    """``text`` with every control character but tab, newline and carriage return replaced by its visible one: a
    file's text read in as data (a trace's messages keep their layout, and their token counts), never a command."""
    if not _LAYOUT_UNSAFE.search(text):
        return text
    return text.translate(_LAYOUT)


def deep_without_controls(value: object) -> object:
    """Every string in a JSON value (keys too) through :func:`without_controls`."""
    if isinstance(value, str):
        return without_controls(value)
    if isinstance(value, dict):
        return {without_controls(k) if isinstance(k, str) else k: deep_without_controls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [deep_without_controls(v) for v in value]
    return value


_FORMULA_STARTS: Final[tuple[str, ...]] = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's CSV injection advice)."""


def csv_cell(value: object) -> str:
    """A value as one CSV cell a spreadsheet shows and never runs: a number as written, ``None`` empty, a boolean
    ``true``/``false``, text one safe line, and text that a spreadsheet would take for a formula (``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return first) behind a ``'``, as OWASP advises. Text that is a number
    (``-0.5``) stays a number."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if text.startswith(_FORMULA_STARTS):
        try:
            float(text)
        except ValueError:
            return "'" + one_line(text)
    return one_line(text)

"""Model and server text made safe to draw: a terminal obeys the control characters in what it is sent, so an
answer holding ``ESC [2J`` would clear the screen (or set colours, move the cursor, retitle the window). Every
control character is drawn as its visible picture instead, one character for one, so offsets into the text
stay true; a tab and a carriage return read as a space."""

from __future__ import annotations

from typing import Final

_PICTURES: Final[dict[int, str]] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if code != 0x0A},  # ␀ … ␟ (a newline stays a newline)
    0x09: " ",
    0x0D: " ",
    0x7F: "\u2421",  # ␡
    **{code: "\ufffd" for code in range(0x80, 0xA0)},  # C1 controls (a lone CSI is ESC [ to many terminals)
}


def printable(text: str) -> str:
    """``text`` with every control character but the newline replaced by one visible character."""
    if text.isprintable():
        return text
    return text.translate(_PICTURES)

"""Speed-ups in type large enough for the back of a room: five rows of full blocks per character, for figures
such as "12×" or "1.6×" on a tall terminal (Textual's own ``Digits`` is three rows)."""

from __future__ import annotations

from typing import Final

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

GLYPHS: Final[dict[str, tuple[str, ...]]] = {
    "0": ("█████", "█   █", "█   █", "█   █", "█████"),
    "1": (" ██  ", "  █  ", "  █  ", "  █  ", " ███ "),
    "2": ("█████", "    █", "█████", "█    ", "█████"),
    "3": ("█████", "    █", " ████", "    █", "█████"),
    "4": ("█   █", "█   █", "█████", "    █", "    █"),
    "5": ("█████", "█    ", "█████", "    █", "█████"),
    "6": ("█████", "█    ", "█████", "█   █", "█████"),
    "7": ("█████", "    █", "   █ ", "  █  ", "  █  "),
    "8": ("█████", "█   █", "█████", "█   █", "█████"),
    "9": ("█████", "█   █", "█████", "    █", "█████"),
    ".": ("  ", "  ", "  ", "  ", "██"),
    "x": ("   ", "█ █", " █ ", "█ █", "   "),
}
"""Each character as five rows of equal width ("x" is the multiplication sign)."""

ROWS: Final[int] = 5


def big(text: str) -> list[str]:
    """``text`` as five rows, one space between characters; a character without a glyph is left out."""
    glyphs = [GLYPHS[c] for c in text if c in GLYPHS]
    return [" ".join(g[row] for g in glyphs) for row in range(ROWS)]


class BigDigits(Widget):
    """A figure in five-row block type, in the widget's colour."""

    DEFAULT_CSS = """
    BigDigits { width: auto; height: 5; }
    """

    def __init__(self, value: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.value = value

    def show(self, value: str) -> None:
        """A new figure (its width may change)."""
        if value != self.value:
            self.value = value
            self.refresh(layout=True)

    def render(self) -> Text:
        return Text("\n".join(big(self.value)), no_wrap=True, end="")

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((len(row) for row in big(self.value)), default=0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return ROWS

"""A lane's speed: a tok/s bar on a scale shared by all lanes, with a sparkline of the rate's history.

The lane view sets the numbers and calls ``refresh`` a few times a second; drawing is a line or two of
segments, never a layout pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ..render import DirectLines, content_size, repaint
from .palette import palette

EIGHTHS: Final[str] = " ▏▎▍▌▋▊▉"
SPARKS: Final[str] = "▁▂▃▄▅▆▇█"
LABEL_WIDTH: Final[int] = 15


def nice_scale(value: float) -> float:
    """The next round number at or above ``value`` (1, 2, 2.5 or 5 times a power of ten), so the scale moves
    rarely and reads well."""
    if value <= 0:
        return 10.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power + 1e-9:
            return step * power
    return 10 * power


def bar(fraction: float, width: int) -> tuple[str, str]:
    """The filled part (with an eighth-block edge) and the empty track of a bar ``width`` cells wide."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (EIGHTHS[part] if part else "")
    return filled, "─" * (width - len(filled))


def sparkline(values: Sequence[float], scale: float, width: int) -> str:
    """The last ``width`` values as bars of eighths against ``scale`` (half the scale is ▄); zero is a blank."""
    out = []
    for v in values[-width:] if width > 0 else []:
        if v <= 0:
            out.append(" ")
        else:
            out.append(SPARKS[min(max(math.ceil(v / scale * len(SPARKS)) - 1, 0), len(SPARKS) - 1)])
    return "".join(out)


class Gauge(DirectLines):
    """The bar and label on the first line, the sparkline on the second (beside the bar when one line high; a
    taller gauge draws a taller bar)."""

    DEFAULT_CSS = """
    Gauge { height: 2; }
    """

    def __init__(self, lane_index: int = 0, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lane_index = lane_index
        self.value = 0.0
        self.label = ""
        self.scale = 10.0
        self.history: list[float] = []
        self.lane_coloured = False
        """The bar in the lane's own colour, whatever its level (the presenter's view: a slow lane's sliver still
        reads as that lane from the back of a room)."""

    def set(self, value: float, label: str, scale: float, history: list[float]) -> None:
        """New numbers to draw; repaints without layout."""
        self.value, self.label, self.scale, self.history = value, label, scale, history
        repaint(self)

    def render_line(self, y: int) -> Strip:
        width, height = content_size(self)
        base = self.visual_style.rich_style
        pal = palette(self.app)
        track = base + Style(dim=True)
        label = self.label.rjust(LABEL_WIDTH)[:LABEL_WIDTH]
        fraction = self.value / self.scale if self.scale > 0 else 0.0
        colour = base + (pal.lane(self.lane_index) if self.lane_coloured else pal.gauge(fraction))
        spark_style = base + pal.lane(self.lane_index)
        if height >= 3:  # tall: the bar on every row but the last (its label on the middle one), then the sparkline
            if y < height - 1:
                filled, empty = bar(fraction, max(width - LABEL_WIDTH - 1, 1))
                middle = y == (height - 2) // 2  # the track and the label on one row only
                segments = [Segment(filled, colour), Segment(empty if middle else " " * len(empty), track),
                            Segment(" " + (label if middle else " " * LABEL_WIDTH), base)]
            else:
                segments = [Segment(sparkline(self.history, self.scale, width), spark_style)]
        elif height >= 2:
            if y == 0:
                filled, empty = bar(fraction, max(width - LABEL_WIDTH - 1, 1))
                segments = [Segment(filled, colour), Segment(empty, track), Segment(" " + label, base)]
            elif y == 1:
                segments = [Segment(sparkline(self.history, self.scale, width), spark_style)]
            else:
                segments = []
        elif y == 0:
            bar_width = max((width - LABEL_WIDTH - 2) // 2, 1) if width >= 40 else max(width - LABEL_WIDTH - 1, 1)
            filled, empty = bar(fraction, bar_width)
            segments = [Segment(filled, colour), Segment(empty, track), Segment(" " + label + " ", base)]
            if width >= 40:
                segments.append(Segment(sparkline(self.history, self.scale, width - bar_width - LABEL_WIDTH - 2),
                                        spark_style))
        else:
            segments = []
        return Strip(segments).adjust_cell_length(width, base)

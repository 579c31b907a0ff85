"""Drawing below Textual's public API: the line compositor, lines drawn straight through, the screen drawn at once.

The one place in tokrace that touches Textual's private internals (``textual<9``); ``tests/tui/app/render`` fails
naming what moved when a Textual upgrade changes them. The asciicast capture (:mod:`.capture`) is imported on its own.
"""

from .compositor import LineCompositor, content_size, repaint
from .direct_lines import DirectLines, filtered_styles, look, plain
from .internals import TESTED_TEXTUAL, FooterKey, after_first_frame, draw_by_lines, draw_now

__all__ = [
    "TESTED_TEXTUAL",
    "DirectLines",
    "FooterKey",
    "LineCompositor",
    "after_first_frame",
    "content_size",
    "draw_by_lines",
    "draw_now",
    "filtered_styles",
    "look",
    "plain",
    "repaint",
]

"""Drawing below Textual's public API: the line compositor, lines drawn straight through, the screen drawn at once.

The one place in tokrace that touches Textual's private internals (``textual<9``); ``tests/tui/app/render`` fails
naming what moved when a Textual upgrade changes them. The asciicast capture (:mod:`.capture`) is imported on its own.
"""

from .compositor import LineCompositor, content_size, repaint
from .direct_lines import DirectLines, filtered_styles, look, plain
from .internals import (
    TESTED_TEXTUAL,
    FooterKey,
    KeptParses,
    after_first_frame,
    compose_footer_at_once,
    draw_by_lines,
    draw_now,
    parse_once,
)

__all__ = [
    "TESTED_TEXTUAL",
    "DirectLines",
    "FooterKey",
    "KeptParses",
    "LineCompositor",
    "after_first_frame",
    "compose_footer_at_once",
    "content_size",
    "draw_by_lines",
    "draw_now",
    "filtered_styles",
    "look",
    "parse_once",
    "plain",
    "repaint",
]

"""The app's other touches of Textual's private internals: the footer's key widget, and a screen drawn at once.

With :mod:`.compositor`, :mod:`.direct_lines` and :mod:`.capture`, this is every use of Textual below its public
API (``textual<9`` in pyproject); the render tests fail naming what moved when an upgrade changes any of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from textual.screen import Screen
from textual.widgets._footer import FooterKey

from .compositor import LineCompositor

__all__ = ["TESTED_TEXTUAL", "FooterKey", "after_first_frame", "draw_by_lines", "draw_now"]

TESTED_TEXTUAL: Final[str] = "8."
"""The Textual release line these internals were read from and are tested against."""


def draw_by_lines(screen: Screen[Any]) -> None:
    """Give a screen the :class:`.compositor.LineCompositor`: a frame asks each widget only for the lines it
    redraws, and the screen's first frame is drawn whole by the first update written. Call it in the screen's
    ``__init__``, before anything is laid out."""
    screen._compositor = LineCompositor(lambda: screen.app._batch_count > 0)


def after_first_frame(screen: Screen[Any], callback: Callable[[], object]) -> None:
    """Call ``callback`` once the screen's first frame is written (right after, as the next thing the screen
    does); at once when it already is. The screen must draw by lines (:func:`draw_by_lines`)."""
    compositor = screen._compositor
    assert isinstance(compositor, LineCompositor), "the screen draws by lines (draw_by_lines)"
    if compositor.first_frame is None:
        callback()
    else:
        compositor.first_frame.append(lambda: screen.call_later(callback))


def draw_now(screen: Screen[Any]) -> None:
    """Lay out, composite and write what was marked for repainting now, as the screen's update timer would at its
    next tick (when anything is marked, the screen is shown and no update batch is open)."""
    if screen._dirty_widgets and screen.is_current and not screen.app._batch_count:
        screen._on_timer_update()

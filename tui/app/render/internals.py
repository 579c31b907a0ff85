"""The app's other touches of Textual's private internals: the footer's key widget, a screen drawn at once, and a
stylesheet that parses each source once.

With :mod:`.compositor`, :mod:`.direct_lines` and :mod:`.capture`, this is every use of Textual below its public
API (``textual<9`` in pyproject); the render tests fail naming what moved when an upgrade changes any of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from textual.app import App
from textual.css.stylesheet import Stylesheet
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from .compositor import LineCompositor

__all__ = ["TESTED_TEXTUAL", "FooterKey", "after_first_frame", "compose_footer_at_once", "draw_by_lines", "draw_now",
           "parse_once"]

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


def compose_footer_at_once(footer: Footer) -> None:
    """Let a footer compose its keys with the screen it is on. Textual's composes none until the screen first says
    its bindings changed, and makes them then, once the screen has been laid out: the first frame waited for it."""
    footer.set_reactive(Footer._bindings_ready, True)


def draw_now(screen: Screen[Any]) -> None:
    """Lay out, composite and write what was marked for repainting now, as the screen's update timer would at its
    next tick (when anything is marked, the screen is shown and no update batch is open)."""
    if screen._dirty_widgets and screen.is_current and not screen.app._batch_count:
        screen._on_timer_update()


class KeptParses(Stylesheet):
    """A stylesheet whose reparse keeps what it parsed, as do the theme's variables set again unchanged. Textual's
    reparse parses every source into a fresh stylesheet and drops that one's parses, so the next parse (the first
    widget of a class adds its CSS) parsed every source again; and setting the variables drops every parse, changed
    or not: the race screen's stylesheet was parsed twice, the app's and the screen's defaults three times, before
    the first frame."""

    def set_variables(self, variables: dict[str, str]) -> None:
        if variables != self._variables:  # (the parses hold the variables' values)
            super().set_variables(variables)

    def reparse(self) -> None:
        # Textual's own reparse, but with this stylesheet's parses (kept until the variables change:
        # ``set_variables`` empties them): a source parsed before is not parsed again
        fresh = Stylesheet(variables=self._variables)
        fresh._parse_cache = self._parse_cache
        for read_from, (css, is_defaults, tie_breaker, scope) in self.source.items():
            fresh.add_source(css, read_from=read_from, is_default_css=is_defaults, tie_breaker=tie_breaker,
                             scope=scope)
        try:
            fresh.parse()
        except Exception:
            self._invalid_css.update(fresh._invalid_css)  # as Textual: not parsed again before the app quits
            raise
        self._rules = fresh.rules
        self._rules_map = None
        self.source = fresh.source
        self._require_parse = False


def parse_once(app: App[Any]) -> None:
    """Give ``app`` a :class:`KeptParses` stylesheet, on the variables of its theme. Call it in the app's
    ``__init__`` once its theme is set, before anything is added to its stylesheet."""
    assert not app.stylesheet.source, "nothing is in the stylesheet yet"
    app.stylesheet = KeptParses(variables=app.get_css_variables())

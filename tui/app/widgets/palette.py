"""The app's own colours: defaults for the CSS variables, and Rich styles read back from the current theme.

Widgets that draw with Rich styles (gauges, the timeline) look their colours up here, so a theme that sets
``lane-0`` or ``seg-model`` recolours them as it recolours the stylesheet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from rich.style import Style
from textual.color import Color, ColorParseError

from tokrace.providers.model.kinds import SEGMENT_KINDS as SEGMENT_KINDS  # the one vocabulary, re-exported
from tokrace.providers.model.kinds import colour_name
from tokrace.themes.loader import DEFAULT_THEME, builtin_variables

if TYPE_CHECKING:
    from textual.app import App

APP_COLOURS: Final[dict[str, str]] = dict(builtin_variables(DEFAULT_THEME))
"""Every app variable with its default (the default theme's colours); a theme may override any of them."""

LANES: Final[int] = 6


class Palette:
    """Rich styles for the app's colours under one theme."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        def style(name: str) -> Style:
            value = variables.get(name, APP_COLOURS[name])
            try:
                colour = Color.parse(value)
            except ColorParseError:
                colour = Color.parse(APP_COLOURS[name])
            return Style(color=colour.rich_color)

        self.lanes = [style(f"lane-{i}") for i in range(LANES)]
        self.segments = {kind: style(colour_name(kind)) for kind in SEGMENT_KINDS}
        self.gauges = {level: style(f"gauge-{level}") for level in ("low", "mid", "high")}

    def lane(self, index: int) -> Style:
        return self.lanes[index % LANES]

    def segment(self, kind: str) -> Style:
        return self.segments.get(kind, self.segments["wait"])

    def gauge(self, fraction: float) -> Style:
        """The gauge colour for a value at ``fraction`` of the shared scale."""
        level = "low" if fraction < 1 / 3 else "mid" if fraction < 2 / 3 else "high"
        return self.gauges[level]


_cache: tuple[Mapping[str, str], Palette] | None = None


def palette(app: App[Any]) -> Palette:
    """The palette of the app's current theme (rebuilt only when the theme's variables change)."""
    global _cache
    variables = app.theme_variables
    if _cache is None or _cache[0] is not variables:
        _cache = (variables, Palette(variables))
    return _cache[1]

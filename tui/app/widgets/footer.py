"""The race screen's footer: Textual's compact footer, less the keys that do not fit the width, so the ones that
stay are whole and "? Help" and "q Quit" are always there (help lists every key)."""

from __future__ import annotations

from typing import Final

from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer

from ..render import FooterKey

DROP_FIRST: Final[tuple[str, ...]] = (
    "voice_faster", "what_if_faster", "focus_lane(0)", "zoom", "edit_prompt", "voice", "bottlenecks", "slower",
    "faster", "step", "details", "stop", "pause", "restart", "race",
)
"""The keys given up first when the footer is too narrow (help and quit are never given up)."""


def key_width(key: FooterKey) -> int:
    """The cells a compact footer key takes: its key, a space, its description, and the margin after it."""
    return len(key.key_display) + (1 + len(key.description) if key.description else 0) + 1


class RaceFooter(Footer):
    """A compact footer that keeps only whole keys, dropping the least needed first."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._width = 0

    def compose(self) -> ComposeResult:
        widgets: list[Widget] = list(super().compose())
        width = self.size.width or self.app.size.width
        palette = [w for w in widgets if isinstance(w, FooterKey) and w.has_class("-command-palette")]
        keys = [w for w in widgets if isinstance(w, FooterKey) and w not in palette]
        budget = width - sum(key_width(k) + 1 for k in palette)
        if sum(key_width(k) for k in keys) > budget and palette:  # the palette is ctrl+p, and named in help
            widgets = [w for w in widgets if w not in palette]
            budget = width
        for action in DROP_FIRST:
            if sum(key_width(k) for k in keys) <= budget:
                break
            keys = [k for k in keys if k.action != action]
        for key in (*keys, *palette):  # compact from the start, not restyled one by one once mounted
            key.set_reactive(FooterKey.compact, self.compact)
            key.set_class(self.compact, "-compact", update=False)
        yield from (w for w in widgets if not isinstance(w, FooterKey) or w in keys or w in palette)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)

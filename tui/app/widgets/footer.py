"""The race screen's footer: Textual's compact footer, less the keys that do not fit the width, so the ones that
stay are whole and "? Help" and "q Quit" are always there (help lists every key). Its keys are there in the
screen's first frame, and made again only when what they show changes."""

from __future__ import annotations

from typing import Final

from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer

from ..render import FooterKey, compose_footer_at_once

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
        compose_footer_at_once(self)
        self._width = 0
        self._shown: tuple[object, ...] | None = None
        """What the keys were last made from (:meth:`_showing`)."""

    def _showing(self, width: int) -> tuple[object, ...]:
        """What the footer's keys are made from: the screen's bindings on show (enabled or not) and the width."""
        shown = tuple(active[1:] for active in self.screen.active_bindings.values() if active.binding.show)
        return width, self.compact, self.show_command_palette, shown

    async def recompose(self) -> None:
        """Make the keys again when what they show changed. Textual makes them again each time the screen's
        bindings might have changed (three times as the screen starts, with the same keys: 20 ms each)."""
        if not self.is_attached or self._showing(self.size.width or self.app.size.width) != self._shown:
            await super().recompose()

    def compose(self) -> ComposeResult:
        width = self.size.width or self.app.size.width
        self._shown = self._showing(width)
        widgets: list[Widget] = list(super().compose())
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

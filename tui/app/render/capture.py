"""The frames an app writes to its terminal, kept instead of written: what the asciicast export plays."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from textual._compositor import CompositorUpdate

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.app import App
    from textual.screen import Screen


class Capture:
    """What the app writes to its terminal, kept instead of written: the app renders only what changed since its
    last update (Textual's own diff of the screen), so each frame is as small as a real terminal would get."""

    def __init__(self, app: App[Any]) -> None:
        from rich.console import Console

        self.app = app
        self.console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor",
                               legacy_windows=False)
        self.pending: list[str] = []
        display = app._display

        def capture(screen: Screen[Any], renderable: RenderableType | None) -> None:
            if isinstance(renderable, CompositorUpdate):
                self.pending.append(renderable.render_segments(self.console))
            display(screen, renderable)

        setattr(app, "_display", capture)  # noqa: B010 - the app's one path to its terminal, wrapped

    def full(self) -> str:
        """The whole screen as it is now (the first frame), dropping what was kept before."""
        update = self.app.screen._compositor.render_update(full=True, screen_stack=self.app._background_screens)
        self.pending.clear()
        return "" if update is None else self.console._render_buffer(self.console.render(update))

    def take(self) -> str:
        """What the app wrote since the last take."""
        out, self.pending = "".join(self.pending), []
        return out

"""What the load and proxy apps share: one screen, the app's themes and colours, Ctrl+C and SIGTERM/SIGHUP ending
the app with their exit codes (the race app has more to do and keeps its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen

from ..cli.signals import EXIT_INTERRUPTED
from ..cli.signals import install as install_signals
from .theming import AppThemes
from .widgets.palette import APP_COLOURS


class PlainApp(App[int]):
    """An app of one screen, themed as the race app; ``q`` on the screen, Ctrl+C or a signal end it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, system=True)]

    def __init__(self, *, animate: bool = True, themes: AppThemes | None = None) -> None:
        super().__init__()
        self.animated = animate
        self.themes = AppThemes() if themes is None else themes
        self.themes.install(self)
        self._forget_signals: Callable[[], None] | None = None

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_COLOURS)

    def action_interrupt(self) -> None:
        self.exit(None, EXIT_INTERRUPTED)

    def show(self, screen: Screen[None]) -> None:
        """Mount ``screen`` with the themes, signals taken (in a terminal) as the race app takes them."""
        if not self.is_headless:  # SIGTERM and SIGHUP end the app as q does
            self._forget_signals = install_signals(lambda code: self.exit(None, code))
        self.push_screen(screen)
        self.themes.mount(self)

    def forget_signals(self) -> None:
        if self._forget_signals is not None:
            self._forget_signals()
            self._forget_signals = None

"""The app of a load on screen (``tokrace --concurrency N``): the load screen over a :class:`LoadRunner`."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from tokrace.providers.runs.live_load import LoadRunner

from ..cli.signals import EXIT_INTERRUPTED
from ..cli.signals import install as install_signals
from .screens.load import LoadScreen
from .theming import AppThemes
from .widgets.palette import APP_COLOURS


class LoadApp(App[int]):
    """Runs one load (every level of it) on screen; the figures stay up until the user quits."""

    TITLE = "tokrace"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, system=True)]

    def __init__(self, runner: LoadRunner, *, animate: bool = True, themes: AppThemes | None = None) -> None:
        super().__init__()
        self.runner = runner
        self.animated = animate
        self.themes = AppThemes() if themes is None else themes
        self.themes.install(self)
        self._forget_signals: Callable[[], None] | None = None

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_COLOURS)

    def action_interrupt(self) -> None:
        self.exit(None, EXIT_INTERRUPTED)

    def on_mount(self) -> None:
        if not self.is_headless:
            self._forget_signals = install_signals(lambda code: self.exit(None, code))
        self.push_screen(LoadScreen(self.runner, animate=self.animated))
        self.themes.mount(self)
        self.runner.start()

    async def on_unmount(self) -> None:
        await self.runner.stop()
        if self._forget_signals is not None:
            self._forget_signals()

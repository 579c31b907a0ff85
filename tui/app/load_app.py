"""The app of a load on screen (``tokrace --concurrency N``): the load screen over a :class:`LoadRunner`."""

from __future__ import annotations

from tokrace.providers.runs.live_load import LoadRunner

from .plain_app import PlainApp
from .screens.load import LoadScreen
from .theming import AppThemes


class LoadApp(PlainApp):
    """Runs one load (every level of it) on screen; the figures stay up until the user quits."""

    TITLE = "tokrace"

    def __init__(self, runner: LoadRunner, *, animate: bool = True, themes: AppThemes | None = None) -> None:
        super().__init__(animate=animate, themes=themes)
        self.runner = runner

    def on_mount(self) -> None:
        self.show(LoadScreen(self.runner, animate=self.animated))
        self.runner.start()

    async def on_unmount(self) -> None:
        await self.runner.stop()
        self.forget_signals()

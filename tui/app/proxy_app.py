"""The app behind ``tokrace proxy``'s live screen: the proxy runs on the app's loop, the screen samples its live
model; quitting stops the proxy (its recording written, its report printed once the terminal is back)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from tokrace.providers.proxy.live import LiveProxy

from ..cli.signals import EXIT_INTERRUPTED
from ..cli.signals import install as install_signals
from .screens.proxy import ProxyScreen
from .theming import AppThemes
from .widgets.palette import APP_COLOURS

Run = Callable[[Callable[[str], None]], Awaitable[int]]
"""The proxy's run: given where to say a line, it listens (and runs the agent) until stopped; its exit code."""


class ProxyApp(App[int]):
    """The live proxy screen over a running proxy."""

    TITLE = "tokrace proxy"
    CSS = """
    ToastRack { display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, system=True)]

    def __init__(self, live: LiveProxy, now: Callable[[], float], run: Run | None, heading: str, hint: str = "",
                 *, animate: bool = True, themes: AppThemes | None = None) -> None:
        super().__init__()
        self.screen_ = ProxyScreen(live, now, heading, hint, animate=animate)
        self.run_proxy = run
        self.animated = animate
        self.themes = AppThemes() if themes is None else themes
        self.themes.install(self)
        self._forget_signals: Callable[[], None] | None = None

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_COLOURS)

    def on_mount(self) -> None:
        if not self.is_headless:  # SIGTERM and SIGHUP stop the proxy as q does
            self._forget_signals = install_signals(lambda code: self.exit(None, code))
        self.push_screen(self.screen_)
        self.themes.mount(self)
        if self.run_proxy is not None:
            self.run_worker(self._run(), group="proxy", exit_on_error=False)

    async def _run(self) -> None:
        assert self.run_proxy is not None
        code = await self.run_proxy(self.screen_.say)
        self.exit(code)

    def action_interrupt(self) -> None:
        self.exit(None, EXIT_INTERRUPTED)

    def on_unmount(self) -> None:
        if self._forget_signals is not None:
            self._forget_signals()

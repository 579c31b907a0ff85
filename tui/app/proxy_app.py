"""The app behind ``tokrace proxy``'s live screen: the proxy runs on the app's loop, the screen samples its live
model; quitting stops the proxy (its recording written, its report printed once the terminal is back)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tokrace.providers.proxy.live import LiveProxy

from .plain_app import PlainApp
from .screens.proxy import ProxyScreen
from .theming import AppThemes

Run = Callable[[Callable[[str], None]], Awaitable[int]]
"""The proxy's run: given where to say a line, it listens (and runs the agent) until stopped; its exit code."""


class ProxyApp(PlainApp):
    """The live proxy screen over a running proxy."""

    TITLE = "tokrace proxy"
    CSS = """
    ToastRack { display: none; }
    """

    def __init__(self, live: LiveProxy, now: Callable[[], float], run: Run | None, heading: str, hint: str = "",
                 *, animate: bool = True, themes: AppThemes | None = None) -> None:
        super().__init__(animate=animate, themes=themes)
        self.screen_ = ProxyScreen(live, now, heading, hint, animate=animate)
        self.run_proxy = run

    def on_mount(self) -> None:
        self.show(self.screen_)  # SIGTERM and SIGHUP stop the proxy as q does
        if self.run_proxy is not None:
            self.run_worker(self._run(), group="proxy", exit_on_error=False)

    async def _run(self) -> None:
        assert self.run_proxy is not None
        code = await self.run_proxy(self.screen_.say)
        self.exit(code)

    def on_unmount(self) -> None:
        self.forget_signals()

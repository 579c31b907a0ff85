"""The web server behind ``tokrace web``: textual-serve's server, started and stopped from our own event loop,
announcing the real port, and refusing requests that come from other web sites.

A loopback server is still reachable from any page the user's browser opens: a WebSocket is not bound by the
same-origin policy, and a DNS-rebound name reaches 127.0.0.1. So a request must name a loopback host (or the
public URL's), and a request with an ``Origin`` must come from this server's own page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from html import escape as html_escape
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

log = logging.getLogger("tokrace.web")

SHUTDOWN_S: Final[float] = 3.0
"""How long Ctrl-C waits for the tabs' handlers to finish once told to end."""
MAX_PENDING: Final[int] = 1000
"""Messages from a page its tokrace has not read yet, at most (keys and resizes; a person types far fewer)."""
QUIT_S: Final[float] = 0.5
"""How long a tab's tokrace has to quit once its WebSocket closed, before it is killed (it may be busy drawing)."""
MAX_COLUMNS: Final[int] = 500
MAX_ROWS: Final[int] = 200
"""The largest terminal a tab may ask for (a 100,000 × 100,000 screen would take gigabytes to draw)."""
_HOST_NAME: Final = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
"""A ``Host`` header that is a name or an address and a port, nothing else (it goes into the page)."""

REMOTE_FONT: Final = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*>")
"""The page's stylesheet link to Roboto Mono on Google Fonts."""
FOCUS_TERMINAL: Final[str] = """<script>
(function () {
  // Keys reach the race screen from the start, before the page is clicked: focus the terminal's input as soon
  // as xterm makes it, and again whenever the window comes back to the front.
  function focusTerminal() {
    var input = document.querySelector("#terminal textarea");
    if (input && document.activeElement !== input) { input.focus({preventScroll: true}); }
    return input !== null;
  }
  var tries = 0;
  var timer = setInterval(function () { if (focusTerminal() || ++tries > 300) { clearInterval(timer); } }, 50);
  window.addEventListener("focus", focusTerminal);
})();
</script>
"""
"""Put before the page's ``</body>``: without it, keys do nothing until the page is clicked."""


def local_font(static: str) -> str:
    """Roboto Mono from the fonts textual-serve ships, loaded with the page so the terminal measures its cells
    in it."""
    faces = "".join(
        f'@font-face {{ font-family: "Roboto Mono"; font-style: {style}; font-weight: 100 700; '
        f'src: url("{static}fonts/{file}") format("truetype"); }}\n'
        for style, file in (("normal", "RobotoMono-VariableFont_wght.ttf"),
                            ("italic", "RobotoMono-Italic-VariableFont_wght.ttf")))
    preload = f'<link rel="preload" href="{static}fonts/RobotoMono-VariableFont_wght.ttf" as="font" ' \
              'type="font/ttf" crossorigin />'
    return f"{preload}\n<style>\n{faces}</style>"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _netloc(url: str) -> str:
    return urlsplit(url).netloc.lower()


def _hostname(host_header: str) -> str:
    return (urlsplit(f"//{host_header}").hostname or "").lower()


def refusal(host_header: str, origin: str | None, *, hosts: frozenset[str] | None,
            public_url: str | None) -> str | None:
    """Why a request with this ``Host`` and ``Origin`` is refused, or ``None`` when it is served.

    With ``hosts`` (on loopback) the host must be one of them (against DNS rebinding); anywhere, an ``Origin``
    must be this server as the browser reached it, or the public URL (against other sites' pages)."""
    if not _HOST_NAME.match(host_header):
        return f"tokrace web does not answer to the host {host_header[:80]!r}"
    if hosts is not None and _hostname(host_header) not in hosts:
        return (f"tokrace web answers to {', '.join(sorted(hosts))} only, not {host_header!r} "
                "(behind a reverse proxy, give its address with --public-url; on another address, --allow-host)")
    if origin is not None:
        allowed = {host_header.lower(), *([_netloc(public_url)] if public_url else [])}
        if _netloc(origin) not in allowed or (hosts is not None and public_url is None
                                              and _hostname(_netloc(origin)) not in hosts):
            return f"tokrace web serves its own page only, not requests from {origin[:80]!r}"
    return None


def clamp_size(width: object, height: object) -> tuple[int, int]:
    """A tab's terminal size as asked for, within 1 × 1 and :data:`MAX_COLUMNS` × :data:`MAX_ROWS`."""
    return (min(max(to_int(str(width), 80), 1), MAX_COLUMNS), min(max(to_int(str(height), 24), 1), MAX_ROWS))


class WebServer(Server):
    """textual-serve's ``Server`` for one command, run by :meth:`start` and :meth:`stop` on the caller's loop."""

    def __init__(self, command: str, *, host: str, port: int, public_url: str | None,
                 hosts: frozenset[str] | None, max_tabs: int, verbose: bool = False) -> None:
        super().__init__(command, host=host, port=port, title="tokrace", public_url=public_url or "")
        self.verbose: bool = verbose
        """Log a line per request (``--verbose``); quiet by default, as a server in front of a room should be."""
        self.given_url: str | None = public_url
        """``--public-url``; without it each page points back at the address the browser used."""
        self.hosts: frozenset[str] | None = hosts
        """The host names requests may name (on loopback), or ``None`` for any."""
        self.max_tabs: int = max_tabs
        """How many tabs (each a tokrace process) may be open at once."""
        self._runner: web.AppRunner | None = None
        self._tabs: set[asyncio.Task[Any]] = set()

    async def start(self) -> int:
        """Listen (``OSError`` when that fails) and return the port listened on."""
        self.initialize_logging()
        app = await self._make_app()
        app.middlewares.append(self._guard)
        access = logging.getLogger("aiohttp.access") if self.verbose else None
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=SHUTDOWN_S, access_log=access)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        port: int = runner.addresses[0][1]
        return port

    async def stop(self) -> None:
        """Stop listening, close the tabs and end their tokrace processes."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def on_startup(self, app: web.Application) -> None:
        """Say nothing here: :mod:`tokrace.tui.cli.web` announces the address once it really listens."""

    async def on_shutdown(self, app: web.Application) -> None:
        """End every open tab now rather than after the shutdown timeout: each tab's handler, cancelled, closes
        its WebSocket and tells its tokrace to quit."""
        for tab in self._tabs:
            tab.cancel()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        problem = refusal(request.host, request.headers.get("Origin"), hosts=self.hosts,
                          public_url=self.given_url)
        if problem is not None:
            raise web.HTTPForbidden(text=problem)
        if request.path != "/ws":
            return await handler(request)
        if len(self._tabs) >= self.max_tabs:
            log.warning("a tab was turned away: %d are open (--max-tabs)", len(self._tabs))
            raise web.HTTPServiceUnavailable(text=f"tokrace web: {len(self._tabs)} tabs are open already, the most "
                                                  "it runs at once (--max-tabs); close one and reload")
        tab = asyncio.current_task()
        assert tab is not None  # aiohttp runs each request in a task
        self._tabs.add(tab)
        try:
            return await handler(request)
        finally:
            self._tabs.discard(tab)

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """The page, pointing its scripts and WebSocket at the public URL or at the address the browser used
        (textual-serve would use ``http://HOST:PORT``, which is wrong for 0.0.0.0, IPv6 and port 0), and taking
        its font from this server rather than from Google's: the page works offline and tells no one else."""
        base = self.given_url or f"{request.scheme}://{request.host}"  # the host was checked by the guard
        scheme, rest = base.split(":", 1)
        static = html_escape(f"{base}/static/")
        html = aiohttp_jinja2.render_string("app_index.html", request, {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{'wss' if scheme == 'https' else 'ws'}:{rest}/ws",
            "config": {"static": {"url": static}},
            "application": {"name": self.title},
        })
        html = REMOTE_FONT.sub(lambda _: local_font(static), html).replace("</body>", FOCUS_TERMINAL + "</body>", 1)
        return web.Response(text=html, content_type="text/html")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's, bounded: the terminal size clamped (at the start and on every resize), and the tab's
        tokrace ended within :data:`QUIT_S` of its WebSocket closing, asked to quit first and killed if busy."""
        websocket = web.WebSocketResponse(heartbeat=15)
        width, height = clamp_size(request.query.get("width", "80"), request.query.get("height", "24"))
        service: AppService | None = None
        try:
            await websocket.prepare(request)
            async def close() -> None:
                await websocket.close()

            service = AppService(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=close, download_manager=self.download_manager, debug=self.debug)
            await service.start(width, height)
            await self._messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # one tab's failure is logged, the server goes on
            log.exception(error)
        finally:
            if service is not None:
                await end_tab(service)
        return websocket

    async def _messages(self, websocket: web.WebSocketResponse, service: AppService) -> None:
        """Read the page's messages until the WebSocket closes, handing them on from another task: a tab's tokrace
        too busy to read its input (its pipe full) must not keep the close from being seen."""
        pending: asyncio.Queue[Any] = asyncio.Queue(maxsize=MAX_PENDING)
        forward = asyncio.create_task(self._forward(pending, websocket, service))
        try:
            async for message in websocket:
                if forward.done():
                    break
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    pending.put_nowait(message)
                except asyncio.QueueFull:
                    log.warning("a tab was closed: its tokrace read none of its last %d messages", MAX_PENDING)
                    break
        finally:
            forward.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await forward

    async def _forward(self, pending: asyncio.Queue[Any], websocket: web.WebSocketResponse,
                       service: AppService) -> None:
        while True:
            message = await pending.get()
            try:
                envelope = message.json()
                kind, data = envelope[0], envelope[1]
            except (ValueError, TypeError, IndexError, KeyError):
                continue  # not an envelope: ignored, as textual-serve's own page never sends one
            if kind == "stdin" and isinstance(data, str):
                await service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await service.set_terminal_size(*clamp_size(data.get("width"), data.get("height")))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await service.blur()
            elif kind == "focus":
                await service.focus()


async def end_tab(service: AppService, wait_s: float = QUIT_S) -> None:
    """Ask a tab's tokrace to quit; kill it when it has not within ``wait_s`` (whatever it was doing)."""
    deadline = asyncio.get_running_loop().time() + wait_s
    stopping = asyncio.ensure_future(service.stop())  # (it may also end early: its page is gone)
    await asyncio.wait({stopping}, timeout=wait_s)
    process = service._process  # textual-serve keeps the process to itself; the command is exec'd, so it is tokrace
    if process is not None and process.returncode is None:
        try:
            await asyncio.wait_for(process.wait(), max(deadline - asyncio.get_running_loop().time(), 0.0))
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(stopping, SHUTDOWN_S)

"""``tokrace web``: the race screen served to browsers with textual-serve, each tab running its own tokrace.

The tabs run ``tokrace ARGS`` as a child process under Textual's web driver; this module builds that command
(quoted, with this very Python), checks the arguments once before serving, and guards the loopback server
against other web sites (a page elsewhere must not start races with the user's keys).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import ipaddress
import shlex
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from tokrace.providers.model.errors import TokraceError

if TYPE_CHECKING:
    from ..web.server import WebServer

DEFAULT_HOST: Final[str] = "127.0.0.1"
"""Loopback: only this machine reaches the screen unless ``--host`` says otherwise."""
DEFAULT_PORT: Final[int] = 8000
"""textual-serve's usual port."""
DEFAULT_MAX_TABS: Final[int] = 8
"""Each tab is a tokrace process (tens of megabytes): enough for a room, not enough to exhaust the machine."""
LOOPBACK_NAMES: Final[frozenset[str]] = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names a browser on this machine uses for a loopback server."""


class WebError(TokraceError):
    """``tokrace web`` cannot serve: a bad address, a port in use, a bad public URL."""


def add_web_parser(sub: Any, positive_int: Callable[[str], int]) -> None:
    """The ``web`` subcommand: its own options; every other argument is the tabs' ``tokrace`` arguments."""
    web = sub.add_parser(
        "web", help="serve the race screen to browsers: each tab runs its own tokrace",
        usage="tokrace web [--host HOST] [--port PORT] [--max-tabs N] [--allow-host NAME] [--public-url URL] "
              "[--verbose] [tokrace arguments...]",
        description="Serve the race screen on http://HOST:PORT with textual-serve. Each browser tab runs its own "
                    "tokrace with the arguments that follow the web options, exactly as `tokrace ARGS` would "
                    "in a terminal: the configured race, `demo`, or `replay FILE`, with --config, --tiers, "
                    "--scenario, --theme and the rest. There is no authentication: it listens on loopback "
                    "unless --host says otherwise.",
        epilog="Examples: tokrace web · tokrace web --port 8080 --config team.toml --theme projector · "
               "tokrace web replay run.jsonl --speed 2 · tokrace web --host 0.0.0.0 demo",
        allow_abbrev=False)  # an abbreviated tokrace option must reach the tabs, never match --port or --host
    web.add_argument("--host", default=DEFAULT_HOST,
                     help=f"address to listen on (default {DEFAULT_HOST}; any other address is reachable by "
                          "others, with no authentication)")
    web.add_argument("--port", type=_port, default=DEFAULT_PORT,
                     help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)")
    web.add_argument("--max-tabs", type=positive_int, default=DEFAULT_MAX_TABS, metavar="N",
                     help=f"tabs open at once, each its own tokrace process (default {DEFAULT_MAX_TABS}); one more "
                          "is turned away until another closes")
    web.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                     help="beyond loopback: a host name browsers may use to reach this server (again for more); "
                          "default: this machine's names and the address listened on. Any other Host is refused, "
                          "so a page that DNS-rebinds its name to this machine cannot drive it")
    web.add_argument("--public-url", metavar="URL", type=_public_url,
                     help="the address browsers use, when a reverse proxy serves tokrace under another one "
                          "(e.g. https://example.org/tokrace)")
    web.add_argument("--verbose", action="store_true",
                     help="log a line per request on stderr (default: quiet, only the address, warnings and "
                          "errors)")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def _public_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// address without a query, got {text!r}")
    return text.rstrip("/")


def screen_command(tokrace_args: Sequence[str]) -> str:
    """The shell command one tab runs: this Python running this tokrace with ``tokrace_args``, every word quoted.

    textual-serve hands the command to a shell, so an argument such as ``--prompt "$(rm -rf ~)"`` must reach
    tokrace as text, never run. ``exec`` leaves no shell between the server and the tab's tokrace; ``-P`` keeps a
    ``tui`` folder in the current directory from shadowing this tokrace."""
    return "exec " + shlex.join([sys.executable, "-P", "-m", "tokrace.tui.main", *tokrace_args])


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def no_authentication_warning(host: str, port: int) -> str:
    """What ``tokrace web`` says on stderr when it listens beyond loopback."""
    return (f"tokrace web: warning: listening on {host}:{port} with no authentication; anyone who can reach it "
            "can start races with the configured tiers and their API keys (and spend on them). Only this "
            "machine's names and --allow-host names are answered (a web page cannot DNS-rebind to it), but "
            "any browser on the network can still open it. Put it behind a reverse proxy that authenticates, or "
            "use the default --host 127.0.0.1.")


def tab_arguments(extra: Sequence[str]) -> list[str]:
    """The tabs' tokrace arguments from what ``tokrace web`` did not take itself (a leading ``--`` dropped)."""
    args = list(extra)
    return args[1:] if args[:1] == ["--"] else args


def serve_web(args: argparse.Namespace, check: Callable[[Sequence[str]], None]) -> int:
    """Check the tabs' arguments with ``check`` (raising a one-line error), then serve until Ctrl-C."""
    tokrace_args = tab_arguments(args.tokrace_args)
    check(tokrace_args)
    from ..web.server import WebServer

    loopback = is_loopback(args.host)
    server = WebServer(screen_command(tokrace_args), host=args.host, port=args.port, public_url=args.public_url,
                       hosts=allowed_hosts(args.public_url, args.host, args.allow_host), max_tabs=args.max_tabs,
                       verbose=args.verbose)
    with contextlib.suppress(KeyboardInterrupt):  # where signal handlers cannot be set, Ctrl-C raises instead
        asyncio.run(_serve(server, loopback, shlex.join(["tokrace", *tokrace_args])))
    print("tokrace web: stopped", file=sys.stderr)
    return 0


def allowed_hosts(public_url: str | None, host: str = DEFAULT_HOST, allow: Sequence[str] = ()) -> frozenset[str]:
    """The host names the server answers to: loopback's, the public URL's behind a reverse proxy, and ``allow``
    (``--allow-host``); beyond loopback also this machine's names and the address listened on (for a wildcard
    address, this machine's addresses)."""
    public = urlsplit(public_url).hostname if public_url else None
    names = {*LOOPBACK_NAMES, *(name.lower().strip("[]") for name in allow), *([public.lower()] if public else [])}
    if not is_loopback(host):
        names |= own_names(host)
    return frozenset(names)


def own_names(host: str) -> set[str]:
    """This machine's names, and ``host`` (or, when it is a wildcard address, this machine's addresses)."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    if host not in ("0.0.0.0", "::", ""):
        names.add(host.lower().strip("[]"))
        return names
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(info[4][0]).lower())
    return names


async def _serve(server: WebServer, loopback: bool, tab: str) -> None:
    """Listen, say where, and serve until SIGINT or SIGTERM; then end every tab's tokrace."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        port = await server.start()
    except OSError as exc:
        raise WebError(_listen_problem(server.host, server.port, exc)) from None
    url = server.given_url or f"http://{_url_host(server.host)}:{port}"
    if not loopback:
        print(no_authentication_warning(server.host, port), file=sys.stderr, flush=True)
    print(f"tokrace web: serving the race screen on {url}/ (each browser tab runs its own `{tab}`; Ctrl-C stops)",
          flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()


def _url_host(host: str) -> str:
    """``host`` as it goes in a URL: an IPv6 address in brackets, a wildcard address as this machine's name."""
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def _listen_problem(host: str, port: int, exc: OSError) -> str:
    """One line for why the server could not listen on ``host:port``."""
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is in use (another tokrace web?); choose another with --port N, or --port 0"
    if exc.errno == errno.EACCES:
        return f"not allowed to listen on port {port} (ports below 1024 need privileges); choose --port 1024 or more"
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host!r}: not an address of this machine (use --host 127.0.0.1 or 0.0.0.0)"
    return f"cannot listen on {host}:{port} ({exc.strerror or exc})"

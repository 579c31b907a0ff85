"""The transport a provider's HTTP client is made with, and the first-use costs paid before the race."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import urlsplit

import httpx

from .backend import StampedBackend
from .transport import LeanTransport


async def first_use(base_url: str, backend: StampedBackend | None = None) -> None:
    """Pay before the race what the first request would otherwise pay inside its ``connect_s``: on httpx's own
    transport (``backend`` None: behind a proxy, or a test's) httpcore's lazy imports (its locks and events load
    anyio's asyncio backend on first use, h11 on the first HTTP/1.1 connection) and the event loop's resolver
    thread; on the socket-time transport a parked reader thread, and the name lookup (which also makes the first
    connection's socket). Measured on the first request of a process: 25–55 ms before, all of it set-up."""
    if backend is None:
        import anyio
        import h11  # noqa: F401 - imported for its side effect: loaded now, not on the first connection
        import httpcore._async.http11  # noqa: F401

        anyio.Event().set()
        with anyio.CancelScope(shield=True):
            pass
    else:
        backend.reserve_reader()
    parts = urlsplit(base_url)
    if parts.hostname:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with contextlib.suppress(OSError):
            if backend is not None:
                await backend.resolve(parts.hostname, port)
            else:
                await asyncio.get_running_loop().getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)


def stamped_transport(backend: StampedBackend | None = None) -> httpx.AsyncBaseTransport | None:
    """The socket-time transport (:class:`~.transport.LeanTransport` over :class:`~.backend.StampedBackend`);
    ``None`` (httpx's own) behind a proxy, which it does not speak through."""
    import urllib.request

    if urllib.request.getproxies():
        return None
    context = httpx.create_ssl_context(trust_env=True)
    return LeanTransport(backend or StampedBackend(), context)

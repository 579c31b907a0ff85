"""The moments of one request attempt on the lane's clock: from httpx's ``trace`` extension and the socket's
stamps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, Final

from ...model.events import Segment
from ...timing.clock import Clock

SMALL_BODY: Final[int] = 64 * 1024
"""Up to this size a request body goes to the socket in one write that never waits (asyncio's write buffer
limit), so the moment before that write is the moment the request is on the wire."""


def at_socket(clock: Clock, perf: float | None, fallback: float | None = None) -> float:
    """A ``time.perf_counter()`` moment noted at the socket, on a lane's (real) clock; else ``fallback`` or now."""
    if perf is None or clock.virtual:
        return fallback if fallback is not None else clock.now()
    return clock.now() - max(time.perf_counter() - perf, 0.0)


class AttemptMarks:
    """Collects the moments httpx's ``trace`` extension reports for one attempt, on the lane's clock.

    On the socket-time transport every write is one blocking ``sendall`` on the event loop's thread, so the request
    is on the wire when the transport says (``on_wire`` in ``send_request_body.complete``: as the one call that
    sends a small request began), or else when its body's write returned. On httpx's own transport
    (a proxy, a test's mock) ``.complete`` fires only after the I/O library has yielded to the event loop, i.e. as
    late as the other lanes make it: there the end is taken when the body is handed to the socket
    (``.started``), the write that follows being one non-blocking syscall for a small body. A big body may have to
    wait for the network, so there the end of the write counts. ``wire`` resolves once the request is on the wire,
    so that the connect segment goes out then, not when the response head arrives."""

    __slots__ = ("big", "clock", "exact", "head", "new_connection", "on_wire", "wire")

    def __init__(self, clock: Clock, body_size: int = 0, exact_writes: bool = False) -> None:
        self.clock = clock
        self.big = body_size > SMALL_BODY
        self.exact = exact_writes or self.big
        self.on_wire: float | None = None
        self.head: float | None = None
        self.new_connection = False
        self.wire: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        if name.endswith(".send_request_body.started"):
            if not self.exact:
                self.on_wire = self.clock.now()
        elif name.endswith(".send_request_body.complete"):
            if self.exact or self.on_wire is None:
                sent = info.get("on_wire")
                self.on_wire = at_socket(self.clock, sent) if isinstance(sent, float) else self.clock.now()
            if not self.wire.done():
                self.wire.set_result(None)
        elif name.endswith(".receive_response_headers.complete"):
            self.head = self.clock.now()
        elif name == "connection.connect_tcp.complete":
            self.new_connection = True

    def connect_segment(self, attempt: float) -> Segment:
        """Request start → request on the wire; labelled with whether a connection had to be opened."""
        end = self.on_wire if self.on_wire is not None else attempt
        label = "new connection" if self.new_connection else "reused connection"
        return Segment(t=end, seg="connect", start=attempt, end=end, label=label)

    def after_connect(self, attempt: float, connected: bool) -> float:
        """Where a failed attempt's retry segment starts: after its connect segment when that went out already."""
        return self.on_wire if connected and self.on_wire is not None else attempt

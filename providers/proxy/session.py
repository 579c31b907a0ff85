"""A proxy session: the relay, its book of calls, and the recording they write (a tokrace recording, so also a trace:
docs/design.md §7, §12); the secrets clients send are masked out of it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ..model.events import Event
from ..model.masking import Masker
from ..recording.format import RecordingError
from ..recording.writer import Recorder
from .book import SESSION_LOOP, Book
from .http1 import Head
from .meter import PROTOCOLS, CallMeter, stream_decoder
from .pauses import Collector
from .relay import ProxyServer
from .routes import Routes
from .shadow import Shadow

SECRET_HEADERS: Final[frozenset[str]] = frozenset({"authorization", "x-api-key", "api-key", "cookie",
                                                   "proxy-authorization", "x-goog-api-key"})
"""Request headers whose values are credentials: masked wherever they might show."""

FLUSH_S: Final[float] = 0.032
"""How often the recording's kept lines are written (a crash loses at most this much; docs/design.md §7): the
relay's loop never waits on a write per event."""


def header_secrets(head: Head) -> list[str]:
    """The credential values a request carries (a bearer token also without its scheme; each cookie's value)."""
    out: list[str] = []
    for name, value in head.headers:
        lowered = name.lower()
        if lowered not in SECRET_HEADERS or not value:
            continue
        out.append(value)
        scheme, _, rest = value.partition(" ")
        if rest and scheme.lower() in ("bearer", "basic", "token"):
            out.append(rest.strip())
        if lowered == "cookie":
            out.extend(part.partition("=")[2].strip() for part in value.split(";") if "=" in part)
    return [v for v in out if v]


class ProxySession:
    """Relays to ``routes``, books every model call on a lane of its session, records them to ``record`` (unless
    ``None``) and hands each event to ``listeners``."""

    def __init__(self, routes: Routes, record: Path | None, *, listeners: list[Callable[[int, Event], None]]
                 | None = None, shadow: Shadow | None = None) -> None:
        self.routes = routes
        self.listeners = list(listeners or [])
        self.recorder: Recorder | None = None
        self._flusher: asyncio.TimerHandle | None = None
        self._closed = False
        if record is not None:
            upstreams = sorted({routes.anthropic.public(), routes.openai.public()})
            self.recorder = Recorder(record, "", [], scenario=SESSION_LOOP,
                                     extra={"source": "tokrace proxy", "upstreams": upstreams}, buffered=True)
        self.masker = Masker()
        """Masks what the listeners (the live screen) are handed: the clients' keys, and every key's shape."""
        self.book = Book(self._emit, seen=self._seen)
        self.collector = Collector()
        """Runs the garbage collector's collections off the relay's path (once started)."""
        self.book.work.caught_up = self.collector.caught_up
        self.server = ProxyServer(routes, self.book.observer)
        self.shadow = shadow
        self.notes: list[str] = []
        """What the proxy could not do, each said once (a call a shadow could not copy)."""
        self._shadows: set[asyncio.Task[str]] = set()
        if shadow is not None:
            self.book.opened = self._shadow
            keys = [value for _, value in shadow.upstream.auth]
            self.masker.add([*keys, *(k.split(" ", 1)[-1] for k in keys)])
            if self.recorder is not None:
                self.recorder.also_mask([*keys, *(k.split(" ", 1)[-1] for k in keys)])

    def _shadow(self, call: CallMeter) -> None:
        """Send the call's copy to the shadow tier, on a lane of its own."""
        assert self.shadow is not None and call.head is not None
        made = self.shadow.copy(call.path, call.protocol, call.head, call.request_copy)
        if isinstance(made, str):
            if made not in self.notes:
                self.notes.append(made)
            return
        head, body = made
        meter = self.book.observer("POST", None, shadow=self.shadow.label)
        task = asyncio.ensure_future(self.server.send(self.shadow.upstream, head, body, meter))
        self._shadows.add(task)
        task.add_done_callback(self._shadows.discard)

    def _seen(self, head: Head) -> None:
        secrets = header_secrets(head)
        if secrets:
            if self.recorder is not None:
                self.recorder.also_mask(secrets)
            self.masker.add(secrets)

    def _emit(self, lane: int, event: Event) -> None:
        if self.recorder is not None:
            self.recorder(lane, event)
        if self.listeners:
            event = self.masker(event)
            for listener in self.listeners:
                listener(lane, event)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.book.zero = time.perf_counter()
        await self.server.start(host, port)
        loop = asyncio.get_running_loop()
        if self.recorder is not None:
            self._flusher = loop.call_later(FLUSH_S, self._flush)
        loop.call_soon(self._settle)

    def _settle(self) -> None:
        """Before the first call: load what reading one needs (a first call's measuring would hold its chunks
        back for the imports, a third of a second), then hand the collections to the collector."""
        if self._closed:
            return
        for protocol in PROTOCOLS:
            stream_decoder(protocol)
        self.collector.start()

    def _flush(self) -> None:
        """Write the recording's kept lines, every ``FLUSH_S``: a timer's callback, which asyncio runs after the
        sockets' callbacks of its turn (a chunk that came meanwhile goes on first; a task's step would run before)."""
        assert self.recorder is not None
        if self.recorder.closed:
            return
        with contextlib.suppress(RecordingError):  # (kept in the recorder's problem)
            self.recorder.flush()
        self._flusher = asyncio.get_running_loop().call_later(FLUSH_S, self._flush)

    def now(self) -> float:
        """The session's clock: seconds since the proxy started listening."""
        return time.perf_counter() - (self.book.zero if self.book.zero is not None else time.perf_counter())

    async def close(self) -> None:
        """Stop listening, end every lane and write the recording to its last line (once; again does nothing)."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._shadows):
            task.cancel()
        await asyncio.gather(*self._shadows, return_exceptions=True)
        await self.server.close()
        self.book.work.drain()  # what the relay handed on and was not yet read: the last call's end among it
        self.collector.stop()
        self.book.close()
        if self._flusher is not None:
            self._flusher.cancel()
        if self.recorder is not None:
            with contextlib.suppress(RecordingError):
                self.recorder.close()

    @property
    def problem(self) -> str | None:
        """Why the recording stopped early, if it did."""
        return None if self.recorder is None else self.recorder.problem

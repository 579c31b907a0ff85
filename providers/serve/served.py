"""What ``tokrace serve`` did for each request, on its own clock, and how the moments it notes are made the kernel's
transmit stamps of the bytes."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ..timing.clock import Clock
from ..timing.stamped_sockets import ArrivalReader


@dataclass(slots=True)
class Served:
    """What the server did for one request, on its own clock: the ground truth a client's numbers are held to."""

    request_id: str
    path: str
    status: int
    received: float
    """When the request's last byte was read."""
    head: float | None = None
    first: float | None = None
    """When the first piece of generated text was written."""
    last: float | None = None
    pieces: int = 0
    tokens: int = 0
    first_tokens: int = 0
    fault: str | None = None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first is None else self.first - self.received

    @property
    def decode_tok_s(self) -> float | None:
        if self.first is None or self.last is None or self.last <= self.first:
            return None
        return (self.tokens - self.first_tokens) / (self.last - self.first)


class Notes:
    """When the server wrote what a :class:`Served` record holds (``head``, ``first``, ``last``): each noted as it is
    written, then made the kernel's transmit stamp of its last byte once that is in (where the connection's sends
    are stamped). On loopback the stamp is there as the write returns; TCP may send later than that (holding bytes
    back while earlier ones are still below it, on a busy core until the kernel gets to them), and then the bytes
    went out later than they were written."""

    __slots__ = ("clock", "pending", "record", "sends", "transport")

    def __init__(self, record: Served, clock: Clock, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        conn = reader.conn if isinstance(reader, ArrivalReader) else None
        self.record = record
        self.clock = clock
        self.sends = conn.sends if conn is not None and not clock.virtual else None
        self.transport = writer.transport
        self.pending: dict[str, int] = {}
        """The fields still waiting for their stamp: how many bytes had been written in all when each was noted."""

    def written(self, *fields: str) -> float:
        """Note ``fields`` as written now (what was just written); the moment it went out, as known so far."""
        now = self.clock.now()
        sends = self.sends
        if sends is None:
            for name in fields:
                setattr(self.record, name, now)
            return now
        queued = self.transport.get_write_buffer_size() if isinstance(self.transport, asyncio.WriteTransport) else 0
        end = sends.total + queued
        self.settle()  # the earlier ones first: stamps are looked up in the order of the bytes
        went = sends.time_of(end)
        for name in fields:
            setattr(self.record, name, now if went is None else went)
            if went is None:
                self.pending[name] = end
            else:
                self.pending.pop(name, None)
        return now if went is None else went

    def settle(self) -> None:
        """Put in the stamps that came since."""
        if self.sends is None:
            return
        for name, end in sorted(self.pending.items(), key=lambda item: item[1]):
            went = self.sends.time_of(end)
            if went is None:
                break
            setattr(self.record, name, went)
            del self.pending[name]

    async def settled(self, wait: float = 0.05) -> None:
        """Wait (up to ``wait`` seconds) until every field has its stamp; a field without one keeps its note."""
        deadline = time.perf_counter() + wait
        self.settle()
        while self.pending and time.perf_counter() < deadline:
            await asyncio.sleep(0.001)
            self.settle()

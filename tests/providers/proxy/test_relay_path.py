"""What sits between a chunk's arrival and its forwarding: nothing but the write (the framing is found after it, the
measuring runs in slices that let the sockets go first)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from tokrace.providers.proxy import meter
from tokrace.providers.proxy.http1 import BodyEnd, parse_head
from tokrace.providers.proxy.meter import MeterQueue
from tokrace.providers.proxy.relay import _Exchange


class Client:
    """A client transport that notes what was written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_write_buffer_size(self) -> int:
        return 0


async def test_a_heads_first_body_bytes_are_written_before_the_head_is_measured() -> None:
    client = Client()
    written_then: list[int] = []

    class Observer:
        def response_head(self, t: float, head: object) -> None:
            written_then.append(len(client.written))

        def response_body(self, t: float, pieces: list[bytes]) -> None:
            pass

    exchange = _Exchange(client, "POST", Observer())  # type: ignore[arg-type]
    exchange.upstream_data(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n", 0.0)
    assert written_then == [2] and client.written[1] == b"5\r\nhello\r\n"


async def test_a_chunked_piece_is_written_to_the_client_before_its_framing_is_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = Client()
    exchange = _Exchange(client, "POST", None)  # type: ignore[arg-type]
    exchange.upstream_data(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", 0.0)
    seen: list[int] = []
    feed = BodyEnd.feed

    def noting(self: BodyEnd, data: bytes) -> tuple[int, list[bytes]]:
        seen.append(len(client.written))
        return feed(self, data)

    monkeypatch.setattr(BodyEnd, "feed", noting)
    exchange.upstream_data(b"5\r\nhello\r\n", 0.1)
    assert client.written[-1] == b"5\r\nhello\r\n" and seen == [2]  # the head, then this piece, then the framing


async def test_a_pieces_kernel_stamp_is_worked_out_after_it_was_written() -> None:
    from tokrace.providers.proxy.relay import _Upstreaming
    from tokrace.providers.timing.stamped_sockets import StampedConnection

    client = Client()
    asked: list[int] = []
    stamps: list[float] = []

    class Sock(StampedConnection):
        @property
        def stamp(self) -> float | None:
            asked.append(len(client.written))
            return 12.5

    class Observer:
        def response_head(self, t: float, head: object) -> None:
            pass

        def response_body(self, t: float, pieces: list[bytes]) -> None:
            stamps.append(t)

    exchange = _Exchange(client, "POST", Observer())  # type: ignore[arg-type]
    exchange.upstream_data(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", 0.0)
    upstream = _Upstreaming()
    with Sock() as sock:
        upstream.sock, upstream.exchange = sock, exchange
        upstream.data_received(b"5\r\nhello\r\n")
    assert client.written[-1] == b"5\r\nhello\r\n" and asked == [2] and stamps == [12.5]


async def test_bytes_after_a_chunked_answers_end_end_the_clients_connection() -> None:
    client = Client()
    exchange = _Exchange(client, "POST", None)  # type: ignore[arg-type]
    exchange.upstream_data(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\nJUNK", 0.0)
    assert exchange.finished.result() == "done" and exchange.close_client and not exchange.reusable


class Readable:
    """A socket whose bytes wait in the kernel before the loop's next look, noted when the loop reads them."""

    def __init__(self, order: list[Any]) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.ours.setblocking(False)
        self.order = order
        asyncio.get_running_loop().add_reader(self.ours, self._read)

    def _read(self) -> None:
        self.order.append(self.ours.recv(100).decode())

    def send(self, text: str) -> None:
        self.theirs.send(text.encode())

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.ours)
        self.ours.close()
        self.theirs.close()


async def turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_chunk_that_came_right_behind_the_last_is_forwarded_before_that_ones_measuring() -> None:
    """A burst: the next chunk is in the kernel by the time the last one's measuring would start; the loop's look at
    its sockets comes first (before, a measuring queued with call_soon ran ahead of that look's callbacks)."""
    order: list[Any] = []
    chunk = Readable(order)

    class Step:
        def step(self, kind: str, t: float, value: Any) -> bool:
            order.append(value)
            return True

    queue = MeterQueue()

    def forwarded() -> None:  # the relay's callback for one chunk: forward it, hand its copy on
        queue.push(Step(), "body", 0.0, "measured")  # type: ignore[arg-type]
        chunk.send("next chunk")

    asyncio.get_running_loop().call_soon(forwarded)
    await turns(4)
    chunk.close()
    assert order == ["next chunk", "measured"]


async def test_the_measuring_lets_the_sockets_go_first_after_each_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[Any] = []
    chunk = Readable(order)

    class Step:
        def step(self, kind: str, t: float, value: Any) -> bool:
            order.append(value)
            if value == 1:
                chunk.send("socket")  # a chunk that came meanwhile
            return True

    ticks = iter(range(1_000_000))
    monkeypatch.setattr(meter.time, "perf_counter", lambda: next(ticks) * 40e-6)  # each look: 40 µs later
    queue = MeterQueue()
    queue.push(Step(), "body", 0.0, 0, 1, 2, 3)  # type: ignore[arg-type]
    await turns(6)
    chunk.close()
    assert order == [0, 1, "socket", 2, 3]


def test_a_big_answer_piece_is_measured_in_slices() -> None:
    pushed: list[int] = []

    class Queue:
        def push(self, _meter: object, kind: str, t: float, *values: list[bytes]) -> None:
            pushed.extend(len(value[0]) for value in values)

    call = meter.CallMeter("POST", lambda: 0.0, lambda _c: None, lambda _c: None,
                           work=Queue())  # type: ignore[arg-type]
    head = parse_head(b"POST /v1/messages HTTP/1.1\r\n\r\n")
    from tokrace.providers.proxy.routes import Upstream

    call.request(head, 0.0, Upstream.parse("http://127.0.0.1:1"))
    call.response_body(0.0, [b"x" * (meter.SLICE_BYTES * 2 + 10)])
    assert pushed == [meter.SLICE_BYTES, meter.SLICE_BYTES, 10]
    pushed.clear()
    call.response_body(0.0, [b"e" * 130] * 30)  # a read that brought thirty chunks (after a late wake)
    assert pushed == [130] * 30  # a step each, not one step of four kilobytes


async def test_a_request_body_waiting_on_a_lost_upstream_goes_no_further_instead_of_waiting_for_ever() -> None:
    from tokrace.providers.proxy.relay import _Upstreaming

    conn = _Upstreaming()
    conn.pause_writing()  # the upstream's buffer is full
    conn.connection_lost(ConnectionResetError())  # and then it is gone: no resume_writing will come
    await asyncio.wait_for(conn.drain(), 1.0)

"""The reader that notes when a request's bytes reached the server."""

from __future__ import annotations

from tokrace.providers.timing.stamped_sockets import ArrivalReader


class _Clock:
    virtual = False

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep_until(self, t: float) -> float:
        self.t = max(self.t, t)
        return self.t


async def test_a_request_began_when_its_first_bytes_came_though_its_body_came_later() -> None:
    clock = _Clock()
    reader = ArrivalReader(clock)  # type: ignore[arg-type]
    reader.expect_request()
    clock.t = 1.0
    reader.feed_data(b"POST / HTTP/1.1\r\ncontent-length: 4\r\n\r\n")
    await reader.readuntil(b"\r\n\r\n")
    clock.t = 2.0
    reader.feed_data(b"body")
    assert await reader.readexactly(4) == b"body"
    assert (reader.began, reader.arrived) == (1.0, 2.0)


async def test_a_request_already_waiting_began_no_later_than_its_bytes_came() -> None:
    """A kept-alive connection's next request that came with the last one's end counts from that read, not from
    when the server got round to asking for it."""
    clock = _Clock()
    reader = ArrivalReader(clock)  # type: ignore[arg-type]
    reader.expect_request()
    clock.t = 1.0
    reader.feed_data(b"first\nsecond\n")
    await reader.readuntil(b"\n")
    clock.t = 5.0
    reader.expect_request()
    assert await reader.readuntil(b"\n") == b"second\n"
    assert reader.began == 1.0
    reader.expect_request()
    clock.t = 6.0
    reader.feed_data(b"third\n")
    assert reader.began == 6.0

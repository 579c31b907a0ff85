"""Every fault over real loopback HTTP, for all three protocols: the lane ends with one error event whose message
says what happened and what to try, the text that arrived before stays, and the other lanes go on."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from serving import PROTOCOLS, chunks, fast_source, provider, stream_turn, text_of, tier

from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model.events import Done, Error, Event, Headers, Segment
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import Race
from tokrace.providers.serve import ServeServer
from tokrace.providers.timing.clock import LaneClock, RealClock


@pytest.fixture
async def server() -> AsyncIterator[ServeServer]:
    async with ServeServer(fast_source()) as s:
        yield s


def error_of(events: list[Event]) -> Error:
    assert isinstance(events[-1], Error), events[-1]
    assert sum(isinstance(e, Error) for e in events) == 1
    assert "\n" not in events[-1].message
    return events[-1]


def retries(events: list[Event]) -> list[Segment]:
    return [e for e in events if isinstance(e, Segment) and e.seg == "retry"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_http_400_shows_the_providers_message_and_is_not_retried(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="http=400"))
    error = error_of(events)
    assert error.error == "http" and error.status == 400
    assert "HTTP 400" in error.message and "injected by tokrace serve" in error.message
    assert "check this tier's model and options" in error.message
    assert not retries(events) and len(server.served) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_http_401_points_at_the_key_variable(server: ServeServer, protocol: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKRACE_TEST_KEY", "not-a-real-key")
    spec = tier(server, protocol, fault="http=401")
    spec.api_key_env = "TOKRACE_TEST_KEY"
    error = error_of(await stream_turn(spec))
    assert error.error == "auth" and "check the key in $TOKRACE_TEST_KEY" in error.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_http_500_is_retried_twice_then_reported(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="http=500"))
    error = error_of(events)
    assert error.status == 500 and "gave up after 2 retries" in error.message and "try again later" in error.message
    assert len(retries(events)) == 2 and len(server.served) == 3 and turn_metrics(events).retries == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_429_honours_retry_after_and_says_to_wait(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="http=429,retry_after=0.02"))
    error = error_of(events)
    assert error.error == "rate_limit" and error.status == 429 and error.retry_after == pytest.approx(0.02)
    assert "rate limited" in error.message
    waits = retries(events)
    assert len(waits) == 2 and all("after 0.02 s" in w.label for w in waits)
    assert all(w.end - w.start >= 0.02 for w in waits)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_529_with_retry_after_is_overloaded(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="http=529,retry_after=0.01"))
    error = error_of(events)
    assert error.error == "overloaded" and error.status == 529 and "overloaded" in error.message
    assert len(retries(events)) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_retry_that_succeeds_is_one_retry_segment_before_a_whole_answer(server: ServeServer,
                                                                                 protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="http=429,retry_after=0.01,times=1"))
    assert isinstance(events[-1], Done)
    (wait,) = retries(events)
    assert wait.label.startswith("HTTP 429") and "retry 1 of 2" in wait.label
    # Each attempt's connect went out when its request was on the wire; the failed one's retry follows it.
    first, second = (e for e in events if isinstance(e, Segment) and e.seg == "connect")
    assert first.end == wait.start and second.start >= wait.end
    metrics = turn_metrics(events)
    assert metrics.ok and metrics.retries == 1 and metrics.connect_s == second.end - metrics.start
    assert [s.kind for s in metrics.segments][:4] == ["connect", "retry", "connect", "pending"]


async def test_max_retries_zero_reports_the_first_failure(server: ServeServer) -> None:
    events = await stream_turn(tier(server, "openai", fault="http=503", max_retries=0))
    assert error_of(events).status == 503 and not retries(events)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_error_event_mid_stream_keeps_the_text_before_it(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="error,after=4"))
    error = error_of(events)
    assert error.error in ("stream", "overloaded")
    assert "mid-stream after 4 text chunks" in error.message and "try again" in error.message
    assert len(chunks(events)) == 4 and text_of(events)
    assert not retries(events)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_connection_reset_mid_stream_is_reported_as_such(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="reset,after=3"))
    error = error_of(events)
    assert error.error == "reset" and "reset mid-stream after 3 text chunks" in error.message
    assert len(chunks(events)) == 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_stream_ending_without_its_final_event_is_incomplete(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="truncate,after=5"))
    error = error_of(events)
    assert error.error == "incomplete" and "without its final event" in error.message
    assert len(chunks(events)) == 5


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_malformed_json_quotes_what_came(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="malformed,after=2"))
    error = error_of(events)
    assert error.error == "protocol" and "malformed JSON" in error.message
    assert len(chunks(events)) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_bytes_that_are_not_utf8_end_the_lane(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="non-utf8,after=2"))
    error = error_of(events)
    assert error.error == "encoding" and "not UTF-8" in error.message
    assert len(chunks(events)) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_read_stalling_past_the_timeout_is_a_stall(server: ServeServer, protocol: str) -> None:
    events = await stream_turn(tier(server, protocol, fault="stall,after=3", read_timeout_s=0.1))
    error = error_of(events)
    assert error.error == "stall" and "no data for 0.1 s after 3 text chunks" in error.message
    assert "read_timeout_s" in error.message


class PausingClock:
    """The server's clock: it jumps to every moment it is asked to wait for at once, but for a pause of ``pause_s``
    (a timed stall), which it holds until the test lets it go (``go``) and then jumps, noting it in ``pauses``."""

    virtual = False

    def __init__(self, pause_s: float) -> None:
        self.t = 100.0
        self.pause_s = pause_s
        self.paused = asyncio.Event()
        self.go = asyncio.Event()
        self.pauses: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep_until(self, t: float) -> float:
        if abs(t - self.t - self.pause_s) < 1e-9:
            self.paused.set()
            await asyncio.wait_for(self.go.wait(), 10)  # the time out is a hang guard only
            self.pauses.append(t - self.t)
        self.t = max(self.t, t)
        await asyncio.sleep(0)
        return self.t


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_timed_stall_is_a_pause_and_the_answer_goes_on_after_it(protocol: str) -> None:
    # Reported: stall=2 sent the end of the answer (finish_reason stop) after the stall, without the rest of it.
    clock = PausingClock(0.3)
    async with ServeServer(fast_source(), clock=clock) as server:
        whole = await stream_turn(tier(server, protocol))
        events: list[Event] = []
        three = asyncio.Event()

        async def client() -> None:
            prov = provider(tier(server, protocol, fault="stall=0.3,after=3"))
            await prov.prepare()
            try:
                lane = RealClock()
                async for event in prov.stream(TurnRequest("Say hello.", max_tokens=20), LaneClock(lane, lane.now())):
                    events.append(event)
                    if len(chunks(events)) >= 3:
                        three.set()
            finally:
                await prov.aclose()

        streaming = asyncio.create_task(client())
        await asyncio.wait_for(clock.paused.wait(), 10)
        await asyncio.wait_for(three.wait(), 10)  # the three chunks before the pause reach the client during it
        during = len(chunks(events))
        clock.go.set()
        await streaming
    assert during == 3  # the pause comes after the third chunk: nothing more comes while it lasts
    assert clock.pauses == pytest.approx([0.3])
    assert isinstance(events[-1], Done) and not any(isinstance(e, Error) for e in events)
    assert text_of(events) == text_of(whole) and len(text_of(whole)) > 20


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_connection_refused_names_the_server_and_base_url(protocol: str) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("" if protocol == "anthropic" else "/v1")
    events = await stream_turn(TierSpec(name="x", provider=protocol, model="m", base_url=url))
    error = error_of(events)
    assert error.error == "connect" and "connection refused" in error.message
    assert f"is the server running at {url}?" in error.message and "gave up after 2 retries" in error.message
    assert len(retries(events)) == 2 and not any(isinstance(e, Headers) for e in events)


async def test_one_lane_fails_while_three_succeed(server: ServeServer) -> None:
    tiers = [tier(server, "openai", "chat"), tier(server, "openai-responses", "responses"),
             tier(server, "anthropic", "anthropic"), tier(server, "openai", "broken", fault="reset,after=2")]
    race = Race(tiers, TurnRequest("Race!", max_tokens=30), RealClock(), providers=[provider(t) for t in tiers])
    await race.prepare()
    try:
        lanes = await race.run()
    finally:
        await race.aclose()
    assert [lane.ok for lane in lanes] == [True, True, True, False]
    assert all(turn_metrics(lane.events).output_tokens == 30 for lane in lanes[:3])
    assert isinstance(lanes[3].events[-1], Error) and text_of(lanes[3].events)

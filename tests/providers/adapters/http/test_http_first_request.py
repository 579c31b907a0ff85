"""The first request of a process measures the network, not set-up: ``prepare()`` pays for imports, name lookups
and reader threads; the connect segment goes out when the request is on the wire (the lane then says "waiting"),
not when the response head arrives. Fresh interpreters, because a test process has long since imported
everything a first request would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time

import pytest
from paths import ROOT
from serving import fast_source, provider, tier

from tokrace.providers.model.events import Headers, Segment
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.race.live import LiveLane
from tokrace.providers.serve import Served, ServeServer
from tokrace.providers.timing.clock import LaneClock, RealClock

HELD_HEAD_MS = 300
"""The server holds its response head this long: time enough to see what the lane says meanwhile."""

FIRST_REQUEST = """
import asyncio, json, sys, threading
from tokrace.providers.serve import ServeServer, SyntheticSource
from tokrace.providers.adapters.synthetic import Profile
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.model.messages import TurnRequest

seen = {"reader_threads": 0}
_start = threading.Thread.start
def start(self):
    if self.name == "tokrace-socket-reader" and "modules" in seen and "connect" not in seen:
        seen["reader_threads"] += 1
    _start(self)
threading.Thread.start = start

def watch(state):
    def listener(index, event):
        if event.kind == "request" and "modules" not in seen:
            seen["modules"] = set(sys.modules)
        elif event.kind == "segment" and event.seg == "connect" and "connect" not in seen:
            seen["connect"] = True
            seen["imported"] = sorted(set(sys.modules) - seen["modules"])
            seen["badge"] = state()
    return listener

async def main(screen):
    server = ServeServer(SyntheticSource(Profile(ttft_ms=HELD, ttfb_ms=HELD, tok_s=5000)))
    await server.start()
    tier = TierSpec(name="lane", provider="openai", model="m", base_url=server.url + "/v1")
    request = TurnRequest("Say hello.", max_tokens=5)
    try:
        if screen:
            from tokrace.tui.app.app import build_app
            app = build_app([tier], request)
            app.runner.listeners.append(watch(lambda: app.runner.live.lanes[0].state_at(app.runner.now())))
            async with app.run_test(size=(120, 30)):
                await app.runner.wait_started()
                await app.runner.wait_finished()
                events = app.runner.race.lanes[0].events
        else:
            from tokrace.providers.runs.session import run_session
            from tokrace.providers.race.live import LiveRace
            live = LiveRace([tier])
            result = await run_session([tier], request, listeners=[live, watch(lambda: live.lanes[0].state)])
            events = result.runs[0][0].events
    finally:
        await server.close()
    order = [e.kind if e.kind != "segment" else e.seg for e in events]
    print(json.dumps({"imported": seen["imported"], "reader_threads": seen["reader_threads"],
                      "badge": seen["badge"], "order": order}))

asyncio.run(main(sys.argv[1] == "screen"))
""".replace("HELD", str(HELD_HEAD_MS))


def first_request(where: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", FIRST_REQUEST, where], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_bench_processs_first_request_imports_nothing_and_starts_no_thread() -> None:
    seen = first_request("bench")
    assert seen["imported"] == [] and seen["reader_threads"] == 0
    assert seen["badge"] == "waiting"


def test_the_screens_first_race_imports_nothing_starts_no_thread_and_says_waiting_on_the_wire() -> None:
    seen = first_request("screen")
    assert seen["imported"] == [] and seen["reader_threads"] == 0
    assert seen["badge"] == "waiting"
    order = seen["order"]
    assert isinstance(order, list) and order.index("connect") < order.index("headers")


class HeldHead:
    """The server's clock (the real one), holding each response head until the test lets it go: what the lane says
    meanwhile is what it says while it waits for the head."""

    virtual = False

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.head_sent = False

    def now(self) -> float:
        return time.perf_counter()

    async def sleep_until(self, t: float) -> float:
        if not self.head_sent:  # the head's moment: held until released (the time out is a hang guard only)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.release.wait(), 10)
            self.head_sent = True
        return self.now()


async def test_the_connect_segment_comes_when_the_request_is_on_the_wire_not_with_the_head() -> None:
    held = HeldHead()
    async with ServeServer(fast_source(), clock=held) as server:
        prov = provider(tier(server, "openai"))
        await prov.prepare()
        try:
            clock = RealClock()
            lane_clock = LaneClock(clock, clock.now())
            lane = LiveLane(prov.tier)
            head_held: dict[str, bool] = {}
            badge: dict[str, str] = {}
            async for event in prov.stream(TurnRequest("hi", max_tokens=5),
                                           lane_clock):
                lane.on_event(event)
                if isinstance(event, Segment) and event.seg == "connect":
                    head_held["connect"] = not held.head_sent
                    badge["connect"] = lane.state
                    connect = event
                    held.release.set()
                elif isinstance(event, Headers):
                    head = event
        finally:
            await prov.aclose()
    assert head_held["connect"]  # the connect segment came while the server still held the head
    assert badge["connect"] == "waiting"
    assert connect.end < head.t


async def test_prepare_resolves_the_host_and_parks_a_reader_thread() -> None:
    from tokrace.providers.adapters.http.reader_threads import READERS

    async with ServeServer(fast_source()) as server:
        prov = provider(tier(server, "openai"))
        before = READERS.wanted
        await prov.prepare()
        try:
            assert READERS.wanted == before + 1 and READERS.idle >= READERS.wanted  # parked, not started on the way
            backend = prov._backend  # type: ignore[attr-defined]
            assert backend is not None and ("127.0.0.1", server.port) in backend._addresses
        finally:
            await prov.aclose()


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps (SO_TIMESTAMPNS) are Linux's")
async def test_a_request_is_on_the_wire_when_its_sending_began_so_never_after_the_server_had_it() -> None:
    """On loopback the server's kernel has the request before the call that sends it returns: the request's "on the
    wire" (the end of connect_s) is when that call began, so it never comes after the server's receive stamp, and
    whatever the event loop does after the send (its trace calls, other tasks) is not in connect_s."""
    served: list[Served] = []
    async with ServeServer(fast_source(), on_served=served.append) as server:
        prov = provider(tier(server, "openai"))
        await prov.prepare()
        clock = RealClock()
        try:
            for _ in range(5):  # the first request opens the connection, the others reuse it
                start = clock.now()
                events = [e async for e in prov.stream(TurnRequest("hi", max_tokens=5), LaneClock(clock, start))]
                connect = next(e for e in events if isinstance(e, Segment) and e.seg == "connect")
                on_wire = start + connect.end
                trip = served[-1].received - on_wire
                assert -5e-6 <= trip < 0.05, trip
        finally:
            await prov.aclose()

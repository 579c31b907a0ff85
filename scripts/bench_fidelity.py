"""Fidelity benchmark: does tokrace, reading real HTTP, measure what a server really did?

A ground-truth server (the engine of ``tokrace serve``, in a process of its own) streams known schedules at
750 tok/s to 4 lanes (OpenAI Chat twice, Responses, Anthropic) and notes when each request reached it and when
each first and last token went out (the kernel's receive and transmit stamps, so a server descheduled between
writing and noting still tells the truth). tokrace races the 4 lanes over loopback HTTP while its own screen draws,
headless, in the same interpreter (``--ui app``; ``load`` is a stand-in that burns 10 ms of Python per frame at
40 Hz; ``none`` draws nothing). Per lane it prints the error of ``ttft_s − connect_s`` against the server's own
first-token time (p50, p99 over the runs) and of ``decode_tok_s`` against the server's own rate, and where an
error comes from: the request's way out, the first token's and the last token's way back (tokrace's stamp less the
server's; on loopback a few µs unless tokrace read the token late together with later ones).
``--transport httpx`` uses httpx's own transport, stamped when the event loop gets to the bytes, for comparison
with tokrace's socket-time transport (a reader thread per connection, kernel receive stamps).

Targets: TTFT error p50 < 1 ms and p99 < 5 ms; decode error < 1 %. Not a test: it prints figures.

    python scripts/bench_fidelity.py [--runs 30] [--ui app|load|none] [--transport stamped|httpx]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from tokrace.providers.adapters import Provider
from tokrace.providers.metrics.turn import percentile, turn_metrics
from tokrace.providers.model.events import Delta, Headers
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import LaneRun
from tokrace.providers.timing.clock import RealClock

TOK_S, TTFT_MS, TOKENS, JITTER = 750.0, 200.0, 400, 0.1
LANES = (("openai", "/v1"), ("openai-responses", "/v1"), ("anthropic", ""), ("openai", "/v1"))
TTFT_P50_MS, TTFT_P99_MS, DECODE_PCT = 1.0, 5.0, 1.0


class _CoarseClock(RealClock):
    """The truth server's clock: the real clock's time line (so the server takes the kernel's receive stamps of
    requests and transmit stamps of tokens), with plain asyncio sleeps. Its writes land up to ~1 ms late, which
    changes nothing (the kernel stamps when they really went out) and keeps it from spinning a core the client
    needs."""

    async def sleep_until(self, t: float) -> float:
        delay = t - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        return time.perf_counter()


def _truth_server(conn: Connection) -> None:
    """The ground-truth server process: a seeded schedule per lane (by model name), truth sent back per request."""
    from tokrace.providers.adapters.synthetic import Profile
    from tokrace.providers.model.tiers import MAX_TOKENS_LIMIT
    from tokrace.providers.serve import Served, ServeServer, SyntheticSource
    from tokrace.providers.serve.wire import Plan

    class PerLane(SyntheticSource):
        """Each lane's own seeded schedule, and a new schedule every run."""

        runs = 0
        lanes: ClassVar[dict[int, SyntheticSource]] = {}

        def plan(self, body: dict[str, Any], max_tokens: int, turn: int) -> Plan:
            seed = int(str(body.get("model", "lane-0")).rsplit("-", 1)[-1])
            lane = self.lanes.get(seed)
            if lane is None:
                profile = Profile(ttft_ms=TTFT_MS, tok_s=TOK_S, jitter=JITTER, seed=seed)
                lane = self.lanes[seed] = SyntheticSource(profile)
            return lane.plan(body, max_tokens, turn + self.runs)

    def sent(record: Served) -> None:
        conn.send((record.request_id, record.ttft_s, record.decode_tok_s, record.received, record.first, record.last))

    async def main() -> None:
        # Not pinned to a core of its own: its truth is the kernel's stamps, wherever it runs, and pinned it could not
        # leave a core another process keeps busy (its writes then waited there, and so did the wake-ups of
        # tokrace's reader threads by its packets: first tokens read 5 to 8 ms late, with a busy loop on that core).
        gc.disable()  # a collection pause would delay the server's own note of when a request arrived
        source = PerLane(Profile())
        # answers as long as each lane asks (a served answer otherwise stops at the server's own 400 tokens)
        server = ServeServer(source, clock=_CoarseClock(), on_served=sent, max_tokens=MAX_TOKENS_LIMIT)
        await server.start()
        conn.send(("port", server.port))
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def command() -> None:
            try:
                message = conn.recv()
            except EOFError:  # tokrace's side is gone: stop too
                message = "stop"
            if message == "stop":
                stop.set()
            else:  # the next run: make its plans now, not while answers are being timed
                source.runs = int(message)
                for seed in range(len(LANES)):
                    source.plan({"model": f"lane-{seed}"}, TOKENS, 0)
                conn.send(("ready", message))

        loop.add_reader(conn.fileno(), command)
        await stop.wait()
        await server.close()

    asyncio.run(main())


class StandInLoad:
    """A stand-in for a screen drawing in the same interpreter: ``ms`` of Python work per frame at ``hz``."""

    def __init__(self, ms: float, hz: float) -> None:
        self.ms, self.hz = ms, hz
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        period = 1.0 / self.hz
        while True:
            end = time.perf_counter() + self.ms / 1000.0
            text = ""
            while time.perf_counter() < end:
                text = " ".join(str(i) for i in range(50))  # pure-Python work, as widget rendering is
            del text
            await asyncio.sleep(period)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()


def tiers(port: int) -> list[TierSpec]:
    return [TierSpec(name=f"lane {i} ({provider})", provider=provider, model=f"lane-{i}",
                     base_url=f"http://127.0.0.1:{port}{suffix}")
            for i, (provider, suffix) in enumerate(LANES)]


def provider_factory(transport: str) -> Callable[[TierSpec], Provider]:
    """Providers on tokrace's socket-time transport, or on httpx's own (stamped when the event loop reads)."""
    from tokrace.providers.adapters import FACTORIES

    def make(tier: TierSpec) -> Provider:
        provider = FACTORIES[tier.provider](tier)
        if transport == "httpx":
            provider = type(provider)(tier, transport=httpx.AsyncHTTPTransport())  # type: ignore[call-arg]
        return provider

    return make


Errors = dict[int, dict[str, list[float]]]


def new_errors() -> Errors:
    return {i: {"ttft_ms": [], "decode_pct": [], "out_ms": [], "back_ms": [], "last_back_ms": []}
            for i in range(len(LANES))}


def measure(args: argparse.Namespace) -> Errors:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_truth_server, args=(child,), daemon=True)
    server.start()
    child.close()  # the server's end is the server's: if it dies, reading from it ends instead of waiting forever
    tag, port = parent.recv()
    assert tag == "port"
    errors = new_errors()
    try:
        runs = _app_runs if args.ui == "app" else _loop_runs
        asyncio.run(runs(args, port, parent, errors))
    finally:
        parent.send("stop")
        server.join(5)
    return errors


async def _next_run(truth: Connection, run: int) -> None:
    """Tell the truth server a run begins (it makes the run's schedules first) and wait until it is ready."""
    truth.send(str(run))
    while (await asyncio.to_thread(truth.recv))[0] != "ready":
        pass


async def _score(truth: Connection, lanes: list[LaneRun], origin: float, errors: Errors) -> None:
    """Hold each lane's numbers against what the server itself did for that request. Both processes read the
    same monotonic clock, so the TTFT error also splits in two: the request's way to the server (from tokrace's
    "on the wire" to the server's "arrived") and the first token's way back (from the server's write to
    tokrace's stamp)."""
    records = {}
    while len(records) < len(lanes):
        rid, ttft, decode, received, first, last = await asyncio.to_thread(truth.recv)
        records[rid] = (ttft, decode, received, first, last)
    for lane in lanes:
        m = turn_metrics(lane.events, None, lane.tier.model)
        head = next(e for e in lane.events if isinstance(e, Headers))
        server_ttft, server_decode, received, first, last = records[head.request_id]
        if not m.ok or m.ttft_s is None or m.decode_tok_s is None:
            raise SystemExit(f"lane {lane.index} failed: {m.error}")
        start = origin + m.start
        errors[lane.index]["ttft_ms"].append((m.ttft_s - m.connect_s - server_ttft) * 1000.0)
        errors[lane.index]["decode_pct"].append((m.decode_tok_s / server_decode - 1.0) * 100.0)
        errors[lane.index]["out_ms"].append((received - (start + m.connect_s)) * 1000.0)
        errors[lane.index]["back_ms"].append((start + m.ttft_s - first) * 1000.0)
        last_t = max(e.t for e in lane.events if isinstance(e, Delta) and e.text)
        errors[lane.index]["last_back_ms"].append((origin + last_t - last) * 1000.0)


async def _loop_runs(args: argparse.Namespace, port: int, truth: Connection, errors: Errors) -> None:
    """Races in this event loop, with a stand-in screen load or none."""
    from tokrace.providers.race.race import Race
    from tokrace.providers.timing.clock import RealClock

    specs = tiers(port)
    make = provider_factory(args.transport)
    providers = [make(t) for t in specs]
    await asyncio.gather(*(p.prepare(True) for p in providers))
    load = StandInLoad(args.load_ms, args.load_hz) if args.ui == "load" else None
    if load is not None:
        load.start()
    request = TurnRequest(prompt="Count, steadily.", max_tokens=TOKENS)
    try:
        for run in range(args.runs + 1):  # run 0 warms everything up and is not counted
            await _next_run(truth, run)
            race = Race(specs, request, RealClock(), providers=providers)
            lanes = await race.run()
            await _score(truth, lanes, race.origin, errors if run else new_errors())
    finally:
        if load is not None:
            load.stop()
        await asyncio.gather(*(p.aclose() for p in providers))


async def _app_runs(args: argparse.Namespace, port: int, truth: Connection, errors: Errors) -> None:
    """Races on tokrace's own screen, headless, drawing every frame in this interpreter."""
    from tokrace.tui.app.app import build_app

    app = build_app(tiers(port), TurnRequest(prompt="Count, steadily.", max_tokens=TOKENS),
                    provider_factory=provider_factory(args.transport))
    await _next_run(truth, 0)  # the screen starts its first race as soon as it is mounted
    async with app.run_test(size=(200, 50)):
        runner = app.runner
        for run in range(args.runs + 1):
            if run:
                await _next_run(truth, run)
                await runner.restart()
            await runner.wait_started()
            await runner.wait_finished()
            assert runner.race is not None
            await _score(truth, runner.race.lanes, runner.race.origin, errors if run else new_errors())


def report(errors: Errors, say: Callable[[str], None]) -> bool:
    ok = True
    say(f"{'lane':24} {'TTFT err p50':>13} {'p99':>9} {'max':>9} {'decode err p50':>15} {'max |err|':>10}"
        f"   {'request out p99':>15} {'token back p99':>14} {'last back p99':>14}")
    for i, (provider, _) in enumerate(LANES):
        e = errors[i]
        t50, t99 = percentile(e["ttft_ms"], 50), percentile(e["ttft_ms"], 99)
        tmax = max(e["ttft_ms"], key=abs)
        d50 = statistics.median(e["decode_pct"])
        dmax = max(abs(x) for x in e["decode_pct"])
        lane_ok = abs(t50) < TTFT_P50_MS and abs(t99) < TTFT_P99_MS and dmax < DECODE_PCT
        ok = ok and lane_ok
        out99, back99 = percentile(e["out_ms"], 99), percentile(e["back_ms"], 99)
        last99 = percentile(e["last_back_ms"], 99)
        say(f"{f'lane {i} ({provider})':24} {t50:10.3f} ms {t99:6.3f} ms {tmax:6.3f} ms {d50:13.3f} % "
            f"{dmax:8.3f} %  {'ok    ' if lane_ok else 'MISSED'} {out99:9.3f} ms {back99:11.3f} ms "
            f"{last99:11.3f} ms")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--ui", choices=("app", "load", "none"), default="app")
    parser.add_argument("--transport", choices=("stamped", "httpx"), default="stamped")
    parser.add_argument("--load-ms", type=float, default=10.0, help="stand-in screen: work per frame")
    parser.add_argument("--load-hz", type=float, default=40.0, help="stand-in screen: frames per second")
    args = parser.parse_args()
    print(f"{len(LANES)} lanes × {TOKENS} tokens at {TOK_S:g} tok/s (jitter ±{JITTER:.0%}), TTFT {TTFT_MS:g} ms; "
          f"{args.runs} runs; transport: {args.transport}; screen: {args.ui}"
          + (f" ({args.load_ms:g} ms of work at {args.load_hz:g} Hz)" if args.ui == "load" else ""))
    errors = measure(args)
    ok = report(errors, print)
    print(f"targets: TTFT error p50 < {TTFT_P50_MS:g} ms, p99 < {TTFT_P99_MS:g} ms; decode error < {DECODE_PCT:g} %"
          f" — {'met' if ok else 'missed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Concurrency benchmark: does ``tokrace bench --concurrency`` measure every request as exactly as one race does,
at 16 and 64 streams, cheaply, in bounded memory?

A ground-truth server (the engine of ``tokrace serve``, in a process of its own) streams 750 tok/s answers of 400
tokens (TTFT 200 ms, jitter ±10 %) and notes when each request reached it and when its first and last token went
out (the kernel's stamps). This process runs tokrace's load (``runs.load.run_load``, what ``bench --concurrency``
runs) at each level, then holds every request against the server's record of it (by ``x-request-id``):

- TTFT error: tokrace's ``ttft_s − connect_s`` less the server's own first-token time (|error|, p99);
- decode error: tokrace's ``decode_tok_s`` against the server's own rate (|error| in %, p99);
- client CPU: this process's CPU time (every thread) from the start of the load (connections made) to its end,
  per 1,000 tokens delivered;
- memory: the peak RSS over the whole run, and what a load keeps per request (Python's traced memory after a
  load of 1,500 requests less after one of 500, on a synthetic tier on virtual time: the results row and nothing
  more, so a long ``--duration`` grows by the rows alone).

A short load first warms the process up (first-use costs, as a first race pays them) and is not counted. The
truth server is a Python process too: on a busy box it falls behind its plan, and its line says by how much (its
own TTFT and rate against the plan's); figures taken then say more about the box than about tokrace.

Goals (issue 29): TTFT error p99 < 3 ms, decode error p99 < 0.5 %, CPU ≤ 0.03 s per 1,000 tokens, memory kept
per request ≤ 1 kB. Not a test: it prints figures, one goal per line.

    python scripts/bench_concurrency.py [--levels 1,4,16,64] [--per-stream 4] [--tokens 400] [--quick]

Each level also prints where its CPU went (the event loop's thread, the reader threads, a second of wall time, a
request) and the floor: what an event loop waking on the paced looks' shared grid costs with nothing to do. One
stream of 750 tok/s pays that floor alone, so its CPU per 1,000 tokens sits above the goal on a VM whatever the
code does per token; from four streams on they share it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import resource
import sys
import time
import tracemalloc
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tokrace.providers.adapters.http.stamped_stream import PACE_S, next_look
from tokrace.providers.metrics.turn import percentile
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.runs.load import LoadPlan, TierLoad, run_load

TOK_S, TTFT_MS, JITTER = 750.0, 200.0, 0.1
TTFT_P99_MS, DECODE_P99_PCT, CPU_PER_1K_S, KEPT_PER_REQUEST_KB = 3.0, 0.5, 0.03, 1.0


def _truth_server(conn: Connection) -> None:
    """The ground-truth server: every request's record kept, all sent back when asked (never while timing)."""
    from tokrace.providers.adapters.synthetic import Profile
    from tokrace.providers.model.tiers import MAX_TOKENS_LIMIT
    from tokrace.providers.serve import Served, ServeServer, SyntheticSource
    from tokrace.providers.timing.clock import RealClock

    class CoarseClock(RealClock):
        """The real clock's time line with plain asyncio sleeps: a write lands up to ~1 ms late, which changes
        nothing (the kernel stamps when it really went out) and keeps the server off the client's core."""

        async def sleep_until(self, t: float) -> float:
            delay = t - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            return time.perf_counter()

    records: dict[str, tuple[float | None, float | None, float | None, float | None]] = {}

    def served(record: Served) -> None:
        records[record.request_id] = (record.ttft_s, record.decode_tok_s, record.first, record.last)

    async def main() -> None:
        gc.disable()
        profile = Profile(ttft_ms=TTFT_MS, tok_s=TOK_S, jitter=JITTER, seed=7)
        server = ServeServer(SyntheticSource(profile), clock=CoarseClock(), on_served=served,
                             max_tokens=MAX_TOKENS_LIMIT)
        await server.start()
        conn.send(server.port)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def command() -> None:
            try:
                message = conn.recv()
            except EOFError:
                message = "stop"
            if message == "stop":
                stop.set()
            else:
                conn.send(dict(records))
                records.clear()

        loop.add_reader(conn.fileno(), command)
        await stop.wait()
        await server.close()

    asyncio.run(main())


def kept_per_request() -> float:
    """Bytes a load keeps per request once it is over: traced memory after 1,500 requests less after 500, ÷ 1,000
    (16 streams of a synthetic tier on virtual time: the same load code, no sockets)."""
    from tokrace.providers.timing.clock import VirtualClock

    tier = TierSpec(name="kept", provider="synthetic", model="m", options={"ttft_ms": 100, "tok_s": 5000})

    async def load(n: int) -> Any:
        clock = VirtualClock()
        return await clock.drive(run_load([tier], TurnRequest("x", max_tokens=200), LoadPlan((16,), requests=n),
                                          clock=clock))

    asyncio.run(load(16))
    tracemalloc.start()
    kept = []
    for n in (500, 1500):
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        result = asyncio.run(load(n))
        gc.collect()
        kept.append(tracemalloc.get_traced_memory()[0] - before)
        del result
    tracemalloc.stop()
    return (kept[1] - kept[0]) / 1000.0


@dataclass
class Cost:
    """A level's client CPU, from the start of its load (connections made) to its end: the whole process, the event
    loop's thread, and the wall time it took."""

    process_s: float
    loop_s: float
    wall_s: float

    @property
    def readers_s(self) -> float:
        """The rest: the reader threads (and the kernel's work for them)."""
        return self.process_s - self.loop_s


async def one_load(port: int, streams: int, per_stream: int, tokens: int) -> tuple[TierLoad, Cost]:
    tier = TierSpec(name="truth", provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1")
    plan = LoadPlan((streams,), requests=streams * per_stream)
    start: list[tuple[float, float, float]] = []
    lags: list[float] = []
    probe = asyncio.get_running_loop().create_task(loop_lag(lags))
    try:
        result = await run_load([tier], TurnRequest("Count, steadily.", max_tokens=tokens), plan, warm=True,
                                on_level=lambda _: start.append((time.process_time(), time.thread_time(),
                                                                 time.perf_counter())))
    finally:
        probe.cancel()
    LAGS[streams] = lags
    process, loop, wall = start[0]
    return result.points[0], Cost(time.process_time() - process, time.thread_time() - loop,
                                  time.perf_counter() - wall)


LAGS: dict[int, list[float]] = {}
"""Per level, the event loop's lag while the load ran: each look's lateness on the shared wake-up grid, in ms."""


async def loop_lag(out: list[float]) -> None:
    """Wake at each point of the grid the process's paced looks share and note how late: the event loop's own
    backlog. On the grid it adds no wake-up of its own (a wake-up costs about 0.2 ms of CPU on a VM: a 10 ms sleep
    of its own put 20 ms a second into the client CPU it measures beside)."""
    loop = asyncio.get_running_loop()
    while True:
        due = next_look(loop.time(), PACE_S)
        woke = loop.create_future()
        loop.call_at(due, woke.set_result, None)
        await woke
        out.append((loop.time() - due) * 1000.0)


async def grid_floor(seconds: float = 1.0) -> float:
    """The CPU a second (ms) of an event loop that only wakes on the grid, as the paced looks of a load do
    whatever its number of streams: the fixed cost a level pays before its first token."""
    lags: list[float] = []
    start, cpu = time.perf_counter(), time.process_time()
    probe = asyncio.get_running_loop().create_task(loop_lag(lags))
    await asyncio.sleep(seconds)
    probe.cancel()
    return (time.process_time() - cpu) / (time.perf_counter() - start) * 1000.0


def score(point: TierLoad, truth: dict[str, Any]) -> dict[str, list[float]]:
    """Per request: the |errors|, and (both processes read the same monotonic clock) how much later than the
    server's transmit stamp tokrace stamped the first and the last token (on loopback: microseconds, unless the
    token was read late together with later ones, or the server's stamp is only its note of the write)."""
    out: dict[str, list[float]] = {"ttft_ms": [], "decode_pct": [], "first_back_ms": [], "last_back_ms": [],
                                   "server_e2e_s": []}
    for row in point.rows:
        if not row.ok or row.request_id not in truth:
            raise SystemExit(f"request {row.request_id or '?'} failed or is unknown to the server: {row.error}")
        server_ttft, server_decode, first, last = truth[row.request_id]
        if row.ttft_s is None or row.decode_tok_s is None:
            raise SystemExit(f"request {row.request_id}: no TTFT or decode rate ({row.output_tokens} tokens)")
        out["ttft_ms"].append(abs(row.ttft_s - row.connect_s - server_ttft) * 1000.0)
        out["decode_pct"].append(abs(row.decode_tok_s / server_decode - 1.0) * 100.0)
        ours_first = point.origin + row.start_s + row.ttft_s
        out["first_back_ms"].append((ours_first - first) * 1000.0)
        out["last_back_ms"].append((ours_first + (row.output_tokens - 1) / row.decode_tok_s - last) * 1000.0)
        out["server_e2e_s"].append(server_ttft + (last - first))
    return out


def line(what: str, measured: float, unit: str, goal: float, below: bool = True) -> bool:
    ok = measured < goal if below else measured <= goal
    print(f"  {what:44} {measured:9.3f} {unit:6} goal {'<' if below else '≤'} {goal:g} {unit:6} "
          f"{'met' if ok else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,4,16,64", help="streams per level (default 1,4,16,64)")
    parser.add_argument("--per-stream", type=int, default=4, help="requests per stream (default 4)")
    parser.add_argument("--tokens", type=int, default=400, help="output tokens per request (default 400)")
    parser.add_argument("--quick", action="store_true", help="16 and 64 streams, 2 requests each: a smoke test "
                        "(bench_goals.py --quick), not the figures")
    args = parser.parse_args()
    if args.quick:
        args.levels, args.per_stream = "16,64", 2
    levels = [int(n) for n in args.levels.split(",")]
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_truth_server, args=(child,), daemon=True)
    server.start()
    child.close()
    port = parent.recv()
    print(f"{args.tokens} tokens at {TOK_S:g} tok/s (±{JITTER:.0%}), TTFT {TTFT_MS:g} ms, {args.per_stream} "
          f"requests per stream; load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    ok = True
    floor = asyncio.run(grid_floor())
    print(f"the floor: an event loop waking on the {PACE_S * 1000:g} ms grid with nothing to do takes {floor:.1f} ms "
          "of CPU a second "
          "(what one stream's 750 tok/s pays per 1,000 tokens is that ÷ 0.75; 64 streams share it)")
    try:
        asyncio.run(one_load(port, 4, 1, args.tokens))  # warm-up, not counted
        parent.send("records")
        parent.recv()
        for streams in levels:
            point, cpu = asyncio.run(one_load(port, streams, args.per_stream, args.tokens))
            parent.send("records")
            errors = score(point, parent.recv())
            tokens = point.output_tokens
            print(f"{streams} streams × {TOK_S:g} tok/s: {len(point.rows)} requests, {tokens:,} tokens, "
                  f"{point.delivered_tok_s or 0:,.0f} tok/s delivered; TTFT error p50 "
                  f"{percentile(errors['ttft_ms'], 50):.3f} ms; stamped after the server's, p50/p99: first token "
                  f"{percentile(errors['first_back_ms'], 50):.3f}/{percentile(errors['first_back_ms'], 99):.3f} ms, "
                  f"last {percentile(errors['last_back_ms'], 50):.3f}/{percentile(errors['last_back_ms'], 99):.3f} ms")
            plan_s = TTFT_MS / 1000.0 + (args.tokens - 1) / TOK_S
            served = [truth_e2e for truth_e2e in errors["server_e2e_s"]]
            print(f"  the truth server: e2e p50 {percentile(served, 50):.3f} s, p99 {percentile(served, 99):.3f} s "
                  f"(planned ≈ {plan_s:.3f} s{'; it fell behind' if percentile(served, 50) > plan_s * 1.05 else ''})")
            lag = LAGS.get(streams) or [0.0]
            print(f"  the event loop: a look on the {PACE_S * 1000:g} ms grid ran late by p50 "
                  f"{percentile(lag, 50):.2f} ms, p99 "
                  f"{percentile(lag, 99):.2f} ms (requests are stamped by the kernel, not by the loop)")
            ok &= line("TTFT error p99", percentile(errors["ttft_ms"], 99), "ms", TTFT_P99_MS)
            ok &= line("decode error p99", percentile(errors["decode_pct"], 99), "%", DECODE_P99_PCT)
            print(f"  client CPU: {cpu.process_s:.3f} s in {cpu.wall_s:.2f} s "
                  f"({cpu.process_s / cpu.wall_s * 1000:.0f} ms a second, of which {floor:.0f} the grid's wake-ups "
                  f"alone), the event loop {cpu.loop_s:.3f} s, the reader threads {cpu.readers_s:.3f} s; "
                  f"{cpu.process_s / len(point.rows) * 1000:.2f} ms a request")
            if streams > 1:
                ok &= line("client CPU per 1,000 tokens", cpu.process_s / tokens * 1000.0, "s", CPU_PER_1K_S,
                           below=False)
            else:  # one stream alone pays the wake-up floor: a figure, not a goal (see the module's docstring)
                figure = cpu.process_s / tokens * 1000.0
                print(f"  {'client CPU per 1,000 tokens (one stream)':44} {figure:9.3f} s      "
                      f"no goal: the floor alone is {floor / TOK_S:.3f} s")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000.0
        kept = kept_per_request()
        print(f"memory: peak RSS {peak:.0f} MB (this process, every level)")
        ok &= line("memory kept per request (the results row)", kept / 1000.0, "kB", KEPT_PER_REQUEST_KB,
                   below=False)
    finally:
        parent.send("stop")
        server.join(5)
    print(f"goals: {'all met' if ok else 'some missed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

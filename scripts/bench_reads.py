"""What an HTTP lane's event loop spends per read of the socket: the reads an OpenAI Chat lane gets from the
ground-truth server at a rate (each with its kernel stamp) are caught once, then replayed many times through the
whole loop-side path (the stamped stream's queue, the lean body, the provider's decoding, the race, the live model
and a buffered recorder), handed over a group at a time as the reader thread hands them over (a 16 ms group
while reads are per packet), on a made-up ``perf_counter`` (nothing waits), two ways: each hand-over's reads
turned into events in one step (``batched``, what a race does) and one read at a time (``per-read``). Prints the
CPU per read of each (the reader thread's own reading is not in it: see ``bench_wake.py``). Not a test.

    python scripts/bench_reads.py [--rate 750] [--seconds 4] [--rounds 9]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx

from tokrace.providers.adapters import create_provider
from tokrace.providers.adapters.http import stamped_stream as socket_reads
from tokrace.providers.adapters.http import transport as lean
from tokrace.providers.model import tokens
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.live import LiveRace
from tokrace.providers.race.race import Race
from tokrace.providers.recording import Recorder
from tokrace.providers.timing.clock import RealClock

Read = tuple[bytes, float]


def catch(rate: float, seconds: float) -> list[Read]:
    """Every read (bytes, stamp) of one turn from the ground-truth server at ``rate``."""
    from bench_cpu import http_tier, with_server

    caught: list[Read] = []
    take = socket_reads.StampedStream.read_ready

    def noting(stream: socket_reads.StampedStream, max_bytes: int) -> bytes:
        data = take(stream, max_bytes)
        caught.append((data, stream.read_at or 0.0))
        return data

    async def race(port: int) -> None:
        tier = http_tier(rate, seconds, port)
        tier = TierSpec(name=tier.name, provider=tier.provider, model=tier.model, base_url=tier.base_url,
                        max_tokens=int(rate * seconds))
        lanes = Race([tier], TurnRequest("cpu", tier.max_tokens or 0), RealClock())
        await lanes.prepare()
        await lanes.run()
        await lanes.aclose()

    socket_reads.StampedStream.read_ready = noting  # type: ignore[method-assign]
    try:
        with_server(rate, lambda port: asyncio.run(race(port)))
    finally:
        socket_reads.StampedStream.read_ready = take  # type: ignore[method-assign]
    return caught


def hand_overs(reads: list[Read]) -> list[list[Read]]:
    """The reads in the groups a reader thread hands over: those within one hand-over period of the first."""
    out: list[list[Read]] = []
    edge = -1.0
    for data, stamp in reads:
        if not out or stamp > edge:
            out.append([])
            edge = stamp + socket_reads.HAND_OVER_S
        out[-1].append((data, stamp - reads[0][1]))
    return out


class MadeUpTime:
    """``time.perf_counter`` reading what the replay says: just after the newest read handed over."""

    def __init__(self) -> None:
        self.now = time.perf_counter()
        self.real = time.perf_counter

    def __enter__(self) -> MadeUpTime:
        time.perf_counter = lambda: self.now
        return self

    def __exit__(self, *_: object) -> None:
        time.perf_counter = self.real


async def replay(groups: list[list[Read]], batched: bool, folder: Path) -> tuple[float, int]:
    """CPU seconds the loop spent on one replay of the reads, and how many reads."""
    tier = TierSpec(name="replay", provider="openai", model="gpt-4o", base_url="http://127.0.0.1:9/v1",
                    max_tokens=10_000_000)
    provider = create_provider(tier)
    await provider.prepare()
    ours, theirs = socket.socketpair()
    stream = socket_reads.StampedStream(ours, asyncio.get_running_loop(), read_now=False)
    stream._reading = True  # the reads come from the replay, not a thread
    transport = provider._lean  # type: ignore[attr-defined]

    async def respond(request: httpx.Request) -> httpx.Response:
        status, _, _, headers, rest = await lean._read_head(stream, None, request)
        body = lean._Body(transport, lean._Connection(("http", "127.0.0.1", 9), stream), request, status, headers,
                          rest, None, True)
        return httpx.Response(status, headers=headers, stream=body, request=request,
                              extensions={"network_stream": stream})

    provider._send = lambda client, request: asyncio.ensure_future(respond(request))  # type: ignore[attr-defined]
    if not batched:
        provider.stream_batched = None  # type: ignore[attr-defined]  # the race takes it event by event
    live = LiveRace([tier])
    live.lanes[0].set_encoding(*tokens.get_encoding(tier.model))  # type: ignore[arg-type]
    recorder = Recorder(folder / f"{batched}.jsonl", "cpu", [tier], buffered=True)
    lanes = Race([tier], TurnRequest("cpu", tier.max_tokens or 0), RealClock(), [live, recorder],
                 providers=[provider])
    done = False

    async def hand_over(clock: MadeUpTime, start: float) -> None:
        for index, group in enumerate(groups):
            while index and (stream._waiter is None or stream._waiter.done()):
                if done:
                    return
                await asyncio.sleep(0)
            clock.now = start + group[-1][1] + 0.0005
            stream._reads.extend((data, start + at) for data, at in group)
            if stream._waiter is not None and not stream._waiter.done():
                stream._waiter.set_result(None)

    async def flush() -> None:
        while True:
            await asyncio.sleep(0.05)
            recorder.flush()

    gc.collect()
    with MadeUpTime() as clock:
        cpu = time.process_time()
        feeding = asyncio.ensure_future(hand_over(clock, clock.now + 0.003))
        flushing = asyncio.ensure_future(flush())
        await lanes.run()
        flushing.cancel()
        recorder.flush()
        cpu = time.process_time() - cpu
        done = True
    await feeding
    await lanes.aclose()
    recorder.close()
    stream.close_now()
    theirs.close()
    return cpu, sum(len(group) for group in groups)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=750.0)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    groups = hand_overs(catch(args.rate, args.seconds))
    reads = sum(len(group) for group in groups)
    print(f"{reads} reads of one turn at {args.rate:g} tok/s, in {len(groups)} hand-overs")
    per: dict[str, list[float]] = {"batched": [], "per-read": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):  # the two ways taken in turn: the machine's load falls on both alike
            for name in per:
                cpu, count = asyncio.run(replay(groups, name == "batched", Path(folder)))
                per[name].append(cpu / count * 1e6)
    for name, figures in per.items():
        print(f"  {name:9} {statistics.median(figures):6.1f} µs of CPU per read (median of {args.rounds}; "
              f"min {min(figures):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory benchmark: how big does tokrace get over a million tokens, and does it keep growing?

One synthetic lane streams ``--tokens`` tokens, one token per event (the most events per token any provider
sends), recorded to a temporary file as a user's race would be. ``bench``: ``run_session`` on virtual time (as
``tokrace bench --fast-forward``), metrics computed at the end. ``screen``: the race screen drawing headless, its
clock a playback clock running as fast as the lane can go (stamps exact, as in a replay). The process's resident
set (``VmRSS``) is sampled every 100,000 tokens (on the screen, while the lane streams). The peak is the process's own
(``ru_maxrss``), so it counts what happens between samples (the metrics at the end). Each lane's history goes
to the event log's temporary file: its size, and the files left open once the run is over, are printed too.
Not a test: it prints figures.

Goals (issue 12): RSS after 1 M tokens < 150 MB, growing < 10 MB per 1 M tokens after the warm-up (the first
200,000 tokens).

    python scripts/bench_memory.py [--tokens 1000000] [--mode bench|screen|both]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RSS_GOAL_MB, GROWTH_GOAL_MB = 150.0, 10.0
STEP = 100_000
WARM_UP = 200_000
DISK_MB: list[float] = []
"""MB of events in the temporary file at the end of the run, its lanes still held."""


def rss_mb() -> float:
    """This process's resident set now, in MB (Linux ``/proc``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise SystemExit("no /proc/self/status: this script needs Linux")


def tier(tokens: int) -> object:
    from tokrace.providers.model.tiers import TierSpec

    return TierSpec(name="million", provider="synthetic", model="memory", max_tokens=tokens,
                    options={"ttft_ms": 100, "tok_s": 12_000, "seed": 1})


def run_bench(tokens: int, folder: Path) -> list[tuple[int, float]]:
    from tokrace.providers.model.events import Delta, Event
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.recording import Recorder
    from tokrace.providers.runs.session import run_session

    spec = tier(tokens)
    assert isinstance(spec, TierSpec)
    samples: list[tuple[int, float]] = [(0, rss_mb())]
    seen = [0]

    def sample(_lane: int, event: Event) -> None:
        if isinstance(event, Delta):
            seen[0] += event.tokens or event.chunks
            if seen[0] % STEP == 0:
                samples.append((seen[0], rss_mb()))

    recorder = Recorder(folder / "bench.jsonl", "memory", [spec])
    try:
        result = asyncio.run(_session(run_session, [spec], TurnRequest("memory", tokens), [recorder, sample]))
    finally:
        recorder.close()
    assert result, "the run failed"
    samples.append((seen[0], rss_mb()))  # with the metrics computed
    return samples


async def _session(run: object, tiers: list[object], request: object, listeners: list[object]) -> bool:
    result = await run(tiers, request, fast_forward=True, listeners=listeners)  # type: ignore[operator]
    DISK_MB.append(spooled_mb())  # while the run's lanes are held
    return bool(result.all_ok)


def run_screen(tokens: int, folder: Path) -> list[tuple[int, float]]:
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.runs.record_paths import RecordPlan
    from tokrace.providers.timing.clock import RealClock
    from tokrace.providers.timing.playback import PlaybackClock
    from tokrace.tui.app.app import build_app

    spec = tier(tokens)
    assert isinstance(spec, TierSpec)
    samples: list[tuple[int, float]] = [(0, rss_mb())]

    async def main() -> None:
        app = build_app([spec], TurnRequest("memory", tokens), record=RecordPlan(folder / "screen.jsonl"),
                        clock_factory=lambda: PlaybackClock(RealClock(), speed=1000.0))
        async with app.run_test(headless=True, size=(160, 45)):
            runner = app.runner
            await runner.wait_started()
            lane = runner.live.lanes[0]
            mark = STEP
            while not lane.finished:
                await asyncio.sleep(0.05)
                if lane.tokens >= mark and not lane.finished:  # the final answer's drawing is not growth
                    samples.append((lane.tokens, rss_mb()))
                    mark += STEP
            await runner.wait_finished()
            await asyncio.sleep(0.5)  # the final answer drawn
            samples.append((lane.tokens, rss_mb()))
            DISK_MB.append(spooled_mb())

    asyncio.run(main())
    return samples


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def spooled_mb() -> float:
    """MB of events in the event log's temporary file (the lanes' history, on disk)."""
    from tokrace.providers.model import eventlog

    spool = eventlog._current() if eventlog._current is not None else None
    return spool.size / 1e6 if spool is not None else 0.0


def _child(mode: str, tokens: int, out: multiprocessing.connection.Connection) -> None:
    files = open_files()
    with tempfile.TemporaryDirectory(prefix="tokrace-memory-") as folder:
        samples = (run_bench if mode == "bench" else run_screen)(tokens, Path(folder))
    gc.collect()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KB on Linux
    out.send((samples, peak, max(DISK_MB, default=0.0), open_files() - files))


def measure(mode: str, tokens: int) -> tuple[list[tuple[int, float]], float, float, int]:
    """Each mode in a fresh process, so that one's heap does not flatter or burden the other: the RSS samples, the
    process's peak RSS (between samples too: the metrics at the end), MB of events on disk, and files left open at
    the end (the run's lanes dropped)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(mode, tokens, child))
    proc.start()
    got: tuple[list[tuple[int, float]], float, float, int] = parent.recv()
    proc.join()
    return got


def rows(modes: list[str], tokens: int) -> list[tuple[str, str, str, bool]]:
    out = []
    for mode in modes:
        samples, peak, disk, files = measure(mode, tokens)
        print(f"{mode}: " + ", ".join(f"{n // 1000}k {mb:.0f} MB" for n, mb in samples), flush=True)
        print(f"{mode}: {disk:.0f} MB of events written to the temporary file; {files} more files open at the end "
              "than at the start", flush=True)
        end_tokens, end_mb = samples[-1]
        warm = next(((n, mb) for n, mb in samples if n >= WARM_UP), samples[0])
        streamed = [s for s in samples[:-1] if s[0] >= warm[0]]
        last_n, last_mb = streamed[-1] if streamed else (end_tokens, end_mb)
        growth = (last_mb - warm[1]) / max(last_n - warm[0], 1) * 1_000_000
        out.append((f"{mode}: RSS after {end_tokens / 1e6:.1f} M tokens (peak)", f"< {RSS_GOAL_MB:g} MB",
                    f"{end_mb:.0f} ({peak:.0f}) MB", peak < RSS_GOAL_MB))
        out.append((f"{mode}: growth after {WARM_UP // 1000}k tokens, per 1 M tokens", f"< {GROWTH_GOAL_MB:g} MB",
                    f"{growth:.1f} MB", growth < GROWTH_GOAL_MB))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--mode", choices=("bench", "screen", "both"), default="both")
    args = parser.parse_args()
    modes = ["bench", "screen"] if args.mode == "both" else [args.mode]
    ok = True
    results = rows(modes, args.tokens)
    print(f"{'measure':52} {'goal':>10} {'measured':>16}   (1 token per event, recorded)")
    for name, goal, got, met in results:
        ok = ok and met
        print(f"{name:52} {goal:>10} {got:>16}  {'met' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

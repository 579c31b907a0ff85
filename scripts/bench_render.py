"""Does the screen keep up? Drive the headless app on the real clock with 4 synthetic lanes at 3,000 tok/s and
one at 20,000 tok/s for 10 s, and print per lane the tokens delivered against the target, the event-loop lag
(overshoot of a 10 ms asyncio sleep) p50/p99, CPU seconds per second and peak RSS. The race is recorded, as
the screen records every race (to a temporary file, deleted after), unless --no-record.

Not a test: it takes real time and its figures depend on the machine. Targets: >= 99 % delivered, lag p99 < 50 ms.

    python scripts/bench_render.py [--seconds 10] [--tokens-per-event 1] [--size 200x50] [--no-record]
                                   [--rates 20000,20000,20000,20000]   (issue 12's row: 4 x 20,000 tok/s)
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

from tokrace.providers.adapters.synthetic import Profile, schedule
from tokrace.providers.metrics.turn import percentile
from tokrace.providers.model.events import Delta
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.runs.record_paths import RecordPlan
from tokrace.tui.app.app import build_app

LANES = [("lane 1", 3000.0), ("lane 2", 3000.0), ("lane 3", 3000.0), ("lane 4", 3000.0), ("lane 5", 20000.0)]
"""(name, target tok/s) of every lane."""

TTFT_MS = 100.0
WARM_UP_S = 1.0
"""Measuring starts this long after every lane's first token, once start-up (schedules being built) is over."""


def tiers(seconds: float, tokens_per_event: int) -> list[TierSpec]:
    """One synthetic tier per lane, streaming a little longer than the measured window."""
    return [TierSpec(name=name, provider="synthetic", model="bench", max_tokens=int(rate * (seconds + 3)),
                     options={"ttft_ms": TTFT_MS, "tok_s": rate, "seed": i, "tokens_per_event": tokens_per_event})
            for i, (name, rate) in enumerate(LANES)]


async def sample_lag(lags: list[float], stop: asyncio.Event) -> None:
    """The event loop's lag: how late a 10 ms sleep wakes, again and again."""
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.01)
        lags.append(time.perf_counter() - t0 - 0.01)


async def bench(seconds: float, tokens_per_event: int, size: tuple[int, int], record: Path | None) -> float:
    lanes = tiers(seconds, tokens_per_event)
    app = build_app(lanes, TurnRequest("bench", max(t.max_tokens or 0 for t in lanes)),
                    record=RecordPlan(record) if record is not None else None)
    async with app.run_test(headless=True, size=size):
        runner = app.runner
        await runner.wait_started()
        live = runner.live
        while any(lane.ttft is None for lane in live.lanes):
            await asyncio.sleep(0.005)
        await asyncio.sleep(WARM_UP_S)
        lags: list[float] = []
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_lag(lags, stop))
        screen = app.screen
        frames0 = getattr(screen, "_frame", 0)
        cpu0, wall0, t0 = time.process_time(), time.perf_counter(), runner.now()
        await asyncio.sleep(seconds)
        cpu1, wall1, t1 = time.process_time(), time.perf_counter(), runner.now()
        frames = getattr(screen, "_frame", 0) - frames0
        stop.set()
        await sampler
        race = runner.race
        assert race is not None
        await runner.stop()

    recorded = (f"recorded ({record.stat().st_size / 1e6:.0f} MB)" if record is not None and record.exists()
                else "not recorded")
    print(f"{len(LANES)} lanes, {tokens_per_event} token(s) per event, {seconds:g} s on the real clock, "
          f"headless {size[0]}x{size[1]}, {recorded}")
    print(f"{'lane':<8} {'target tok/s':>12} {'achieved':>10} {'delivered':>10}")
    worst = 100.0
    for (name, rate), run, tier in zip(LANES, race.lanes, lanes, strict=True):
        window = sum(e.tokens or 0 for e in run.events if isinstance(e, Delta) and t0 < e.t <= t1)
        achieved = window / (t1 - t0)
        # Delivered: every token the schedule planned up to the window's end, had it arrived by then? (A lane
        # that fell behind during start-up shows more than its rate while it catches up, so the rate alone
        # could flatter it.)
        start = next(e.t for e in run.events if e.kind == "request")
        planned = sum(step.tokens for step in schedule(Profile.from_options(tier.options), tier.max_tokens or 0)
                      if start + step.t <= t1)
        arrived = sum(e.tokens or 0 for e in run.events if isinstance(e, Delta) and e.t <= t1)
        share = 100.0 * arrived / planned
        worst = min(worst, share)
        print(f"{name:<8} {rate:>12,.0f} {achieved:>10,.0f} {share:>9.1f}%")
    ms = [lag * 1000.0 for lag in lags]
    p50, p99 = percentile(ms, 50), percentile(ms, 99)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"event-loop lag: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(ms):.1f} ms ({len(ms)} samples)")
    print(f"CPU: {(cpu1 - cpu0) / (wall1 - wall0):.2f} s per s; peak RSS {rss_mb:.0f} MB; "
          f"screen frames: {frames / (wall1 - wall0):.1f} per s")
    verdict = "met" if worst >= 99.0 and p99 < 50.0 else "NOT met"
    print(f"targets (>= 99 % delivered, lag p99 < 50 ms): {verdict}")
    rates = " + ".join(f"{rate:,.0f}" for _, rate in LANES)
    print(f"{'delivery, ' + rates + ' tok/s (worst lane)':52} {'>= 99 %':>10} {worst:>9.1f} %  "
          f"{'met' if worst >= 99.0 else 'MISSED'}")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--size", default="200x50", help="terminal size, COLSxROWS")
    parser.add_argument("--no-record", action="store_true", help="do not record the race")
    parser.add_argument("--rates", help="one lane per rate, comma-separated tok/s (default: 4 x 3,000 + 20,000)")
    args = parser.parse_args()
    if args.rates:
        LANES[:] = [(f"lane {i + 1}", float(rate)) for i, rate in enumerate(args.rates.split(","))]
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="tokrace-bench-") as folder:
        record = None if args.no_record else Path(folder) / "bench.jsonl"
        asyncio.run(bench(args.seconds, args.tokens_per_event, (cols, rows), record))


if __name__ == "__main__":
    main()

"""CPU benchmark: what does the race screen cost while one lane streams at a given rate, and when nothing moves?

Drives the headless app on the real clock with one lane per rate (750 to 12,000 tok/s by default), for a few
seconds each after a warm-up, and measures the process's CPU time (every thread) over wall time; then the same
screen idle (the race over, nothing changing) for a few seconds. A lane is an OpenAI Chat lane reading a
ground-truth server in another process over loopback (``http``: what a real tier costs), or a synthetic lane
(``synthetic``: the offline demo, whose lanes also wait for each token's moment in this process). Not a test: it
prints figures.

Goals (issue 12): < 10 % of a core at every rate from 750 to 12,000 tok/s; < 3 % idle.

    python scripts/bench_cpu.py [--rates 750,3000,12000] [--seconds 4] [--size 160x45] [--source http|synthetic|both]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from providers.base import TierSpec, TurnRequest

RATE_GOAL, IDLE_GOAL = 10.0, 3.0
WARM_UP_S = 1.0


def tier(rate: float, seconds: float) -> TierSpec:
    return TierSpec(name=f"{rate:g} tok/s", provider="synthetic", model="cpu",
                    max_tokens=int(rate * (seconds + WARM_UP_S + 2)),
                    options={"ttft_ms": 50, "tok_s": rate, "seed": 1})


async def cpu_share(seconds: float) -> float:
    """Percent of one core this process used over the next ``seconds``."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    return 100.0 * (time.process_time() - cpu0) / (time.perf_counter() - wall0)


def http_tier(rate: float, seconds: float, port: int) -> TierSpec:
    return TierSpec(name=f"{rate:g} tok/s", provider="openai", model="cpu", base_url=f"http://127.0.0.1:{port}/v1",
                    max_tokens=int(rate * (seconds + WARM_UP_S + 2)))


def with_server(rate: float, run: Callable[[int], float]) -> float:
    """``run(port)`` with a ground-truth server streaming at ``rate`` in a process of its own."""
    import multiprocessing

    from bench_first_request import truth_server

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=truth_server, args=(child, rate), daemon=True)
    server.start()
    try:
        tag, port = parent.recv()
        assert tag == "port"
        return run(port)
    finally:
        parent.send("stop")
        server.join(5)


async def streaming(spec: TierSpec, seconds: float, size: tuple[int, int]) -> float:
    from tui.app import build_app

    app = build_app([spec], TurnRequest("cpu", spec.max_tokens or 0))
    async with app.run_test(headless=True, size=size):
        runner = app.runner
        await runner.wait_started()
        while runner.live.lanes[0].ttft is None:
            await asyncio.sleep(0.01)
        await asyncio.sleep(WARM_UP_S)
        share = await cpu_share(seconds)
        await runner.stop()
    return share


async def idle(seconds: float, size: tuple[int, int]) -> float:
    from tui.app import build_app

    spec = TierSpec(name="idle", provider="synthetic", model="cpu", options={"ttft_ms": 10, "tok_s": 5000})
    app = build_app([spec], TurnRequest("cpu", 200))
    async with app.run_test(headless=True, size=size):
        await app.runner.wait_started()
        await app.runner.wait_finished()
        await asyncio.sleep(1.0)  # the summary drawn, the screen settled
        return await cpu_share(seconds)


def rows(rates: list[float], seconds: float, size: tuple[int, int], sources: list[str],
         ) -> list[tuple[str, str, str, bool]]:
    out = []
    for source in sources:
        for rate in rates:
            if source == "http":
                share = with_server(rate, lambda port, r=rate: asyncio.run(  # type: ignore[misc]
                    streaming(http_tier(r, seconds, port), seconds, size)))
            else:
                share = asyncio.run(streaming(tier(rate, seconds), seconds, size))
            out.append((f"screen CPU, one {source} lane at {rate:,.0f} tok/s", f"< {RATE_GOAL:g} %",
                        f"{share:.1f} %", share < RATE_GOAL))
    share = asyncio.run(idle(seconds, size))
    out.append(("screen CPU, idle (race over)", f"< {IDLE_GOAL:g} %", f"{share:.1f} %", share < IDLE_GOAL))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="750,3000,12000")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--size", default="160x45", help="terminal size, COLSxROWS")
    parser.add_argument("--source", choices=("http", "synthetic", "both"), default="both")
    args = parser.parse_args()
    sources = ["http", "synthetic"] if args.source == "both" else [args.source]
    cols, lines = (int(x) for x in args.size.lower().split("x"))
    ok = True
    print(f"{'measure':52} {'goal':>10} {'measured':>10}   (headless {cols}x{lines}, {args.seconds:g} s each)")
    for name, goal, got, met in rows([float(r) for r in args.rates.split(",")], args.seconds, (cols, lines),
                                     sources):
        ok = ok and met
        print(f"{name:52} {goal:>10} {got:>10}  {'met' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

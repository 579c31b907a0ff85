"""What does the race screen's status line cost a frame? One synthetic lane streams at 12,000 tok/s in a headless
app on the real clock (the screen draws 15 frames a second, each naming the lane's new token count), and the time
spent in the status line's own work (handing it the frame's line, and drawing it when the screen's update asks)
is summed over a few seconds and divided by the frames drawn. Not a test: it prints figures (issue 29: no goal
of its own; it is a share of the screen's CPU goal of issue 12, ``scripts/bench_cpu.py``).

    python scripts/bench_status_line.py [--seconds 5] [--size 160x45]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable

from tokrace.providers.metrics.turn import percentile
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.app.app import build_app


async def bench(seconds: float, size: tuple[int, int]) -> tuple[list[float], int, int]:
    """The time each frame spent on the status line (handing it the line, and drawing it), the frames drawn and how
    many of them changed the line."""
    tier = TierSpec(name="12000 tok/s", provider="synthetic", model="bench", max_tokens=int(12_000 * (seconds + 3)),
                    options={"ttft_ms": 50, "tok_s": 12_000.0, "seed": 1})
    app = build_app([tier], TurnRequest("bench", tier.max_tokens or 0), record=None)
    spent: list[float] = [0.0]
    changed: list[str] = []
    async with app.run_test(headless=True, size=size):
        runner = app.runner
        await runner.wait_started()
        while runner.live.lanes[0].ttft is None:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.5)
        screen = app.screen
        summary = screen.summary  # type: ignore[attr-defined]

        def timed(method: Callable[..., object]) -> Callable[..., object]:
            def call(*args: object, **kwargs: object) -> object:
                start = time.perf_counter()
                try:
                    return method(*args, **kwargs)
                finally:
                    spent[0] += time.perf_counter() - start
            return call

        for name in ("update", "show_line", "render_lines"):  # what the screen's frame and update ask of it
            if hasattr(summary, name):
                setattr(summary, name, timed(getattr(summary, name)))
        frames0 = getattr(screen, "_frame", 0)
        end = time.perf_counter() + seconds
        per_frame: list[float] = []
        while time.perf_counter() < end:
            before, text = spent[0], summary.content
            await asyncio.sleep(0.001)
            if getattr(screen, "_frame", 0) != frames0 + len(per_frame):
                per_frame.append((spent[0] - before) * 1000.0)
                if str(summary.content) != str(text):
                    changed.append(str(summary.content))
        frames = getattr(screen, "_frame", 0) - frames0
        await runner.stop()
    return per_frame, frames, len(changed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", default="160x45")
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    times, frames, changed = asyncio.run(bench(args.seconds, (width, height)))
    mean = sum(times) / max(len(times), 1)
    print(f"status line, one lane at 12,000 tok/s, headless {width}x{height}, {args.seconds:g} s on the real clock: "
          f"{frames} frames, {changed} with a new line")
    print(f"{'status line per frame (mean)':40} {mean:>8.3f} ms")
    print(f"{'status line per frame (p99)':40} {percentile(times, 99):>8.3f} ms")


if __name__ == "__main__":
    main()

"""CPU benchmark: what does the race screen cost while one lane streams at a given rate, and when nothing moves?

Drives the app on the real clock, drawing each frame for a terminal (written to the null device), with one lane per
rate (750 to 12,000 tok/s by default), for a few seconds each after a warm-up, and measures the process's CPU time
(every thread) over wall time; then the same screen idle (the race over, nothing changing) for a few seconds. The
screen records each race to a file, as ``tokrace`` does unless told not to (``--no-record`` measures it without). A
lane is an OpenAI Chat lane reading a ground-truth server in another process over loopback (``http``: what a real
tier costs), or a synthetic lane (``synthetic``: the offline demo, whose lanes also wait for each token's moment in
this process). Not a test: it prints figures.

Under each streaming row, the screen's own share: the CPU time its frames took (the race screen sampling the live
model, and Textual compositing what changed), how many frames a second it drew and how long each took; the rest
of the row is the lanes' work (reading, decoding, counting, the clock). ``--lanes N`` races N lanes at each rate.

Goals (issue 12): < 10 % of a core at every rate from 750 to 12,000 tok/s; < 3 % idle.

    python scripts/bench_cpu.py [--rates 750,3000,12000] [--seconds 4] [--size 160x45] [--source http|synthetic|both]
                                [--lanes 1] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec

T = TypeVar("T")
RATE_GOAL, IDLE_GOAL = 10.0, 3.0
WARM_UP_S = 1.0


def tier(rate: float, seconds: float, seed: int = 1) -> TierSpec:
    return TierSpec(name=f"{rate:g} tok/s", provider="synthetic", model="cpu",
                    max_tokens=int(rate * (seconds + WARM_UP_S + 2)),
                    options={"ttft_ms": 50, "tok_s": rate, "seed": seed})


class FrameMeter:
    """The thread CPU time the screen's frames take while ``on``: the race screen's frame callback (sampling the
    live model, handing each widget what changed) and Textual's screen update (compositing and writing what was
    refreshed)."""

    def __init__(self) -> None:
        self.on = False
        self.inside = False
        self.frames = 0
        self.updates = 0
        self.cpu = 0.0
        self.sampling = 0.0
        """Of ``cpu``: the race screen's frame callback (the rest is Textual drawing what it refreshed)."""

    def install(self) -> None:
        from textual.screen import Screen

        from tokrace.tui.app.screens.race import RaceScreen

        self._wrap(RaceScreen, "sample", frame=True)
        if hasattr(Screen, "_on_timer_update"):  # Textual's own: measured where it exists
            self._wrap(Screen, "_on_timer_update", frame=False)

    def _wrap(self, cls: type, name: str, frame: bool) -> None:
        original = getattr(cls, name)
        meter = self

        def timed(*args: object, **kwargs: object) -> object:
            if not meter.on:
                return original(*args, **kwargs)
            outer = not meter.inside
            meter.inside = True
            cpu = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                took = time.thread_time() - cpu
                meter.inside = not outer
                if outer:  # a frame draws its update itself: counted once, as drawing
                    meter.cpu += took
                if frame:
                    meter.frames += 1
                    meter.sampling += took
                else:
                    meter.updates += 1
                    if not outer:
                        meter.sampling -= took

        setattr(cls, name, timed)

    def line(self, wall: float) -> str:
        frames = max(self.frames, 1)
        each, sampling = 1000.0 * self.cpu / frames, 1000.0 * self.sampling / frames
        return (f"  the screen's frames: {100.0 * self.cpu / wall:.1f} % of a core ({self.frames / wall:.1f} frames/s, "
                f"{self.updates / wall:.1f} drawn, {each:.2f} ms each: {sampling:.2f} sampling the lanes, "
                f"{each - sampling:.2f} drawing); the rest is the lanes' work")


METER = FrameMeter()
RECORD = True
"""Whether the screen records each race (to a temporary folder), as ``tokrace`` does unless ``--no-record``."""


def terminal_driver() -> type:
    """Textual's headless driver, but not headless to the app: every frame is turned into the escape sequences a
    terminal gets, as on a real screen, and written (one ``write`` a frame) to the null device. So a row counts
    what drawing into a terminal costs tokrace, all but the terminal's own work (in its own process); a headless
    app skips making those sequences, ~0.3 ms a frame."""
    from textual.drivers.headless_driver import HeadlessDriver

    class TerminalDriver(HeadlessDriver):
        _sink = os.open(os.devnull, os.O_WRONLY)
        _out: ClassVar[list[str]] = []

        @property
        def is_headless(self) -> bool:
            return False

        def write(self, data: str) -> None:
            self._out.append(data)

        def flush(self) -> None:
            if self._out:
                os.write(self._sink, "".join(self._out).encode("utf-8"))
                self._out.clear()

    return TerminalDriver


def build(specs: list[TierSpec], request: TurnRequest, folder: str) -> Any:
    """The app racing ``specs`` drawing into a null terminal (:func:`terminal_driver`; run it with ``headless=False``),
    recording into ``folder`` unless :data:`RECORD` is off."""
    from tokrace.providers.runs.record_paths import RecordPlan
    from tokrace.tui.app.app import build_app

    app = build_app(specs, request, record=RecordPlan(Path(folder) / "race.jsonl") if RECORD else None)
    app.driver_class = terminal_driver()
    return app


async def cpu_share(seconds: float) -> float:
    """Percent of one core this process used over the next ``seconds``."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    return 100.0 * (time.process_time() - cpu0) / (time.perf_counter() - wall0)


async def cpu_and_frames(seconds: float) -> tuple[float, str]:
    """Percent of one core this process used over the next ``seconds``, and what the screen's frames took, with
    how often the process slept and was woken (each wake-up costs about 0.2 ms of CPU on a VM with nothing else
    running: see docs/internals.md)."""
    METER.on, METER.frames, METER.updates, METER.cpu, METER.sampling = True, 0, 0, 0.0, 0.0
    wall0 = time.perf_counter()
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    try:
        share = await cpu_share(seconds)
    finally:
        METER.on = False
    wall = time.perf_counter() - wall0
    woken = (resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches) / wall
    return share, f"{METER.line(wall)}; the process woken {woken:.0f} times a second"


def http_tier(rate: float, seconds: float, port: int) -> TierSpec:
    return TierSpec(name=f"{rate:g} tok/s", provider="openai", model="cpu", base_url=f"http://127.0.0.1:{port}/v1",
                    max_tokens=int(rate * (seconds + WARM_UP_S + 2)))


def with_server(rate: float, run: Callable[[int], T]) -> T:
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


async def streaming(specs: list[TierSpec], seconds: float, size: tuple[int, int]) -> tuple[float | None, str]:
    """The process's share of a core while the lanes stream (``None`` when they did not stream all through the
    window: a figure measured after the race would be an idle screen's), and the screen's own share."""
    with tempfile.TemporaryDirectory(prefix="tokrace-bench-cpu-") as folder:
        return await _streaming(specs, seconds, size, folder)


async def _streaming(specs: list[TierSpec], seconds: float, size: tuple[int, int], folder: str,
                     ) -> tuple[float | None, str]:
    app = build(specs, TurnRequest("cpu", max(spec.max_tokens or 0 for spec in specs)), folder)
    async with app.run_test(headless=False, size=size):
        runner = app.runner
        await runner.wait_started()
        while any(lane.ttft is None for lane in runner.live.lanes):
            await asyncio.sleep(0.01)
        started = time.perf_counter()
        await asyncio.sleep(WARM_UP_S)
        late = time.perf_counter() - started - WARM_UP_S
        share, frames = await cpu_and_frames(seconds)
        ended = [lane for lane in runner.live.lanes if lane.ended_at is not None]
        await runner.stop()
    if ended:
        return None, (f"  not measured: the lanes stopped streaming before the window closed (the warm-up's "
                      f"{WARM_UP_S:g} s sleep woke {late:.1f} s late: the event loop was held); {frames.strip()}")
    return share, frames


async def idle(seconds: float, size: tuple[int, int]) -> float:
    with tempfile.TemporaryDirectory(prefix="tokrace-bench-cpu-") as folder:
        return await _idle(seconds, size, folder)


async def _idle(seconds: float, size: tuple[int, int], folder: str) -> float:
    spec = TierSpec(name="idle", provider="synthetic", model="cpu", options={"ttft_ms": 10, "tok_s": 5000})
    app = build([spec], TurnRequest("cpu", 200), folder)
    async with app.run_test(headless=False, size=size):
        await app.runner.wait_started()
        await app.runner.wait_finished()
        await asyncio.sleep(1.0)  # the summary drawn, the screen settled
        return await cpu_share(seconds)


def rows(rates: list[float], seconds: float, size: tuple[int, int], sources: list[str], lanes: int = 1,
         ) -> list[tuple[str, str, str, bool, str]]:
    out = []
    what = "one {} lane" if lanes == 1 else f"{lanes} {{}} lanes"
    for source in sources:
        for rate in rates:
            if source == "http":
                share, frames = with_server(rate, lambda port, r=rate: asyncio.run(  # type: ignore[misc]
                    streaming([http_tier(r, seconds, port) for _ in range(lanes)], seconds, size)))
            else:
                share, frames = asyncio.run(streaming([tier(rate, seconds, seed=i + 1) for i in range(lanes)],
                                                      seconds, size))
            out.append((f"screen CPU, {what.format(source)} at {rate:,.0f} tok/s", f"< {RATE_GOAL:g} %",
                        "—" if share is None else f"{share:.1f} %", share is not None and share < RATE_GOAL,
                        frames))
    share = asyncio.run(idle(seconds, size))
    out.append(("screen CPU, idle (race over)", f"< {IDLE_GOAL:g} %", f"{share:.1f} %", share < IDLE_GOAL, ""))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="750,3000,12000")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--size", default="160x45", help="terminal size, COLSxROWS")
    parser.add_argument("--source", choices=("http", "synthetic", "both"), default="both")
    parser.add_argument("--lanes", type=int, default=1, help="lanes racing at each rate (default 1)")
    parser.add_argument("--no-record", action="store_true",
                        help="do not record the races (the screen records each race by default, as tokrace does)")
    args = parser.parse_args()
    if args.lanes < 1:
        parser.error("--lanes must be at least 1")
    global RECORD
    RECORD = not args.no_record
    METER.install()
    sources = ["http", "synthetic"] if args.source == "both" else [args.source]
    cols, lines = (int(x) for x in args.size.lower().split("x"))
    ok = True
    recording = "recording each race" if RECORD else "not recording"
    print(f"{'measure':52} {'goal':>10} {'measured':>10}   ({cols}x{lines} drawn to a null terminal, "
          f"{args.seconds:g} s each, {recording})")
    for name, goal, got, met, frames in rows([float(r) for r in args.rates.split(",")], args.seconds,
                                             (cols, lines), sources, args.lanes):
        ok = ok and met
        print(f"{name:52} {goal:>10} {got:>10}  {'met' if met else 'MISSED'}", flush=True)
        if frames:
            print(frames, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

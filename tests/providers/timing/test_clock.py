"""Clocks: the virtual clock only moves when told, wakes sleepers in deadline order, and drives tasks instantly."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from tokrace.providers.timing.clock import LaneClock, RealClock, VirtualClock


async def test_virtual_time_stands_still_until_told() -> None:
    clock = VirtualClock(start=5.0)
    await asyncio.sleep(0)
    assert clock.now() == 5.0
    await clock.advance(1.5)
    assert clock.now() == 6.5


async def test_virtual_clock_wakes_sleepers_in_deadline_order_with_exact_stamps() -> None:
    clock = VirtualClock()
    woke: list[tuple[str, float, float]] = []

    async def sleeper(name: str, t: float) -> None:
        stamp = await clock.sleep_until(t)
        woke.append((name, stamp, clock.now()))

    tasks = [asyncio.create_task(sleeper(n, t)) for n, t in (("c", 3.0), ("a", 1.0), ("b", 2.0), ("a2", 1.0))]
    await clock.advance_to(10.0)
    await asyncio.gather(*tasks)
    assert woke == [("a", 1.0, 1.0), ("a2", 1.0, 1.0), ("b", 2.0, 2.0), ("c", 3.0, 3.0)]
    assert clock.now() == 10.0


async def test_advance_to_wakes_only_the_sleepers_that_are_due() -> None:
    clock = VirtualClock()
    early = asyncio.create_task(clock.sleep_until(1.0))
    late = asyncio.create_task(clock.sleep_until(2.0))
    await clock.advance_to(1.5)
    assert early.done() and early.result() == 1.0
    assert not late.done()
    assert clock.next_deadline == 2.0
    await clock.advance_to(2.0)
    assert late.result() == 2.0


async def test_sleeping_until_a_past_time_returns_at_once_with_the_current_time() -> None:
    clock = VirtualClock(start=4.0)
    assert await clock.sleep_until(1.0) == 4.0


async def test_drive_runs_a_task_to_completion_jumping_from_deadline_to_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualClock()
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    polls: list[float | None] = []
    select = selector.select

    def noted(timeout: float | None = None) -> object:
        polls.append(timeout)
        return select(timeout)

    monkeypatch.setattr(selector, "select", noted)

    async def slow() -> str:
        for t in (0.5, 60.0, 3600.0):
            await clock.sleep_until(t)
        return "done"

    assert await clock.drive(slow()) == "done"
    assert clock.now() == 3600.0
    assert polls and all(timeout == 0 for timeout in polls)  # the event loop never waited, for a timer or else


async def test_drive_interleaves_concurrent_sleepers_by_virtual_time() -> None:
    clock = VirtualClock()
    order: list[tuple[str, float]] = []

    async def ticker(name: str, period: float, n: int) -> None:
        for i in range(1, n + 1):
            order.append((name, await clock.sleep_until(i * period)))

    async def both() -> None:
        await asyncio.gather(ticker("fast", 0.1, 5), ticker("slow", 0.25, 2))

    await clock.drive(both())
    assert [t for _, t in order] == sorted(t for _, t in order)
    assert [n for n, _ in order] == ["fast", "fast", "slow", "fast", "fast", "slow", "fast"]


async def test_lane_clock_measures_from_the_lane_start() -> None:
    base = VirtualClock(start=100.0)
    lane = LaneClock(base, origin=100.0)
    assert lane.now() == 0.0
    assert lane.virtual
    task = asyncio.create_task(lane.sleep_until(0.3))
    await base.advance_to(100.3)
    assert await task == 0.3
    assert lane.now() == base.now() - 100.0


async def test_lane_clock_stamps_are_exact_despite_origin_rounding() -> None:
    base = VirtualClock(start=0.1)
    lane = LaneClock(base, origin=0.1)
    stamps = []

    async def go() -> None:
        for i in range(1, 200):
            stamps.append(await lane.sleep_until(i / 750))

    await base.drive(go())
    assert stamps == [i / 750 for i in range(1, 200)]


async def test_real_clock_never_wakes_before_the_deadline() -> None:
    clock = RealClock()
    assert not clock.virtual
    deadline = clock.now() + 0.003
    stamp = await clock.sleep_until(deadline)
    assert stamp >= deadline
    assert clock.now() >= deadline


async def test_real_clock_wakes_concurrent_sleepers_in_deadline_order() -> None:
    clock = RealClock()
    start = clock.now()
    deadlines = [start + ms / 1000 for ms in (60, 20, 40, 30, 50)]
    stamps = await asyncio.gather(*(clock.sleep_until(t) for t in deadlines))
    assert all(stamp >= t for stamp, t in zip(stamps, deadlines, strict=True))
    assert sorted(range(5), key=lambda i: stamps[i]) == sorted(range(5), key=lambda i: deadlines[i])


async def test_a_cancelled_real_sleeper_does_not_disturb_the_others() -> None:
    clock = RealClock()
    start = clock.now()
    doomed = asyncio.create_task(clock.sleep_until(start + 0.002))
    survivor = asyncio.create_task(clock.sleep_until(start + 0.004))
    await asyncio.sleep(0)
    doomed.cancel()
    assert await survivor >= start + 0.004
    assert doomed.cancelled()


def _random_sleepers(seed: int) -> list[list[float]]:
    """Lanes of increasing sleep times, with ties between lanes and within the grid (t = k / 8)."""
    import random

    rng = random.Random(seed)
    lanes = []
    for _ in range(rng.randint(2, 6)):
        t, times = 0.0, []
        for _ in range(rng.randint(1, 40)):
            t += rng.choice((0.0, 0.125, 0.125, 0.25, 0.5))
            times.append(t)
        lanes.append(times)
    return lanes


async def _play(lanes: list[list[float]], by_drive: bool) -> list[tuple[int, float]]:
    clock = VirtualClock()
    order: list[tuple[int, float]] = []

    async def lane(i: int, times: list[float]) -> None:
        for t in times:
            order.append((i, await clock.sleep_until(t)))

    async def race() -> None:
        await asyncio.gather(*(lane(i, times) for i, times in enumerate(lanes)))

    if by_drive:
        await clock.drive(race())
    else:  # the reference: step from deadline to deadline, settling the loop after each
        task = asyncio.create_task(race())
        await clock.advance_to(max(t for times in lanes for t in times) + 1.0)
        await task
    return order


async def test_drive_wakes_sleepers_in_the_same_order_as_stepping_deadline_by_deadline() -> None:
    """Sleepers that hand time on to each other (no loop pass of drive's own) keep the order of the reference:
    earliest first, and at the same moment, first come first."""
    for seed in range(40):
        lanes = _random_sleepers(seed)
        assert await _play(lanes, by_drive=True) == await _play(lanes, by_drive=False), seed


async def test_drive_runs_a_sleeper_woken_at_the_same_moment_as_another_after_it() -> None:
    clock = VirtualClock()
    order: list[str] = []

    async def first() -> None:
        await clock.sleep_until(1.0)
        order.append("first")

    async def second() -> None:
        await asyncio.sleep(0)  # goes to sleep after `first`, for the same moment, with nothing else to run
        await clock.sleep_until(1.0)
        order.append("second")

    async def both() -> None:
        await asyncio.gather(first(), second())

    await clock.drive(both())
    assert order == ["first", "second"]


async def test_drive_moves_time_on_when_a_task_waits_on_something_else_or_ends() -> None:
    """A stall that no sleeper ends (a task waiting on an event another sets, a task ending) is still found."""
    clock = VirtualClock()
    ready = asyncio.Event()
    log: list[tuple[str, float]] = []

    async def waiter() -> None:
        await ready.wait()
        log.append(("waiter", clock.now()))
        await clock.sleep_until(5.0)
        log.append(("waiter", clock.now()))

    async def setter() -> None:
        for t in (1.0, 2.0):
            await clock.sleep_until(t)
        ready.set()
        log.append(("setter", clock.now()))

    async def short() -> None:
        await clock.sleep_until(0.5)

    async def all_three() -> None:
        await asyncio.gather(waiter(), setter(), short())

    await clock.drive(all_three())
    assert log == [("setter", 2.0), ("waiter", 2.0), ("waiter", 5.0)]


async def test_a_driven_sleeper_that_is_always_next_still_lets_the_loop_run() -> None:
    """A lane streaming alone hands time to itself without a loop pass, but yields now and then, so the loop's
    callbacks (a signal handler, I/O, a timer) run before it ends."""
    clock = VirtualClock()
    seen: list[float] = []
    loop = asyncio.get_running_loop()
    loop.call_soon(lambda: loop.call_soon(lambda: seen.append(clock.now())))

    async def alone() -> None:
        for i in range(1, 5001):
            await clock.sleep_until(i / 1000)

    await clock.drive(alone())
    assert clock.now() == 5.0
    assert seen and seen[0] < 1.0


async def test_a_clock_drives_one_task_at_a_time() -> None:
    clock = VirtualClock()

    async def inner() -> None:
        await clock.drive(clock.sleep_until(1.0))

    async def outer() -> None:
        await clock.sleep_until(0.5)
        await inner()

    with pytest.raises(RuntimeError, match="already driving"):
        await clock.drive(outer())


async def test_a_coarse_real_sleeper_never_wakes_before_its_deadline() -> None:
    clock = RealClock()
    deadlines = [clock.now() + ms / 1000 for ms in (3, 1, 2, 5)]
    stamps = await asyncio.gather(*(clock.sleep_until_coarse(t) for t in deadlines))
    assert all(stamp >= t for stamp, t in zip(stamps, deadlines, strict=True))
    assert await clock.sleep_until_coarse(clock.now() - 1.0) < clock.now()  # already due: at once


async def test_a_coarse_sleeper_on_every_other_point_wakes_at_its_point_of_the_grid_or_after() -> None:
    """``cells=2`` (the screen's frames, the recorder's flushes) wakes at the first point of the coarse grid that is
    even (a multiple of two cells) at or after the deadline, never before: where lanes on the grid wake too."""
    from tokrace.providers.timing.clock import COARSE_WAKE_S

    clock = RealClock()
    step = 2 * COARSE_WAKE_S
    for ahead in (0.001, COARSE_WAKE_S, 1.5 * COARSE_WAKE_S):
        t = clock.now() + ahead
        woke = await clock.sleep_until_coarse(t, cells=2)
        assert woke >= math.ceil(t / step) * step >= t


async def test_a_coarse_lane_clock_waits_coarsely_where_the_base_can_and_precisely_elsewhere() -> None:
    real = RealClock()
    assert LaneClock(real, 0.0, coarse=True)._wait == real.sleep_until_coarse
    assert LaneClock(real, 0.0)._wait == real.sleep_until
    virtual = VirtualClock()
    assert LaneClock(virtual, 0.0, coarse=True)._wait == virtual.sleep_until  # virtual time is exact anyway


class _HeldClocks:
    """``perf_counter_ns`` and ``time_ns`` on one true time line (100 ns a reading), the real-time clock a fixed way
    ahead; ``hold`` ns pass, once, between the first real-time reading and the next reading (a thread held there)."""

    PERF0, REAL0 = 5_000_000_000, 1_700_000_000_000_000_000

    def __init__(self, hold: int) -> None:
        self.true = 1_000_000_000
        self.hold = hold

    def _tick(self) -> int:
        self.true += 100
        return self.true

    def perf_counter_ns(self) -> int:
        return self.PERF0 + self._tick()

    def time_ns(self) -> int:
        now = self.REAL0 + self._tick()
        self.true += self.hold
        self.hold = 0
        return now


@pytest.mark.parametrize("hold_ms", [0, 50, 120])
def test_a_kernel_stamp_lands_where_it_was_taken_even_when_the_thread_is_held_while_converting_it(
        monkeypatch: pytest.MonkeyPatch, hold_ms: int) -> None:
    """A receive or transmit stamp on the real-time clock becomes a ``perf_counter`` value. A thread held between
    reading the two clocks (the OS giving a busy core to another process) moved the stamp by as long as it was
    held (a first token 117 ms late in bench_fidelity on a loaded box); the clocks are read again when that
    happened, so the stamp stays where it was taken."""
    from tokrace.providers.timing import stamps as clock_module

    clocks = _HeldClocks(hold_ms * 1_000_000)
    monkeypatch.setattr(clock_module.time, "perf_counter_ns", clocks.perf_counter_ns)
    monkeypatch.setattr(clock_module.time, "time_ns", clocks.time_ns)
    taken = clocks.true - 3_000_000  # the packet came 3 ms ago, on the true time line
    real = clocks.REAL0 + taken
    got = clock_module.kernel_time(real // 1_000_000_000, real % 1_000_000_000)
    assert abs(got - (clocks.PERF0 + taken) / 1e9) < 1e-6


def test_a_kernel_stamp_from_the_future_is_now() -> None:
    """A stamp ahead of the real-time clock (stepped back meanwhile) is taken as now, never as a moment to come."""
    from tokrace.providers.timing.stamps import kernel_time

    ahead = time.time_ns() + 10_000_000_000
    before = time.perf_counter()
    got = kernel_time(ahead // 1_000_000_000, ahead % 1_000_000_000)
    assert before <= got <= time.perf_counter()

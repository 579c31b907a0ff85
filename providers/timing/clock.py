"""Clocks: every timing in tokrace goes through one, so the same code runs on real or virtual time.

The real clock reads ``time.perf_counter()``. The virtual clock only moves when told to (``advance_to``) or
when driven (``drive``), so synthetic lanes, replays, scenarios and the UI tests run instantly and exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """What the engine needs from time."""

    virtual: bool

    def now(self) -> float:
        """Seconds on this clock."""
        ...

    async def sleep_until(self, t: float) -> float:
        """Wait until ``t`` and return the time to stamp (the moment of waking; exactly ``t`` on virtual time)."""
        ...


MAX_LEAD_S: Final[float] = 0.001
"""The most the real clock wakes ahead of a deadline to absorb the wake-up latency (then yields to the loop)."""

CATCH_UP_SLICE_S: Final[float] = 0.001
"""A lane behind its schedule stamps its due events without yielding for up to this long at a time."""

COARSE_WAKE_S: Final[float] = 0.032
"""The grid on which lanes that stamp their own planned times wake on the real clock (see
:meth:`RealClock.sleep_until_coarse`): 31 wake-ups a second at most, whatever their rate (a wake-up costs tens of
microseconds of CPU on a VM: 16 ms cost a synthetic lane at 12,000 tok/s about 1.5 % of a core more, 8 ms another
1 %); their text reaches the screen up to 32 ms late, at most one 67 ms frame, and the live gauge allows for it
(``live.DELIVERY_LAG_S``)."""

FAST_FORWARD_GRID_S: Final[float] = COARSE_WAKE_S
"""The virtual clock's grid in bench's ``--fast-forward`` (see :class:`VirtualClock`): the real clock's, so a
recording orders lanes' events as a real race does."""

LONG_WAIT_S: Final[float] = 0.02
"""A wait longer than this wakes ``MAX_LEAD_S`` early, whatever the recent latency."""


class _Waker:
    """One background thread that resolves asyncio futures at precise ``perf_counter`` deadlines.

    asyncio's own timers go through ``epoll`` with millisecond resolution (rounded up), so a lane streaming every
    1.3 ms would wake up to a millisecond late; spinning on ``sleep(0)`` instead burns a core. A thread blocked
    on a condition with a timeout wakes within tens of microseconds and costs next to nothing while it waits.
    """

    def __init__(self) -> None:
        self.lead = 0.0002
        """How early to wake (seconds): the recent latency from a deadline to the sleeper running again."""
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def at(self, t: float) -> asyncio.Future[None]:
        """A future of the running loop that completes once ``perf_counter()`` reaches ``t``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._cond:
            heapq.heappush(self._heap, (t, next(self._seq), loop, fut))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tokrace-clock", daemon=True)
                self._thread.start()
            self._cond.notify()
        return fut

    def learn(self, latency: float) -> None:
        """Fold one observed wake-up latency into ``lead``: a moving average of at most ``MAX_LEAD_S``, where one
        stalled loop (a long frame, a GC pause) moves it by a tenth of that at most."""
        self.lead = 0.9 * self.lead + 0.1 * min(max(latency, 0.0), MAX_LEAD_S)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._heap:
                    self._cond.wait()
                    continue
                remaining = self._heap[0][0] - time.perf_counter()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                now = time.perf_counter()
                due = []
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap))
            for _, _, loop, fut in due:
                with contextlib.suppress(RuntimeError):  # that loop has closed; nobody is waiting any more
                    loop.call_soon_threadsafe(_resolve, fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():  # a cancelled sleeper (a stopped lane) is simply not woken
        fut.set_result(None)


_WAKER: Final[_Waker] = _Waker()


class RealClock:
    """Monotonic wall time whose sleepers wake within microseconds of their deadline, without burning a core:
    a thread wakes them just ahead of it (by the recent wake-up latency), and they yield to the loop for the rest."""

    virtual = False

    def __init__(self) -> None:
        self._yielded = 0.0
        """When a sleeper on this clock last let the event loop run."""

    def now(self) -> float:
        return time.perf_counter()

    async def sleep_until(self, t: float) -> float:
        now = time.perf_counter()
        if t <= now:
            return await self._due(now)
        # After a long idle the first wake-up is the slowest (CPU idle states): wake a full lead early then.
        lead = MAX_LEAD_S if t - now > LONG_WAIT_S else _WAKER.lead
        if t - now > lead:
            target = t - lead
            while target > (now := time.perf_counter()):
                await _WAKER.at(target)
            _WAKER.learn(now - target)
        # The last stretch (about one wake-up's latency, a fraction of a millisecond) passes yielding to the loop.
        while t > (now := time.perf_counter()):
            await asyncio.sleep(0)
        self._yielded = now
        return now

    async def sleep_until_coarse(self, t: float, cells: int = 1) -> float:
        """Wait until ``t`` or up to COARSE_WAKE_S after it, on the event loop's own timer (no thread, no spinning),
        and return the moment of waking. Sleepers wake on a shared grid of COARSE_WAKE_S, so lanes wake together,
        and a lane streaming faster than the grid hands over every event due by then in one go. ``cells`` wakes on
        every ``cells``-th point of the grid only (the screen's frames and the recorder's flushes, every other one:
        they wake together too, with the lanes).

        For lanes that stamp their events at the times they planned (synthetic, replay): how late they wake
        changes none of their figures, only when the screen gets them (a few milliseconds; a frame is 33).

        A moment that came due since the last grid point waits for the next one too: a lane that wakes, hands over
        what is due and finds its next moment passed meanwhile (while it handed over) goes back to sleep rather
        than waking twice per grid point. A moment due before that (a lane behind its schedule) is due at once."""
        step = COARSE_WAKE_S * cells
        wake = math.ceil(t / step) * step
        now = time.perf_counter()
        if wake <= now:
            return await self._due(now)
        while wake > (now := time.perf_counter()):
            await asyncio.sleep(wake - now)
        self._yielded = now
        return now

    async def _due(self, now: float) -> float:
        """Already due: stamp now. A lane that has fallen behind (or wakes for several events at once) catches up
        in slices of CATCH_UP_SLICE_S, then lets the other lanes (and the screen) run: one loop pass per event
        would cap a fast lane at the loop's pace (a pass costs tens of microseconds with a screen drawing)."""
        if now - self._yielded < CATCH_UP_SLICE_S:
            return now
        await asyncio.sleep(0)
        self._yielded = time.perf_counter()
        return now


SETTLE_PASSES: Final[int] = 8
"""Loop passes ``advance_to`` lets go by at least after each deadline (what a screen under test needs to catch up)."""

SETTLE_MAX_PASSES: Final[int] = 1000
"""A task that keeps yielding without ever sleeping on the virtual clock cannot hold time still for longer."""

HANDOFF_STREAK: Final[int] = 256
"""While driven, a sleeper that is itself the next to wake goes on without yielding to the loop this many times
in a row at most (then it yields once), so signals, I/O and other tasks still get their turn."""

CHECK_WHILE_FLOWING_S: Final[float] = 0.001
"""While driven and sleepers hand time on to each other, how often (real time) drive looks for a stall itself."""


class Sleepers:
    """Futures waiting for moments on a clock, earliest first: the timer queue of the virtual clocks."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def add(self, t: float, loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[None]:
        """A future (of ``loop``, by default the running one) that completes when ``wake_until`` passes ``t``."""
        fut: asyncio.Future[None] = (loop or asyncio.get_running_loop()).create_future()
        heapq.heappush(self._heap, (t, next(self._seq), fut))
        return fut

    @property
    def next_deadline(self) -> float | None:
        """The earliest pending wake-up (cancelled sleepers are skipped), if any."""
        while self._heap and self._heap[0][2].done():
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def wake_next(self, now: float) -> tuple[float, int]:
        """Wake every sleeper due at the earliest pending deadline, if it is later than ``now`` (else every one due
        by ``now``); returns the new now and how many woke (none: nobody sleeps)."""
        heap = self._heap
        while heap and heap[0][2].done():
            heapq.heappop(heap)
        if not heap:
            return now, 0
        if heap[0][0] > now:
            now = heap[0][0]
        return now, self.wake_until(now)

    def wake_until(self, t: float) -> int:
        """Wake every sleeper due at or before ``t``, earliest (then first come) first; returns how many woke."""
        heap = self._heap
        woken = 0
        while heap and heap[0][0] <= t:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(None)
                woken += 1
        return woken


class VirtualClock:
    """Time that moves only when told: ``advance_to`` steps through deadlines in order; ``drive`` runs a task to
    completion, jumping to the next deadline whenever everything else is waiting."""

    virtual = True

    def __init__(self, start: float = 0.0, grid: float = 0.0) -> None:
        self._now = start
        self.grid = grid
        """With a grid (seconds; bench's ``--fast-forward``), lanes that stamp their own planned times (synthetic)
        hand over every event of a grid cell together, at the moment of the cell's last one: time moves once per
        cell and lane, not once per event. The events and their times are the same; only the order of events of
        different lanes within one cell differs (as on the real clock, where such lanes wake on a grid too). A
        screen sampling time in between would see a cell's events late: screens run without one."""
        self._sleepers = Sleepers()
        # While drive runs (see there): the task, its loop, the loop's queue of callbacks ready to run (``None``
        # otherwise), and drive's look for a stall: waiting in that queue, or on a timer.
        self._task: asyncio.Future[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: Any = None
        self._check: asyncio.Handle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._busy = 0
        self._streak = 0
        self._handoffs = 0

    def now(self) -> float:
        return self._now

    async def sleep_until(self, t: float) -> float:
        if t <= self._now:
            await asyncio.sleep(0)
            return self._now
        ready = self._ready
        if ready is not None and self._streak < HANDOFF_STREAK and (
                not ready or (len(ready) == 1 and ready[0] is self._check)):
            deadline = self._sleepers.next_deadline
            if deadline is None or t < deadline:  # the next to wake, alone: go on (see below), no future needed
                self._handoffs += 1
                self._busy = 0
                self._streak += 1
                self._now = t
                return t
        fut = self._sleepers.add(t, self._loop)
        if ready is not None:
            if not ready or (len(ready) == 1 and ready[0] is self._check):
                # Driven, and nothing else can run: drive would now move time to the earliest sleeper; do it
                # here, a loop pass sooner, in the same order. When this sleeper is the one woken, it goes on at
                # once (yielding once in HANDOFF_STREAK times); one woken with it at the same moment came first.
                self._handoffs += 1
                woken = self._wake_next()
                if fut.done():
                    if woken > 1 or self._streak >= HANDOFF_STREAK:
                        self._streak = 0
                        await asyncio.sleep(0)
                    else:
                        self._streak += 1
                    return t
            else:
                # Others run first; drive's check follows them (and whatever they start), pass after pass, to move
                # time once they have all gone quiet.
                self._handoffs = 0
                if self._check is None and self._loop is not None:
                    self._check = self._loop.call_soon(self._look)
        self._streak = 0
        await fut
        return t

    @property
    def next_deadline(self) -> float | None:
        """The earliest pending wake-up, if any."""
        return self._sleepers.next_deadline

    def _wake_next(self) -> int:
        """Move time to the earliest pending wake-up (if later) and wake every sleeper due then."""
        self._busy = 0
        self._now, woken = self._sleepers.wake_next(self._now)
        return woken

    async def _settle(self, least: int = SETTLE_PASSES) -> None:
        """Let ``least`` loop passes go by, then more until every task that can run now has run (each woken lane
        has stamped its event and gone back to sleep on this clock): the event loop's ready queue is empty."""
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        passes = 0
        while passes < least or (ready and passes < SETTLE_MAX_PASSES):
            await asyncio.sleep(0)
            passes += 1

    async def advance_to(self, t: float) -> None:
        """Move time forward to ``t``, waking every sleeper on the way in deadline order."""
        await self._settle()
        while (deadline := self.next_deadline) is not None and deadline <= t:
            self._now = max(self._now, deadline)
            self._sleepers.wake_until(self._now)
            await self._settle()
        self._now = max(self._now, t)

    async def advance(self, dt: float) -> None:
        """Move time forward by ``dt`` seconds."""
        await self.advance_to(self._now + dt)

    async def drive(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` to completion on virtual time: whenever nothing else can run, jump to the next deadline.

        Time moves when nothing else can run (the event loop's ready queue is empty), to the earliest sleeper.
        Most often the sleeper that finds the queue empty as it goes to sleep moves it (see :meth:`sleep_until`:
        no loop pass of its own); else drive's check does, which waits at the end of the queue, pass after pass,
        while time stalls (a task ends, or waits on something else). A sleeper that goes to sleep behind others
        puts the check behind them. While sleepers hand time on to each other, the check looks only every
        CHECK_WHILE_FLOWING_S. When nothing sleeps on this clock, the task waits on something real (a file, a
        thread): the check looks again a millisecond later. A task that keeps the queue busy without sleeping
        holds time still for SETTLE_MAX_PASSES passes at most."""
        if self._task is not None:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: no "never awaited" warning later
            raise RuntimeError("this virtual clock is already driving a task")
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(awaitable)
        finished: asyncio.Future[None] = loop.create_future()

        def done(_: asyncio.Future[T]) -> None:
            self._ready = None
            if not finished.done():
                finished.set_result(None)

        task.add_done_callback(done)
        self._task, self._loop, self._ready = task, loop, getattr(loop, "_ready", None)
        self._busy = self._streak = self._handoffs = 0
        self._check = loop.call_soon(self._look)
        try:
            await finished
        finally:
            task.remove_done_callback(done)
            for handle in (self._check, self._timer):
                if handle is not None:
                    handle.cancel()
            self._task = self._loop = self._ready = self._check = self._timer = None
        return task.result()

    def _look(self) -> None:
        """Drive's check: move time when nothing else can run, else look again (see :meth:`drive`)."""
        loop, task = self._loop, self._task
        for handle in (self._check, self._timer):  # at most one look is ever pending
            if handle is not None:
                handle.cancel()
        self._check = self._timer = None
        if loop is None or task is None or task.done():
            return
        if self._ready:  # something else can run now: let it, time stands still
            if self._handoffs:  # ...and since the last look, sleepers hand time on: look again a little later
                self._handoffs = 0
                self._timer = loop.call_later(CHECK_WHILE_FLOWING_S, self._look)
                return
            self._busy += 1
            if self._busy < SETTLE_MAX_PASSES:
                self._check = loop.call_soon(self._look)
                return
        if self._sleepers.next_deadline is None:
            self._timer = loop.call_later(0.001, self._look)
            return
        self._wake_next()
        self._check = loop.call_soon(self._look)


class LaneClock:
    """A view of a shared clock whose zero is a lane's start, so event times are seconds since the lane began.

    ``coarse`` is for lanes that stamp their events at the times they planned (synthetic, replay): on a base
    clock that can (the real clock) they wake on a coarse grid rather than precisely (see
    :meth:`RealClock.sleep_until_coarse`). Such a lane is *planned*: its ``now`` is the planned moment it has
    reached (the last moment it slept until or :meth:`reach`-ed), never how late it woke, so every step of a
    synthetic loop starts exactly where the one before it was planned to end, and the real clock, the virtual
    clock and ``--fast-forward`` give the same figures (docs/design.md §6)."""

    def __init__(self, base: Clock, origin: float, coarse: bool = False) -> None:
        self.base = base
        self.origin = origin
        self.virtual = base.virtual
        self.coarse = coarse
        self.grid: float = getattr(base, "grid", 0.0) if coarse and base.virtual else 0.0
        """The virtual clock's grid for a lane that stamps its planned times (see :class:`VirtualClock`)."""
        coarse_wait: Callable[[float], Awaitable[float]] | None = getattr(base, "sleep_until_coarse", None)
        self._wait = coarse_wait if coarse and coarse_wait is not None else base.sleep_until
        self._at = 0.0
        """A planned lane's moment: how far along its plan it is (seconds since the lane began)."""

    def now(self) -> float:
        return self._at if self.coarse else self.base.now() - self.origin

    def elapsed(self) -> float:
        """Seconds since the lane began on the base clock, however far its plan has got (when it was stopped)."""
        return max(self.base.now() - self.origin, self._at if self.coarse else 0.0)

    def reach(self, t: float) -> None:
        """A planned lane's plan has reached ``t`` (its turn's last event): the next step starts there."""
        if self.coarse and t > self._at:
            self._at = t

    async def sleep_until(self, t: float) -> float:
        woke = await self._wait(self.origin + t) - self.origin
        self.reach(t)
        # Virtual time is exact by construction; don't let float rounding of the origin shift the stamps.
        return max(t, woke) if not self.virtual or woke > t + 1e-9 else t

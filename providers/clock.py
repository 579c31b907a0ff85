"""Clocks: every timing in tokrace goes through one, so the same code runs on real or virtual time.

The real clock reads ``time.perf_counter()``. The virtual clock only moves when told to (``advance_to``) or
when driven (``drive``), so synthetic lanes, replays, scenarios and the UI tests run instantly and exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import socket
import struct
import threading
import time
from collections.abc import Awaitable
from typing import Final, Protocol, TypeVar

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
            # Already due: stamp now. A lane that has fallen behind catches up in slices of CATCH_UP_SLICE_S,
            # then lets the other lanes (and the screen) run: one loop pass per event would cap a fast lane at
            # the loop's pace (a pass costs tens of microseconds with a screen drawing).
            if now - self._yielded < CATCH_UP_SLICE_S:
                return now
            await asyncio.sleep(0)
            self._yielded = time.perf_counter()
            return now
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


SETTLE_PASSES: Final[int] = 8
"""Loop passes ``advance_to`` lets go by at least after each deadline (what a screen under test needs to catch up)."""

SETTLE_MAX_PASSES: Final[int] = 1000
"""A task that keeps yielding without ever sleeping on the virtual clock cannot hold time still for longer."""


class Sleepers:
    """Futures waiting for moments on a clock, earliest first: the timer queue of the virtual clocks."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def add(self, t: float) -> asyncio.Future[None]:
        """A future that completes when ``wake_until`` passes ``t``."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (t, next(self._seq), fut))
        return fut

    @property
    def next_deadline(self) -> float | None:
        """The earliest pending wake-up (cancelled sleepers are skipped), if any."""
        while self._heap and self._heap[0][2].done():
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def wake_until(self, t: float) -> None:
        """Wake every sleeper due at or before ``t``."""
        while self._heap and self._heap[0][0] <= t:
            _, _, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(None)


class VirtualClock:
    """Time that moves only when told: ``advance_to`` steps through deadlines in order; ``drive`` runs a task to
    completion, jumping to the next deadline whenever everything else is waiting."""

    virtual = True

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers = Sleepers()

    def now(self) -> float:
        return self._now

    async def sleep_until(self, t: float) -> float:
        if t <= self._now:
            await asyncio.sleep(0)
            return self._now
        await self._sleepers.add(t)
        return t

    @property
    def next_deadline(self) -> float | None:
        """The earliest pending wake-up, if any."""
        return self._sleepers.next_deadline

    async def _settle(self, least: int = SETTLE_PASSES) -> None:
        """Let ``least`` loop passes go by, then more until every task that can run now has run (each woken lane
        has stamped its event and gone back to sleep on this clock): the event loop's ready queue is empty.
        ``drive`` asks for one pass: one per event when lanes take turns."""
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
        """Run ``awaitable`` to completion on virtual time: whenever nothing else can run, jump to the next deadline."""
        task = asyncio.ensure_future(awaitable)
        sleepers = self._sleepers
        while not task.done():
            await self._settle(1)
            if task.done():
                break
            deadline = sleepers.next_deadline
            if deadline is None:
                # Nothing sleeps on this clock: the task waits on something real (a file, a thread); let it.
                await asyncio.wait({task}, timeout=0.001)
                continue
            if deadline > self._now:
                self._now = deadline
            sleepers.wake_until(self._now)
        return task.result()


class LaneClock:
    """A view of a shared clock whose zero is a lane's start, so event times are seconds since the lane began."""

    def __init__(self, base: Clock, origin: float) -> None:
        self.base = base
        self.origin = origin
        self.virtual = base.virtual

    def now(self) -> float:
        return self.base.now() - self.origin

    async def sleep_until(self, t: float) -> float:
        woke = await self.base.sleep_until(self.origin + t) - self.origin
        # Virtual time is exact by construction; don't let float rounding of the origin shift the stamps.
        return max(t, woke) if not self.virtual or woke > t + 1e-9 else t


SO_TIMESTAMPNS: Final[int] = 35
"""Linux's socket option (and control message type) for nanosecond receive timestamps (CLOCK_REALTIME)."""

TIMESPEC: Final[struct.Struct] = struct.Struct("@ll")
"""The kernel's ``struct timespec`` (seconds, nanoseconds) in an ``SO_TIMESTAMPNS`` control message."""


def packet_time(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """The kernel's arrival time of the packet a ``recvmsg`` just read (its ``SO_TIMESTAMPNS`` control message), as a
    ``perf_counter()`` value; ``None`` when the kernel sent none."""
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= TIMESPEC.size:
            sec, nsec = (int(x) for x in TIMESPEC.unpack_from(raw))
            age_ns = time.time_ns() - (sec * 1_000_000_000 + nsec)  # integers: no float rounding
            return (time.perf_counter_ns() - max(age_ns, 0)) / 1e9
    return None

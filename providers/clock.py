"""Clocks: every timing in tokrace goes through one, so the same code runs on real or virtual time.

The real clock reads ``time.perf_counter()``. The virtual clock only moves when told to (``advance_to``) or
when driven (``drive``), so synthetic lanes, replays, scenarios and the UI tests run instantly and exactly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

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


class RealClock:
    """Monotonic wall time with a precise final approach, so scheduled events land within a fraction of a ms."""

    virtual = False

    def now(self) -> float:
        return time.perf_counter()

    async def sleep_until(self, t: float) -> float:
        # asyncio's timer resolution is ~1 ms and it tends to wake early or late; sleep coarse, then yield
        # until the deadline so the stamp is faithful without burning a core.
        while True:
            remaining = t - time.perf_counter()
            if remaining <= 0:
                return time.perf_counter()
            if remaining > 0.002:
                await asyncio.sleep(remaining - 0.0015)
            else:
                await asyncio.sleep(0)


class VirtualClock:
    """Time that moves only when told: ``advance_to`` steps through deadlines in order; ``drive`` runs a task to
    completion, jumping to the next deadline whenever everything else is waiting."""

    virtual = True

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep_until(self, t: float) -> float:
        if t <= self._now:
            await asyncio.sleep(0)
            return self._now
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (t, next(self._seq), fut))
        await fut
        return t

    @property
    def next_deadline(self) -> float | None:
        """The earliest pending wake-up, if any."""
        while self._heap and self._heap[0][2].done():
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    async def _settle(self) -> None:
        for _ in range(8):
            await asyncio.sleep(0)

    async def advance_to(self, t: float) -> None:
        """Move time forward to ``t``, waking every sleeper on the way in deadline order."""
        await self._settle()
        while (deadline := self.next_deadline) is not None and deadline <= t:
            self._now = max(self._now, deadline)
            while self._heap and self._heap[0][0] <= self._now:
                _, _, fut = heapq.heappop(self._heap)
                if not fut.done():
                    fut.set_result(None)
            await self._settle()
        self._now = max(self._now, t)

    async def advance(self, dt: float) -> None:
        """Move time forward by ``dt`` seconds."""
        await self.advance_to(self._now + dt)

    async def drive(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` to completion on virtual time: whenever nothing else can run, jump to the next deadline."""
        task = asyncio.ensure_future(awaitable)
        while not task.done():
            await self._settle()
            if task.done():
                break
            deadline = self.next_deadline
            if deadline is None:
                # Nothing sleeps on this clock: the task waits on something real (a file, a thread); let it.
                await asyncio.wait({task}, timeout=0.001)
                continue
            await self.advance_to(deadline)
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

"""A clock a person controls, for replays on screen: play, pause, speed up or down, step.

It runs on top of another clock (real time live, virtual time in tests): while playing, its time moves at
``speed`` times the base's; paused, it stands still. Sleepers wake in deadline order, stamped with exactly the
time they asked for, so a replay keeps its recorded timing whatever the controls did meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from .clock import Clock, Sleepers

SPEEDS: Final[tuple[float, ...]] = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""The speeds ``faster`` and ``slower`` step through."""

STEP_S: Final[float] = 0.1
"""How far one ``step`` moves when something happens within it."""


class PlaybackClock:
    """Playback time over a base clock, with play/pause, speed and step controls."""

    virtual = True
    """Stamps are exact (the deadline asked for), as on a virtual clock."""

    def __init__(self, base: Clock, speed: float = 1.0, playing: bool = True) -> None:
        if speed <= 0:
            raise ValueError("speed must be above 0")
        self.base = base
        self.speed = speed
        self.playing = playing
        self._pos = 0.0
        self._ref = base.now()
        # Its stamps are exactly the times asked for, whenever it wakes: a base that can wake coarsely (the real
        # clock) need not wake precisely for it (see RealClock.sleep_until_coarse).
        self._wait: Callable[[float], Awaitable[float]] = getattr(base, "sleep_until_coarse", base.sleep_until)
        self._sleepers = Sleepers()
        self._driver: asyncio.Task[None] | None = None
        self._target: float | None = None

    def now(self) -> float:
        if self.playing:
            return self._pos + (self.base.now() - self._ref) * self.speed
        return self._pos

    async def sleep_until(self, t: float) -> float:
        if t <= self.now():
            await asyncio.sleep(0)
            return t
        fut = self._sleepers.add(t)
        if self._target is None or t < self._target:
            self._rearm()
        await fut
        return t

    @property
    def next_deadline(self) -> float | None:
        """The earliest pending wake-up, if any."""
        return self._sleepers.next_deadline

    # -- controls ---------------------------------------------------------------------------------------------

    def pause(self) -> None:
        if self.playing:
            self._rebase()
            self.playing = False
            self._rearm()

    def resume(self) -> None:
        if not self.playing:
            self._ref = self.base.now()
            self.playing = True
            self._rearm()

    def toggle(self) -> None:
        """Pause when playing, play when paused."""
        if self.playing:
            self.pause()
        else:
            self.resume()

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be above 0")
        self._rebase()
        self.speed = speed
        self._rearm()

    def faster(self) -> float:
        """The next speed up the ladder (stays at the top); returns the new speed."""
        self.set_speed(next((s for s in SPEEDS if s > self.speed + 1e-9), self.speed))
        return self.speed

    def slower(self) -> float:
        """The next speed down the ladder (stays at the bottom); returns the new speed."""
        self.set_speed(next((s for s in reversed(SPEEDS) if s < self.speed - 1e-9), self.speed))
        return self.speed

    def step(self, dt: float = STEP_S) -> float:
        """Pause, then move ``dt`` forward, or to the next wake-up when nothing happens sooner; returns the new
        time."""
        self.pause()
        target = self._pos + dt
        deadline = self.next_deadline
        if deadline is not None and deadline > target:
            target = deadline
        self._pos = target
        self._wake_due()
        return self._pos

    # -- machinery --------------------------------------------------------------------------------------------

    def _rebase(self) -> None:
        self._pos = self.now()
        self._ref = self.base.now()

    def _wake_due(self) -> None:
        self._sleepers.wake_until(self.now() + 1e-9)

    def _rearm(self) -> None:
        """Restart the task that waits on the base clock for the earliest deadline."""
        if self._driver is not None and not self._driver.done():
            self._driver.cancel()
        self._driver = None
        self._target = None
        self._wake_due()
        deadline = self.next_deadline
        if deadline is None or not self.playing:
            return
        self._target = deadline
        self._driver = asyncio.get_running_loop().create_task(self._drive())

    async def _drive(self) -> None:
        while self.playing:
            deadline = self.next_deadline
            if deadline is None:
                break
            self._target = deadline
            await self._wait(self._ref + (deadline - self._pos) / self.speed)
            self._wake_due()
        self._target = None

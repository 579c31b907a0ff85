"""Replay time: a recording's times played faster, with idle stretches squeezed, on a clock that stamps the
recorded time whatever the played one."""

from __future__ import annotations

import bisect
from collections.abc import Awaitable, Callable

from .clock import Clock


class Retimer:
    """Maps a recording's times to the time a replay waits, and back: divided by the speed, with every stretch
    between two consecutive ``times`` longer than ``idle_cap`` squeezed into ``idle_cap``.

    The map is piecewise linear and strictly increasing, so it runs both ways: :meth:`played` says when to show a
    recorded moment, :meth:`recorded` which recorded moment a played time stands for (inside a squeezed stretch,
    recorded time runs faster). Only the waiting changes: what is measured stays the recorded time."""

    def __init__(self, times: list[float], speed: float = 1.0, idle_cap: float | None = None) -> None:
        self.speed = speed
        self.idle_cap = idle_cap
        self._orig = [0.0]
        self._new = [0.0]
        for t in sorted(set(times)):
            if t <= self._orig[-1]:
                continue
            gap = t - self._orig[-1]
            self._new.append(self._new[-1] + (min(gap, idle_cap) if idle_cap is not None else gap) / speed)
            self._orig.append(t)

    @property
    def squeezes(self) -> bool:
        """Whether some stretch is shorter on replay than recorded (beyond the speed)."""
        return self.idle_cap is not None and any(
            b - a > self.idle_cap for a, b in zip(self._orig, self._orig[1:], strict=False))

    def __call__(self, t: float) -> float:
        return self.played(t)

    def played(self, t: float) -> float:
        """When the recorded moment ``t`` is shown (seconds from the start)."""
        return self._map(t, self._orig, self._new, 1.0 / self.speed)

    def recorded(self, p: float) -> float:
        """The recorded moment shown at played time ``p``."""
        return self._map(p, self._new, self._orig, self.speed)

    @staticmethod
    def _map(x: float, xs: list[float], ys: list[float], slope: float) -> float:
        i = bisect.bisect_right(xs, x) - 1
        if i < 0:
            return x * slope
        if i >= len(xs) - 1:
            return ys[-1] + (x - xs[-1]) * slope
        span = xs[i + 1] - xs[i]
        return ys[i] + (x - xs[i]) * (ys[i + 1] - ys[i]) / span


class PacedClock:
    """A replay's clock: it waits on ``base`` for the played time, and reads and stamps the recorded time.

    Every lane of a replay shares it, so a stretch is squeezed only where no lane has anything to play, and every
    event keeps its recorded time: the metrics of a sped-up or capped replay are the recording's."""

    virtual = True
    """Stamps are the recorded times asked for, whatever the base clock's wake-up latency."""

    def __init__(self, base: Clock, retimer: Retimer) -> None:
        self.base = base
        self.retimer = retimer
        self._origin = base.now()
        # Its stamps are the recorded times whenever it wakes: a base that can wake coarsely (the real clock)
        # need not wake precisely for it (see RealClock.sleep_until_coarse).
        self._wait: Callable[[float], Awaitable[float]] = getattr(base, "sleep_until_coarse", base.sleep_until)

    def now(self) -> float:
        return self.retimer.recorded(self.base.now() - self._origin)

    async def sleep_until(self, t: float) -> float:
        await self._wait(self._origin + self.retimer.played(t))
        return t

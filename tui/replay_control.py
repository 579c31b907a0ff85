"""The controls of a replay on screen: pause/resume, step, speed up/down, restart.

They outlive a single race: restarting makes a new playback clock at the same speed, so the controls keep
their settings while the replay starts over. No widget here; the screen reads :meth:`status`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from providers.clock import Clock
from providers.playback import PlaybackClock
from providers.recording import Recording
from providers.replay import Retimer


def replay_duration(recording: Recording, idle_cap: float | None = None, run: int | None = None) -> float:
    """How long the replay lasts at speed 1 (every lane of the played run, with long pauses capped)."""
    runs = [run] if run is not None else [0]
    longest = 0.0
    for (r, _lane), events in recording.events.items():
        if r in runs and events:
            times = [e.t for e in events]
            longest = max(longest, Retimer(times, 1.0, idle_cap)(max(times)))
    return longest


class ReplayControl:
    """Makes each race's playback clock and steers the current one."""

    def __init__(self, path: Path, duration: float, speed: float = 1.0,
                 base: Callable[[], Clock] | None = None, caption: str | None = None) -> None:
        from providers.clock import RealClock

        self.path = path
        self.caption = caption
        """A sentence shown under the replay bar (a trace re-timed on tiers: the comparison's verdict)."""
        self.duration = duration
        self.speed = speed
        self.base = base or RealClock
        self.clock: PlaybackClock | None = None

    def make_clock(self) -> PlaybackClock:
        """A fresh clock for a (re)started replay: playing, at the chosen speed."""
        self.clock = PlaybackClock(self.base(), speed=self.speed)
        return self.clock

    @property
    def playing(self) -> bool:
        return self.clock is not None and self.clock.playing

    def toggle(self) -> None:
        if self.clock is not None:
            self.clock.toggle()

    def step(self) -> None:
        if self.clock is not None:
            self.clock.step()

    def faster(self) -> None:
        if self.clock is not None:
            self.speed = self.clock.faster()

    def slower(self) -> None:
        if self.clock is not None:
            self.speed = self.clock.slower()

    def status(self, now: float, finished: bool) -> str:
        """One line: playing or paused, the speed, the position in the recording."""
        mark = "■ finished" if finished else ("▶ playing" if self.playing else "‖ paused")
        speed = f"×{self.speed:g}"
        position = min(now, self.duration) if not finished else self.duration
        return f"{mark}  {speed}  {position:.2f} s / {self.duration:.2f} s  ·  {self.path.name}"

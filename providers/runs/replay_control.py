"""The controls of a replay on screen: pause/resume, step, speed up/down, restart.

They outlive a single race: restarting makes a new playback clock at the same speed, so the controls keep
their settings while the replay starts over. No widget here; the screen reads :meth:`status`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..adapters.replay import recorded_times
from ..model.units import duration
from ..recording import Recording
from ..timing.clock import Clock
from ..timing.playback import PlaybackClock
from ..timing.retimed import PacedClock, Retimer


def replay_duration(recording: Recording, run: int | None = None) -> float:
    """How long the replayed run lasts on the recording's own clock (the longest of its lanes)."""
    return max(recorded_times(recording, run if run is not None else 0), default=0.0)


class ReplayControl:
    """Makes each race's playback clock and steers the current one."""

    def __init__(self, path: Path, duration: float, speed: float = 1.0,
                 base: Callable[[], Clock] | None = None, *, recording: Recording | None = None,
                 idle_cap: float | None = None, run: int | None = None, caption: str | None = None) -> None:
        from ..timing.clock import RealClock

        self.path = path
        self.caption = caption
        """A sentence shown under the replay bar (a trace re-timed on tiers: the comparison's verdict)."""
        self.duration = duration
        """The replayed run's length on the recording's clock."""
        self.speed = speed
        self.base = base or RealClock
        self.clock: PlaybackClock | None = None
        self.recording = recording
        self.idle_cap = idle_cap
        """Pauses longer than this (seconds, where no lane plays anything) are played in this long."""
        self.run = run
        self.stepped = False
        """Stepped at least once since the replay (re)started: it no longer plays in real time."""
        self._made = 0

    def make_clock(self) -> Clock:
        """A fresh clock for a (re)started replay: playing, at the chosen speed, with long pauses capped."""
        self.clock = PlaybackClock(self.base(), speed=self.speed)
        self.stepped = False
        played = self._made
        self._made += 1
        if self.idle_cap is None or self.recording is None:
            return self.clock
        run = self.run if self.run is not None else played % max(self.recording.runs, 1)
        return PacedClock(self.clock, Retimer(recorded_times(self.recording, run), 1.0, self.idle_cap))

    def badge(self) -> str:
        """How this replay departs from real time, in a few words ("" when it plays as recorded): the lanes and
        the summary carry it, so nobody takes a sped-up, stepped or capped view for a live one."""
        parts = []
        if self.speed != 1.0:
            parts.append(f"×{self.speed:g}")
        if self.stepped:
            parts.append("stepped")
        if self.idle_cap is not None:
            parts.append(f"idle ≤{self.idle_cap:g} s")
        return " ".join(parts)

    @property
    def playing(self) -> bool:
        return self.clock is not None and self.clock.playing

    def toggle(self) -> None:
        if self.clock is not None:
            self.clock.toggle()

    def step(self) -> None:
        if self.clock is not None:
            self.stepped = True
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
        cap = f"  idle pauses played in ≤{self.idle_cap:g} s" if self.idle_cap is not None else ""
        stepped = "  stepped" if self.stepped else ""
        return f"{mark}  {speed}{stepped}{cap}  {duration(position)} / {duration(self.duration)}  ·  {self.path.name}"


def replay_doing(control: ReplayControl) -> str:
    """What the status line says a replay is doing: the replay bar's state in one word ("replaying", "paused")."""
    return "replaying" if control.playing else "paused"

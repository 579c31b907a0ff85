"""The replay provider: one lane of a recording, played with its original timing (speed factor, idle cap)."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

from .base import ConfigError, Provider, TierSpec, TurnRequest
from .clock import Clock
from .events import MAX_SECONDS, Event, Segment
from .recording import Recording, read_recording

REPLAY_OPTIONS: Final[dict[str, tuple[type, ...]]] = {
    "file": (str,),
    "lane": (int, str),
    "run": (int,),
    "speed": (int, float),
    "idle_cap": (int, float),
}
"""The config keys a replay tier accepts: the recording, which lane (index or tier name) and run, and pacing."""

MIN_SPEED: Final[float] = 0.001
MAX_SPEED: Final[float] = 1_000_000.0
"""The replay speeds a tier may ask for: beyond them a replay would stall or every wait would round to nothing."""


class Retimer:
    """Maps a recording's times to replay times: divided by the speed, with every gap capped at ``idle_cap``."""

    def __init__(self, times: list[float], speed: float = 1.0, idle_cap: float | None = None) -> None:
        self.speed = speed
        self.idle_cap = idle_cap
        self._orig = sorted(times)
        self._new: list[float] = []
        acc = prev = 0.0
        for t in self._orig:
            acc += self._gap(t - prev)
            prev = t
            self._new.append(acc)

    def _gap(self, gap: float) -> float:
        if self.idle_cap is not None:
            gap = min(gap, self.idle_cap)
        return gap / self.speed

    def __call__(self, t: float) -> float:
        if self.idle_cap is None:
            return t / self.speed if self.speed != 1.0 else t
        i = bisect.bisect_right(self._orig, t) - 1
        if i < 0:
            return self._gap(t)
        return self._new[i] + self._gap(t - self._orig[i])


class ReplayProvider(Provider):
    """Plays back a recorded lane: every turn, tool and segment, re-stamped on the replaying clock."""

    name = "replay"
    plays_whole_lane = True

    def __init__(self, tier: TierSpec, recording: Recording | None = None) -> None:
        super().__init__(tier)
        opts = tier.options
        if "file" not in opts and recording is None:
            raise ConfigError(f"tier {tier.name!r}: a replay tier needs file = \"path/to/recording.jsonl\"")
        self.path = Path(str(opts.get("file", "")))
        self.lane: int | str = opts.get("lane", 0)
        self.run: int | None = int(opts["run"]) if "run" in opts else None
        """The recorded run to play; ``None`` plays run 0, 1, 2... on successive turns of successive races."""
        self.speed = float(opts.get("speed", 1.0))
        self.idle_cap: float | None = float(opts["idle_cap"]) if "idle_cap" in opts else None
        if not MIN_SPEED <= self.speed <= MAX_SPEED:
            raise ConfigError(f"tier {tier.name!r}: speed must be from {MIN_SPEED:g} to {MAX_SPEED:g}", key="speed")
        if self.idle_cap is not None and not 0 < self.idle_cap <= MAX_SECONDS:
            raise ConfigError(f"tier {tier.name!r}: idle_cap must be above 0 seconds and at most {MAX_SECONDS:g}",
                              key="idle_cap")
        self.recording = recording
        self.index = 0
        self.warnings: list[str] = []
        self._plays = 0

    async def prepare(self, warm: bool = False) -> None:
        if self.recording is None:
            self.recording = read_recording(self.path)
        self.warnings = list(self.recording.warnings)
        self.index = self.recording.lane_index(self.lane)
        if self.run is not None and not 0 <= self.run < self.recording.runs:
            raise ConfigError(f"{self.path}: no run {self.run} (it has {self.recording.runs})")
        tiers = self.recording.tiers
        if not self.tier.model and self.index < len(tiers):
            self.tier.model = str(tiers[self.index].get("model", ""))

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        if self.recording is None:
            await self.prepare()
        assert self.recording is not None
        run = self.run if self.run is not None else self._plays % self.recording.runs
        self._plays += 1
        events = self.recording.lane_events(self.index, run)
        retime = Retimer([e.t for e in events], self.speed, self.idle_cap)
        offsets = [retime(e.t) for e in events]
        start = clock.now()  # taken after the preparation above, so it does not delay the first events
        for event, offset in zip(events, offsets, strict=True):
            stamp = start + offset  # the recorded moment (re-timed), not when a busy loop woke this lane
            await clock.sleep_until(stamp)
            if isinstance(event, Segment):
                yield dataclasses.replace(event, t=stamp, start=start + retime(event.start),
                                          end=start + retime(event.end))
            else:
                yield dataclasses.replace(event, t=stamp)


def replay_tiers(recording: Recording, speed: float = 1.0, idle_cap: float | None = None,
                 run: int | None = None) -> list[TierSpec]:
    """One replay tier per recorded lane, named and priced like the original, with the service tier it asked for."""
    tiers = []
    count = 1 + max((ln for _, ln in recording.events), default=0)
    lanes = recording.tiers or [{"name": f"lane {i}"} for i in range(count)]
    for i, public in enumerate(lanes):
        original = TierSpec.from_public(public)
        options: dict[str, Any] = {"file": str(recording.path), "lane": i, "speed": speed}
        if run is not None:
            options["run"] = run
        if idle_cap is not None:
            options["idle_cap"] = idle_cap
        tiers.append(TierSpec(name=original.name, provider="replay", model=original.model, price=original.price,
                              service_tier=original.service_tier, options=options))
    return tiers

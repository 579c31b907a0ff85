"""The replay provider: one lane of a recording, played with its original timing (speed factor, idle cap)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

from ..model.errors import ConfigError
from ..model.events import MAX_SECONDS, Delta, Event, Segment
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..recording import Recording, read_recording
from ..timing.clock import Clock
from ..timing.retimed import PacedClock, Retimer
from .base import Provider

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


def recorded_times(recording: Recording, run: int) -> list[float]:
    """Every moment something happens in ``run`` of the recording, on any lane (segment edges included)."""
    times: list[float] = []
    for (r, _lane), events in recording.events.items():
        if r != run:
            continue
        for event in events:
            times.append(event.t)
            if isinstance(event, Segment):
                times += [event.start, event.end]
    return times


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
        start = clock.now()  # taken after the preparation above, so it does not delay the first events
        if self.speed == 1.0 and self.idle_cap is None:
            for event in events:
                stamp = start + event.t  # the recorded moment, not when a busy loop woke this lane
                await clock.sleep_until(stamp)
                yield self._placed(event, stamp, start)
            return
        # A tier's own speed or idle cap shortens the waits; the lane still reports the recorded times.
        retime = Retimer(recorded_times(self.recording, run), self.speed, self.idle_cap)
        for event in events:
            await clock.sleep_until(start + retime.played(event.t))
            yield self._placed(event, start + event.t, start)

    @staticmethod
    def _placed(event: Event, stamp: float, start: float) -> Event:
        """The recorded event at its place on this race's clock."""
        if type(event) is Delta:  # nearly every event: made directly (a third of dataclasses.replace's time)
            return Delta(stamp, event.text, event.channel, event.tokens, event.chunks)
        if isinstance(event, Segment):
            return dataclasses.replace(event, t=stamp, start=start + event.start, end=start + event.end)
        return dataclasses.replace(event, t=stamp)


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
        if original.provider and original.provider != "replay":
            options["recorded_provider"] = original.provider  # what the lane raced on (see TierSpec.raced_on)
        if public.get("reference") is True:
            options["reference"] = True  # the lane every speed-up is against (see TierSpec.reference)
        tiers.append(TierSpec(name=original.name, provider="replay", model=original.model, price=original.price,
                              service_tier=original.service_tier, options=options))
    return tiers


def replay_pace(recording: Recording, speed: float = 1.0, idle_cap: float | None = None,
                run: int | None = None) -> Callable[[int, Clock], Clock] | None:
    """What ``run_session`` wraps each run's clock in to replay ``recording`` faster or with idle pauses capped
    (``None`` when neither): run ``i`` of the session plays recorded run ``run`` if given, else run ``i``."""
    if speed == 1.0 and idle_cap is None:
        return None

    def pace(index: int, clock: Clock) -> Clock:
        played = run if run is not None else index % max(recording.runs, 1)
        return PacedClock(clock, Retimer(recorded_times(recording, played), speed, idle_cap))

    return pace

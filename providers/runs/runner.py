"""Races for the screen: build and prepare the providers once, start and stop races on a clock, and feed every
event to the live model the screen samples. Plain asyncio: no widget is touched from here.

A tier whose provider cannot be built or prepared races as a lane that fails at once with the reason, so the
other lanes still run and the screen shows why in that lane.

With a :class:`RecordPlan` every race is recorded to its own file. The recorder only keeps each event's line (made
as it comes) and writes what arrived, as whole lines in one write flushed to the OS, every ``FLUSH_EVERY_S`` (50 ms)
of race time, and everything when the race ends or is stopped: a crash loses at most the events of the last
tick (plus however long the loop was blocked), and the file always replays (a cut-off last line is dropped
with a warning). A recording that cannot be written is one notification; the race goes on unrecorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from ..adapters import Provider, create_provider
from ..model import tokens
from ..model.events import Event, Request, is_loop_end
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..race.live import LiveLane, LiveRace
from ..race.race import Listener, Race, one_line, prepare_providers
from ..recording import Recorder, RecordingError
from ..recording.paths import shown_path
from ..timing.clock import COARSE_WAKE_S, Clock
from .record_paths import FLUSH_EVERY_S, RecordPlan

if TYPE_CHECKING:
    from ..loop.scenario import Scenario

ClockFactory = Callable[[], Clock]
"""Makes the clock of each race: real time live, a playback clock in replays, virtual time in tests."""

ProviderFactory = Callable[[TierSpec], Provider]

Notify = Callable[[str, str, Literal["information", "warning", "error"]], None]
"""Tells the user something in one line: (message, title, severity)."""


def _recorded(provider: Provider) -> Sequence[Event] | None:
    """The recorded events a replay lane plays, when it plays a recording (read in place: a copy of a long
    recording's lane would be every event as an object, ~150 MB per million)."""
    recording = getattr(provider, "recording", None)
    index = getattr(provider, "index", None)
    if recording is None or not isinstance(index, int):
        return None
    run = getattr(provider, "run", None)
    events: Sequence[Event] = recording.lane_events(index, run if isinstance(run, int) else 0)
    return events


def recorded_loop(providers: Sequence[Provider]) -> str | None:
    """The scenario a replayed recording played, as its header names it."""
    for provider in providers:
        recording = getattr(provider, "recording", None)
        header = getattr(recording, "header", None)
        if isinstance(header, dict) and header.get("scenario"):
            return str(header["scenario"])
    return None


def plays_loop(provider: Provider, scenario: Scenario | None = None) -> bool:
    """Whether a lane plays a scenario's loop (live, or a recorded one): it is done only at the loop's end."""
    if not provider.plays_whole_lane:
        return scenario is not None
    events = _recorded(provider)
    return events is not None and any(is_loop_end(e) for e in events)


def expected_turns(provider: Provider, scenario: Scenario | None = None) -> int | None:
    """How many turns make a lane's run: one for a live request; what was recorded for a replay; ``None`` for
    a scenario's loop (its end event says) or when it cannot be known (the end of the race says)."""
    if plays_loop(provider, scenario):
        return None
    if not provider.plays_whole_lane:
        return 1
    events = _recorded(provider)
    return None if events is None else sum(1 for e in events if isinstance(e, Request)) or None


QUIET_TICK_S: Final[float] = 0.02
QUIET_CPU: Final[float] = 0.25
"""The event loop is quiet when a ``QUIET_TICK_S`` sleep costs the process less than this share of a core."""


async def quiet_loop(max_wait_s: float = 1.0) -> None:
    """Until this process is mostly idle (two ticks in a row), or ``max_wait_s`` has passed."""
    loop = asyncio.get_running_loop()
    end = loop.time() + max_wait_s
    quiet = 0
    while quiet < 2 and loop.time() < end:
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.sleep(QUIET_TICK_S)
        used = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
        quiet = quiet + 1 if used < QUIET_CPU else 0


class RaceRunner:
    """One race at a time on the given tiers; ``live`` always holds the lanes of the current (or last) race."""

    def __init__(self, tiers: Sequence[TierSpec], request: TurnRequest, clock_factory: ClockFactory,
                 provider_factory: ProviderFactory = create_provider, listeners: Sequence[Listener] = (),
                 scenario: Scenario | None = None, record: RecordPlan | None = None, warm: bool = False) -> None:
        self.tiers = list(tiers)
        self.request = request
        self.scenario = scenario
        """A whole agent loop to race instead of one prompt."""
        self.loop_name = scenario.name if scenario is not None else None
        """The agent loop raced, or replayed (a recording's header names it)."""
        self.clock_factory = clock_factory
        self.provider_factory = provider_factory
        self.listeners = list(listeners)
        self.live = LiveRace(self.tiers)
        self.clock: Clock | None = None
        self.race: Race | None = None
        self.problem: str | None = None
        """What went wrong outside any lane, in one line (the lanes carry their own errors)."""
        self.races = 0
        self.record = record
        """Where each race is recorded; ``None``: not recorded (replays, ``--no-record``, tests)."""
        self.recorded: list[Path] = []
        """Every recording finished so far, oldest first."""
        self.notify: Notify | None = None
        """Where to say where a race was recorded, or why it could not be (the app sets it)."""
        self.warm = warm
        """Open each provider's connection while preparing, before the first race (``--warm``)."""
        self._providers: list[Provider] | None = None
        self._preparing: asyncio.Future[list[Provider]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._helpers: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def now(self) -> float:
        """Seconds since the current race started (0 before any)."""
        if self.race is None or self.clock is None or not self._started.is_set():
            return 0.0
        return self.clock.now() - self.race.origin

    def start(self, prompt: str | None = None) -> None:
        """Start a race (the previous one must be over: see :meth:`restart`)."""
        if self.running:
            raise RuntimeError("a race is already running")
        if prompt is not None:
            self.request.prompt = prompt
        self._started.clear()  # not a new event: whoever waits already (before the first race) is woken too
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait_started(self) -> None:
        """Until the current race's lanes are running."""
        await self._started.wait()

    async def wait_finished(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Stop the race; every lane still running ends as stopped."""
        task = self._task
        if task is None or task.done():
            return
        if self.race is not None and self._started.is_set():
            self.race.stop()
        else:  # still preparing: nothing raced yet
            task.cancel()
        await asyncio.wait({task})

    async def restart(self, prompt: str | None = None) -> None:
        """Stop the race if one runs, then race again (with a new prompt when given)."""
        await self.stop()
        self.start(prompt)

    async def settle(self) -> None:
        """Until the work started behind the lanes (a tokenizer loading) is done."""
        while self._helpers:
            await asyncio.wait(set(self._helpers))

    async def aclose(self) -> None:
        await self.stop()
        for helper in list(self._helpers):
            helper.cancel()
        if self._providers is not None:
            await asyncio.gather(*(p.aclose() for p in self._providers), return_exceptions=True)

    async def prepare(self) -> None:
        """Build and prepare every provider now (before the first race), once; what cannot be set up becomes a
        lane that fails with the reason."""
        if self._preparing is None:
            self._preparing = asyncio.ensure_future(self._prepare())
        await asyncio.shield(self._preparing)

    async def first_race(self) -> None:
        """The first race, started on equal footing with the ones after it: the providers prepared while the
        screen paints its first frames, and the clock started only once the event loop is quiet again (the first
        frames of a screen are tens of milliseconds of drawing that would otherwise land inside the first
        request's ``connect_s``)."""
        await self.prepare()
        await quiet_loop()
        if not self.running and self.races == 0:
            self.start()

    async def _prepare(self) -> list[Provider]:
        if self._providers is None:
            providers = await prepare_providers(self.tiers, self.provider_factory, self.warm)
            said: list[str] = []
            for provider in providers:  # a recording's skipped or cut-off lines; lanes of one file say it once
                for warning in getattr(provider, "warnings", []):
                    if warning not in said:
                        said.append(warning)
                        self._tell(warning, "Recording", "warning")
            self._providers = providers
        return self._providers

    async def _run(self) -> None:
        live = self.live
        self.race = None
        recorder: Recorder | None = None
        flusher: asyncio.Task[None] | None = None
        try:
            await self.prepare()
            providers = await self._prepare()
            if self.races:  # as the first race started: connections back in the pool, sockets ready
                await asyncio.gather(*(p.ready() for p in providers))
            self.loop_name = self.loop_name or recorded_loop(providers)
            live = LiveRace(self.tiers, [expected_turns(p, self.scenario) for p in providers], self._load_encoding,
                            [plays_loop(p, self.scenario) for p in providers])
            self.live = live
            self.clock = self.clock_factory()
            recorder = self._open_recording()
            listeners: list[Listener] = [live, *self.listeners]
            if recorder is not None:
                listeners.append(recorder)
            self.race = Race(self.tiers, self.request, self.clock, listeners, providers=providers,
                             scenario=self.scenario)
            self.races += 1
            self.problem = None
            run = asyncio.ensure_future(self.race.run())
            if recorder is not None:
                flusher = asyncio.get_running_loop().create_task(self._flush_every(recorder, self.clock))
            self._started.set()
            await run
        except Exception as exc:  # the screen shows it as one line; never a traceback
            self.problem = one_line(exc)
        finally:
            self._started.set()
            live.finish()
            if flusher is not None:
                flusher.cancel()
            if recorder is not None:
                self._close_recording(recorder)

    def _open_recording(self) -> Recorder | None:
        if self.record is None:
            return None
        name = self.scenario.name if self.scenario is not None else None
        path = self.record.next_path(name or self.request.prompt, [t.name for t in self.tiers])
        try:
            return Recorder(path, self.request.prompt, self.tiers, scenario=name, buffered=True)
        except RecordingError as exc:
            self._tell(f"{exc}; this race is not recorded", "Not recorded", "error")
            return None

    async def _flush_every(self, recorder: Recorder, clock: Clock) -> None:
        """Write what the recorder kept, every tick of race time, until the race ends (or a write fails).

        On the real clock it wakes on the grid the offline lanes, the screen's frames and an HTTP lane's looks at
        its socket wake on (``RealClock.sleep_until_coarse``: the first point at least half a cell from now, so
        32 ms apart, never more than 48 ms), on the event loop's own timer: a flush needs no precise moment, and the
        event loop then wakes once for all of them (a wake-up of the process costs about 0.2 ms of CPU on a VM: 20
        flushes a second of their own were 0.3 % of a core). The clock's precise sleep would wake a thread and then
        yield to the loop for its last fraction of a millisecond (about a thousand loop passes a second, 0.7 % of a
        core)."""
        t = clock.now()
        coarse = getattr(clock, "sleep_until_coarse", None)
        while True:
            if clock.virtual:
                t = await clock.sleep_until(t + FLUSH_EVERY_S)
            elif coarse is not None:
                await coarse(clock.now() + COARSE_WAKE_S / 2)  # the next point: 32 ms on, at most 48
            else:
                await asyncio.sleep(FLUSH_EVERY_S)
            try:
                recorder.flush()
            except RecordingError as exc:
                self._tell(f"{exc}; the recording stops here (what it holds replays)", "Recording stopped",
                           "error")
                return

    def _close_recording(self, recorder: Recorder) -> None:
        if recorder.closed:  # a write failed during the race, and that was said then
            return
        try:
            recorder.close()
        except RecordingError as exc:
            self._tell(f"{exc}; the recording stops here (what it holds replays)", "Recording stopped", "error")
            return
        self.recorded.append(recorder.path)
        self._tell(shown_path(recorder.path), "Recorded", "information")  # "Recorded: NAME", said once

    def _tell(self, message: str, title: str, severity: Literal["information", "warning", "error"]) -> None:
        if self.notify is not None:
            self.notify(message, title, severity)

    def _load_encoding(self, lane: LiveLane) -> None:
        """A lane got text without a count: load its tokenizer off the loop, then count with it."""
        async def load() -> None:
            name, encoding = await asyncio.to_thread(tokens.get_encoding, lane.tier.model)
            if encoding is not None:
                lane.set_encoding(name, encoding)

        task = asyncio.get_running_loop().create_task(load())
        self._helpers.add(task)
        task.add_done_callback(self._helpers.discard)

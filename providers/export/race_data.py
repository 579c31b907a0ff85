"""What an export reads: a race's runs, their events and their metrics, with what names it (prompt, loop, file).

A recording becomes one by being replayed on virtual time through :func:`tokrace.providers.runs.session.run_session`,
exactly
as ``tokrace replay --headless --fast-forward`` does, so every export shows the numbers that command prints.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from ..adapters.replay import ReplayProvider, replay_tiers
from ..metrics.loop import WHAT_IF_FACTOR
from ..metrics.turn import STALL_THRESHOLD_S
from ..model.errors import ConfigError
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..race.race import LaneRun
from ..recording import Recording
from ..runs.session import SessionResult, run_session


@dataclass(slots=True)
class ExportSource:
    """One race (every run of it) as the exports see it."""

    result: SessionResult
    prompt: str
    file: str
    """The file it came from (a recording or a trace), as given; empty when the race was not recorded."""
    loop: str | None = None
    """The agent loop the lanes played (a scenario's name), ``None`` for a single prompt."""
    created: str = ""
    """When it was recorded (ISO 8601), when the file says."""
    what_if: float = WHAT_IF_FACTOR
    """N of "a model N× faster" in the bottleneck table."""
    first_run: int = 0
    """The recorded number of the first run here (``--run N`` exports run N alone)."""
    recorded_providers: list[str] = field(default_factory=list)
    """Each lane's provider as recorded (the lanes here are replays of it, and the tables say ``replay`` as
    ``replay --headless --json`` does)."""

    def provider(self, lane: int) -> str:
        """The provider a lane really raced on."""
        if lane < len(self.recorded_providers) and self.recorded_providers[lane]:
            return self.recorded_providers[lane]
        return self.tiers[lane].provider

    @property
    def tiers(self) -> list[TierSpec]:
        return self.result.tiers

    @property
    def runs(self) -> int:
        return len(self.result.runs)

    def facts(self) -> list[str]:
        """Where the race comes from and when, in a few words each (plain text): the file by its name only, never
        its folder (an export is shown to others: no absolute path of this machine in it)."""
        out = []
        if self.file:
            out.append(self.file_name)
        if self.created:
            out.append(f"{'recorded' if self.file else 'raced'} {self.created}")
        return out

    @property
    def file_name(self) -> str:
        """The source file's name, without its folder ("" when the race was not recorded)."""
        return PurePath(self.file).name if self.file else ""

    def run_label(self, run: int) -> str:
        """How a run is named to people: "run 1" is the first recorded."""
        return f"run {self.first_run + run + 1}"

    def lanes(self, run: int = 0) -> list[LaneRun]:
        """Every lane of one run, with its events."""
        return self.result.runs[run]

    def start_unix(self) -> float:
        """When the race started, in seconds since the epoch (the recording's creation time; 0 when unknown)."""
        try:
            when = dt.datetime.fromisoformat(self.created)
        except ValueError:
            return 0.0
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return when.timestamp()


async def replay_recording(recording: Recording, run: int | None = None,
                           stall_threshold_s: float = STALL_THRESHOLD_S,
                           what_if: float = WHAT_IF_FACTOR) -> ExportSource:
    """Replay a recording on virtual time (every run, or run ``run``) and keep its events and metrics."""
    if run is not None and not 0 <= run < recording.runs:
        raise ConfigError(f"{recording.path}: no run {run} (it has {recording.runs})")
    tiers = replay_tiers(recording, run=run)
    loop = recording.header.get("scenario")
    runs = recording.runs if run is None else 1
    providers = [ReplayProvider(tier, recording) for tier in tiers]  # read once, not once per lane
    result = await run_session(tiers, TurnRequest(prompt=recording.prompt), runs=runs, fast_forward=True,
                               providers=providers, stall_threshold_s=stall_threshold_s, loop=bool(loop))
    recorded = [str(t.get("provider") or "") if isinstance(t, dict) else "" for t in recording.tiers]
    return ExportSource(result, recording.prompt, str(recording.path), str(loop) if loop else None,
                        str(recording.header.get("created") or ""), what_if, run or 0, recorded)


def default_output(source: Path, suffix: str) -> Path:
    """Where an export goes unless told: beside its source, named like it (``race.jsonl`` → ``race.md``)."""
    return source.with_name(f"{source.stem}.{suffix}")

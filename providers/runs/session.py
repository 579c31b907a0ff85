"""Headless sessions: run a race one or more times, record it, and report metrics in the JSON contract (docs/design.md
§8).

``tokrace bench`` and ``tokrace replay --headless`` are thin shells over :func:`run_session` and :func:`report`.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..adapters import Provider, create_provider
from ..loop.scenario import Scenario
from ..metrics.loop import loop_metrics
from ..metrics.turn import STALL_THRESHOLD_S, TurnMetrics, summarize, turn_metrics
from ..model.errors import ConfigError
from ..model.events import finite_json as finite_json  # the JSON's rule, re-exported for its users
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..race.race import LaneRun, Listener, Race, prepare_providers
from ..timing.clock import FAST_FORWARD_GRID_S, Clock, RealClock, VirtualClock
from ..voice.lens import VoiceMetrics, VoiceSettings, conversation_verdict, lane_voice

VIRTUAL_PROVIDERS = frozenset({"synthetic", "replay"})
"""Providers that can run on the virtual clock (``--fast-forward``): no real I/O paces them."""


@dataclass(slots=True)
class SessionResult:
    """Every run of every lane, with its metrics."""

    tiers: list[TierSpec]
    runs: list[list[LaneRun]] = field(default_factory=list)
    metrics: list[list[TurnMetrics]] = field(default_factory=list)
    """``metrics[lane][run]``."""
    warnings: list[str] = field(default_factory=list)

    @property
    def all_ok(self) -> bool:
        return all(m.ok for lane in self.metrics for m in lane)

    def voice(self, settings: VoiceSettings) -> list[list[VoiceMetrics]]:
        """The voice lens over every run of every lane: ``voice(settings)[lane][run]``."""
        return [[lane_voice(run[i].events, settings) for run in self.runs] for i in range(len(self.tiers))]


def lane_metrics(run: LaneRun, stall_threshold_s: float = STALL_THRESHOLD_S, loop: bool = False) -> TurnMetrics:
    """The metrics of one lane's run; with ``loop``, the loop metrics of a scenario lane (``LoopMetrics``)."""
    measure = loop_metrics if loop else turn_metrics
    m = measure(run.events, run.tier.price, run.tier.model, stall_threshold_s)
    for one in [m, *getattr(m, "turns", [])]:
        if run.tier.service_tier:  # asked in every request of the lane, whether or not the server said what it used
            one.service_tier_asked = run.tier.service_tier
        if run.wall_origin is not None:
            one.wall_start = run.wall_origin + one.start
    return m


def check_fast_forward(tiers: Sequence[TierSpec]) -> None:
    """``--fast-forward`` needs every tier to be synthetic or replay."""
    real = [t.name for t in tiers if t.provider not in VIRTUAL_PROVIDERS]
    if real:
        raise ConfigError(f"--fast-forward runs only synthetic and replay tiers on virtual time; "
                          f"these talk to real servers: {', '.join(real)}")


async def run_session(tiers: Sequence[TierSpec], request: TurnRequest, *, runs: int = 1,
                      fast_forward: bool = False, listeners: Sequence[Listener] = (),
                      on_run_start: Callable[[int], None] | None = None,
                      on_run_end: Callable[[int], None] | None = None,
                      providers: Sequence[Provider] | None = None, warm: bool = False,
                      stall_threshold_s: float = STALL_THRESHOLD_S, scenario: Scenario | None = None,
                      loop: bool = False, pace: Callable[[int, Clock], Clock] | None = None) -> SessionResult:
    """Race the tiers ``runs`` times, one run after the other, and compute every lane's metrics.

    With ``scenario`` every lane plays that agent loop; ``loop`` asks for loop metrics without one (replaying
    a scenario's recording). ``pace`` wraps each run's clock (run index, clock): a replay's speed and idle cap."""
    loop = loop or scenario is not None
    if fast_forward:
        check_fast_forward(tiers)
    result = SessionResult(list(tiers), metrics=[[] for _ in tiers])
    provs: list[Provider] = []
    try:
        if providers is not None:
            provs = list(providers)
            await asyncio.gather(*(p.prepare(warm) for p in provs))
        else:  # as on the screen: a tier that cannot be set up (a missing key) fails its own lane
            provs = await prepare_providers(tiers, create_provider, warm)
        for p in provs:  # lanes replaying one file would repeat its warning: say it once
            result.warnings.extend(w for w in getattr(p, "warnings", []) if w not in result.warnings)
        settle_heap()
        for run in range(runs):
            if run:  # every run starts as the first did: connections back in the pool, sockets ready, heap settled
                await asyncio.gather(*(p.ready() for p in provs))
                settle_heap()
            if on_run_start is not None:
                on_run_start(run)
            clock: Clock = VirtualClock(grid=FAST_FORWARD_GRID_S) if fast_forward else RealClock()
            race = Race(tiers, request, pace(run, clock) if pace is not None else clock, listeners,
                        providers=provs, scenario=scenario)
            lanes = await (clock.drive(race.run()) if isinstance(clock, VirtualClock) else race.run())
            result.runs.append(lanes)
            for lane in lanes:
                result.metrics[lane.index].append(lane_metrics(lane, stall_threshold_s, loop))
            if on_run_end is not None:
                on_run_end(run)
    finally:
        gc.unfreeze()
        await asyncio.gather(*(p.aclose() for p in provs), return_exceptions=True)
    return result


def settle_heap() -> None:
    """Before the start: collect what set-up left behind and take what lives on out of the collector's way, so
    that no full collection over the imports' objects lands inside a first request's ``connect_s`` (a fresh
    process's first collection took 5–10 ms here)."""
    gc.collect()
    gc.freeze()


def report(result: SessionResult, voice: VoiceSettings | None = None) -> dict[str, Any]:
    """The ``--json`` object: the keys of docs/design.md §8; with ``voice``, a ``voice`` object on each run and the
    tier's conversation verdict. A number that is not finite is ``null`` (see :func:`finite_json`)."""
    out: dict[str, Any] = {
        "tool": "tokrace",
        "version": __version__,
        "tiers": [
            {"name": tier.name, "provider": tier.provider, "model": tier.model,
             "runs": [m.to_json() for m in result.metrics[i]],
             "summary": summarize(result.metrics[i])}
            for i, tier in enumerate(result.tiers)
        ],
    }
    if voice is not None:
        for tier, lane in zip(out["tiers"], result.voice(voice), strict=True):
            for run, v in zip(tier["runs"], lane, strict=True):
                run["voice"] = v.to_json()
            holds, why = conversation_verdict(lane)
            tier["voice"] = {"holds_conversation": holds, "reason": why}
    return finite_json(out)  # type: ignore[no-any-return]

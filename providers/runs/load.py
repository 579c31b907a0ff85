"""Continuous load on tiers (``bench --concurrency``): N streams per tier, each sending its next request when its
last ends, every request measured exactly as a race's lane is (docs/design.md §14)."""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .. import __version__
from ..adapters import Provider, create_provider
from ..metrics.turn import percentile
from ..model.errors import ConfigError
from ..model.events import Headers, finite_json
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..race.race import Listener, Race, prepare_providers
from ..timing.clock import FAST_FORWARD_GRID_S, Clock, RealClock, VirtualClock
from .session import check_fast_forward, lane_metrics, settle_heap

MAX_CONCURRENCY: Final[int] = 256
"""The most streams per tier: each is a connection and a reader thread of this one process."""
MAX_POINTS: Final[int] = 16
"""The most concurrency levels one sweep takes."""
MAX_REQUESTS: Final[int] = 1_000_000
"""The most requests per tier and level (each keeps a results row)."""
DEFAULT_PER_STREAM: Final[int] = 4
"""Requests per stream when neither a number of requests nor a duration is given."""
PERCENTILES: Final[tuple[int, ...]] = (50, 90, 99)
NOT_LOADABLE: Final[frozenset[str]] = frozenset({"replay"})
"""Providers that play a recorded lane rather than answer requests: nothing to load."""


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """How much load: ``concurrency`` streams per tier (one level, or several for a sweep), until ``requests``
    requests per tier have been sent or ``duration_s`` seconds have passed (requests under way then finish and
    count); given neither, :data:`DEFAULT_PER_STREAM` requests per stream."""

    concurrency: tuple[int, ...]
    requests: int | None = None
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.requests is not None and self.duration_s is not None:
            raise ConfigError("give the load's end as a number of requests or a duration, one of the two")
        if not self.concurrency or len(self.concurrency) > MAX_POINTS:
            raise ConfigError(f"--concurrency takes 1 to {MAX_POINTS} levels")
        for n in self.concurrency:
            if not 1 <= n <= MAX_CONCURRENCY:
                raise ConfigError(f"--concurrency: {n} streams is outside 1–{MAX_CONCURRENCY}")
        if self.requests is not None and not 1 <= self.requests <= MAX_REQUESTS:
            raise ConfigError(f"--requests: {self.requests} is outside 1–{MAX_REQUESTS:,}")
        if self.duration_s is not None and not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ConfigError("--duration must be a number of seconds above 0")

    def requests_at(self, concurrency: int) -> int | None:
        """The requests per tier at one level: ``requests``, else none with a duration, else the default."""
        if self.requests is not None:
            return self.requests
        return None if self.duration_s is not None else DEFAULT_PER_STREAM * concurrency

    @property
    def streams(self) -> int:
        """The most streams any level needs (the providers made per tier)."""
        return max(self.concurrency)


@dataclass(frozen=True, slots=True)
class RequestRow:
    """One request under load, as its metrics measured it (docs/design.md §5); times in seconds."""

    stream: int
    start_s: float
    """When it was sent, from the start of the load window."""
    end_s: float
    """When its last event arrived, from the start of the load window."""
    ok: bool
    error: str | None
    connect_s: float
    ttft_s: float | None
    decode_tok_s: float | None
    e2e_s: float | None
    output_tokens: int
    tokens_source: str
    request_id: str = ""
    """The server's id of the request (``x-request-id``), to find it in the server's logs."""
    new_connection: bool = False
    """Whether it had to open its stream's connection (the first request of a stream, or after a server closed
    it): its ``connect_s`` then holds the connection's set-up."""

    @property
    def itl_s(self) -> float | None:
        """The mean gap between output tokens after the first: 1 / decode rate."""
        return 1.0 / self.decode_tok_s if self.decode_tok_s else None

    def to_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "start_s": _r(self.start_s), "end_s": _r(self.end_s), "ok": self.ok,
                "error": self.error, "connect_s": _r(self.connect_s), "ttft_s": _r(self.ttft_s),
                "decode_tok_s": _r(self.decode_tok_s, 3), "e2e_s": _r(self.e2e_s),
                "output_tokens": self.output_tokens, "tokens_source": self.tokens_source,
                "request_id": self.request_id or None, "new_connection": self.new_connection}


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def pcts(values: Sequence[float]) -> dict[str, float] | None:
    """p50/p90/p99 of ``values`` (``None`` when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return {f"p{q}": percentile(ordered, q) for q in PERCENTILES}


@dataclass(slots=True)
class TierLoad:
    """One tier at one concurrency level: every request's row, and the aggregates over the load window."""

    tier: TierSpec
    concurrency: int
    rows: list[RequestRow] = field(default_factory=list)
    origin: float = 0.0
    """The load clock's reading at the window's start (the real clock's is ``time.perf_counter``)."""

    @property
    def window_s(self) -> float:
        """The load window: from the start to the arrival of the last event of the last request to end."""
        return max((r.end_s for r in self.rows), default=0.0)

    @property
    def ok(self) -> list[RequestRow]:
        return [r for r in self.rows if r.ok]

    @property
    def failed(self) -> list[RequestRow]:
        return [r for r in self.rows if not r.ok]

    @property
    def output_tokens(self) -> int:
        """Every output token delivered in the window (a failed request's, up to its failure, too)."""
        return sum(r.output_tokens for r in self.rows)

    @property
    def delivered_tok_s(self) -> float | None:
        """Aggregate delivered tok/s: all output tokens delivered in the window ÷ the window's wall time."""
        window = self.window_s
        return self.output_tokens / window if window > 0 else None

    @property
    def request_rate(self) -> float | None:
        """Requests completed (ok or not) per second of the window."""
        window = self.window_s
        return len(self.rows) / window if window > 0 else None

    def percentiles(self) -> dict[str, dict[str, float] | None]:
        """p50/p90/p99 over the requests that succeeded: TTFT, decode rate, e2e and mean ITL (seconds, tok/s)."""
        ok = self.ok
        return {
            "ttft_s": pcts([r.ttft_s for r in ok if r.ttft_s is not None]),
            "decode_tok_s": pcts([r.decode_tok_s for r in ok if r.decode_tok_s is not None]),
            "e2e_s": pcts([r.e2e_s for r in ok if r.e2e_s is not None]),
            "itl_s": pcts([itl for r in ok if (itl := r.itl_s) is not None]),
        }

    def to_json(self) -> dict[str, Any]:
        """One entry of the load JSON's ``points`` (docs/design.md §14)."""
        stats = self.percentiles()
        return {
            "tier": self.tier.name, "provider": self.tier.provider, "model": self.tier.model,
            "concurrency": self.concurrency, "requests": len(self.rows), "ok": len(self.ok),
            "failed": len(self.failed), "first_error": self.failed[0].error if self.failed else None,
            "window_s": _r(self.window_s), "output_tokens": self.output_tokens,
            "delivered_tok_s": _r(self.delivered_tok_s, 3), "request_rate": _r(self.request_rate, 4),
            **{key: None if value is None else {k: _r(v, 6 if key != "decode_tok_s" else 3) for k, v in value.items()}
               for key, value in stats.items()},
            "rows": [r.to_json() for r in self.rows],
        }


@dataclass(slots=True)
class LoadResult:
    """A whole load session: one :class:`TierLoad` per tier and level, in level order then tier order."""

    tiers: list[TierSpec]
    plan: LoadPlan
    points: list[TierLoad] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stopped: bool = False
    """Stopped before its end (Ctrl-C, SIGTERM): the points hold what ended by then, and the requests cut short."""

    @property
    def all_ok(self) -> bool:
        return not self.stopped and all(not p.failed and p.rows for p in self.points)


class LoadWatch(Protocol):
    """Follows a load as it runs (the screen, a progress line): told of each request's start and end."""

    def request_started(self, tier: int, stream: int, origin: float) -> Listener | None:
        """A request of ``tier`` on ``stream`` starts at ``origin`` (the load clock): the listener of its events
        (lane index 0, times from ``origin``), if any."""

    def request_ended(self, tier: int, row: RequestRow) -> None:
        """A request ended, measured."""


class _Budget:
    """What is left to send on one tier: requests to hand out, or time."""

    def __init__(self, plan: LoadPlan, concurrency: int, clock: Clock, t0: float) -> None:
        self.left = plan.requests_at(concurrency)
        self.until = None if plan.duration_s is None else t0 + plan.duration_s
        self.clock = clock

    def take(self) -> bool:
        if self.left is not None:
            if self.left <= 0:
                return False
            self.left -= 1
            return True
        assert self.until is not None
        return self.clock.now() < self.until


def check_loadable(tiers: Sequence[TierSpec]) -> None:
    """Refuse tiers that cannot take requests under load (a replay plays its recording, once)."""
    bad = [t.name for t in tiers if t.provider in NOT_LOADABLE]
    if bad:
        raise ConfigError(f"--concurrency sends requests to tiers; these replay a recording: {', '.join(bad)}")


async def _stream(index: int, stream: int, tier: TierSpec, provider: Provider, request: TurnRequest, clock: Clock,
                  t0: float, budget: _Budget, out: TierLoad, watch: LoadWatch | None,
                  stall_threshold_s: float) -> None:
    """One stream: a request, then the next as soon as it ends, while the budget lasts. A request that failed
    without reaching the server (refused, no key) ends the stream: the next would fail the same way at once."""
    while budget.take():
        race = Race([tier], request, clock, providers=[provider])
        if watch is not None:
            listener = watch.request_started(index, stream, clock.now())
            if listener is not None:
                race.listeners.append(listener)
        try:
            await race.run()
        except asyncio.CancelledError:  # stopped: the request cut short still counts, as failed (its lane says so)
            if race.lanes[0].events:
                _measure(race, stream, t0, stall_threshold_s, out)
            raise
        row = _measure(race, stream, t0, stall_threshold_s, out)
        if watch is not None:
            watch.request_ended(index, row)
        if not row.ok and row.e2e_s is None:
            return


def _measure(race: Race, stream: int, t0: float, stall_threshold_s: float, out: TierLoad) -> RequestRow:
    """A finished request's row (its lane's metrics), added to its tier's."""
    lane = race.lanes[0]
    events = lane.events
    m = lane_metrics(lane, stall_threshold_s)
    end = events[-1].t if len(events) else 0.0
    head = next((e for e in events if isinstance(e, Headers)), None)
    new = any(s.kind == "connect" and s.label == "new connection" for s in m.segments)
    # the request's own start (its Request event) is where its figures count from, a hair after the race's
    sent = race.origin - t0 + m.start
    row = RequestRow(stream, sent, race.origin - t0 + end, m.ok, m.error, m.connect_s, m.ttft_s, m.decode_tok_s,
                     m.e2e_s, m.output_tokens, m.tokens_source, head.request_id if head is not None else "", new)
    out.rows.append(row)
    return row


async def load_level(loads: Sequence[TierLoad], providers: Sequence[Sequence[Provider]], request: TurnRequest,
                     plan: LoadPlan, clock: Clock, watch: LoadWatch | None = None,
                     stall_threshold_s: float = 0.25) -> None:
    """One level of load into ``loads`` (a tier each, at one concurrency): that many streams on every tier at once
    (``providers[tier][stream]``, one connection each), from one start; each tier's window ends with its own last
    request. Stopped, each tier keeps the rows of what ended, and of the requests cut short."""
    t0 = clock.now()
    tiers = [load.tier for load in loads]
    concurrency = loads[0].concurrency
    for load in loads:
        load.origin = t0
    tasks = []
    for i, tier in enumerate(tiers):
        budget = _Budget(plan, concurrency, clock, t0)
        tasks += [_stream(i, s, tier, providers[i][s], request, clock, t0, budget, loads[i], watch,
                          stall_threshold_s) for s in range(concurrency)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for load in loads:
            load.rows.sort(key=lambda r: (r.start_s, r.stream))


async def run_load(tiers: Sequence[TierSpec], request: TurnRequest, plan: LoadPlan, *, fast_forward: bool = False,
                   warm: bool = False, watch: LoadWatch | None = None,
                   factory: Callable[[TierSpec], Provider] = create_provider,
                   on_level: Callable[[int], None] | None = None, stall_threshold_s: float = 0.25,
                   clock: Clock | None = None) -> LoadResult:
    """Every level of ``plan`` in turn, each on every tier at once. Each stream has a provider of its own (one
    connection), made and prepared before the first level and kept for the next. Cancelled (Ctrl-C, SIGTERM), it
    stops the requests under way and returns what it has, ``stopped`` (the cancelled task stays cancelling:
    ``asyncio.run`` still raises ``KeyboardInterrupt`` after a Ctrl-C)."""
    check_loadable(tiers)
    if fast_forward:
        check_fast_forward(tiers)
    result = LoadResult(list(tiers), plan)
    provs: list[list[Provider]] = []
    try:
        for tier in tiers:
            provs.append(await prepare_providers([tier] * plan.streams, factory, warm))
        for lane in provs:
            for p in lane:
                result.warnings.extend(w for w in getattr(p, "warnings", []) if w not in result.warnings)
        settle_heap()
        for n in plan.concurrency:
            if on_level is not None:
                on_level(n)
            level_clock = clock or (VirtualClock(grid=FAST_FORWARD_GRID_S) if fast_forward else RealClock())
            loads = [TierLoad(tier, n) for tier in tiers]
            result.points += loads
            level = load_level(loads, provs, request, plan, level_clock, watch, stall_threshold_s)
            await (level_clock.drive(level) if isinstance(level_clock, VirtualClock) and clock is None else level)
    except asyncio.CancelledError:
        result.stopped = True
        result.points = [p for p in result.points if p.rows]
    finally:
        gc.unfreeze()
        await asyncio.gather(*(p.aclose() for lane in provs for p in lane), return_exceptions=True)
    return result


def load_report(result: LoadResult) -> dict[str, Any]:
    """The ``--json`` object of a load (docs/design.md §14); a number that is not finite is ``null``."""
    plan = result.plan
    out = {"tool": "tokrace", "version": __version__, "mode": "concurrency", "stopped": result.stopped,
           "load": {"concurrency": list(plan.concurrency), "requests": plan.requests,
                    "requests_per_level": [plan.requests_at(n) for n in plan.concurrency],
                    "duration_s": plan.duration_s},
           "points": [p.to_json() for p in result.points]}
    return finite_json(out)  # type: ignore[no-any-return]

"""Where a trace's time went (docs/design.md §12): wall time, the breakdown along the critical path, counts, tokens,
model share, the Amdahl bound, TTFT and cost, as pure functions of a :class:`Trace`.

Every instant between the trace's first start and its last end is on the critical path once (the chain of steps
that ends last and so sets the wall time) and goes to the kind of the step there (a gap between steps on it is
``wait``), so the breakdown always sums to ``e2e_s``; work off the path is ``parallel_s``. A person's time is laid
over the path wherever it sits: every instant of a ``human`` step is ``human`` up to the idle cap and ``away``
past it (cut out of ``e2e_s``), so recorded human time is the same on every tier.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeAlias

from ..metrics.turn import percentile
from ..model.tiers import Price
from .model import STEP_KINDS, Step, Trace

IDLE_CAP_S: Final[float] = 600.0
"""The default idle cap: a ``human`` gap counts up to 10 minutes; the rest is ``away_s``."""

PieceKind: TypeAlias = Literal["model", "tool", "human", "retry", "wait", "away"]
"""What an instant of a trace's wall clock is given to: a step kind, or ``away`` (a person past the idle cap)."""

_RANK: Final[dict[str, int]] = {"model": 0, "tool": 1, "human": 2, "retry": 3, "away": 4, "wait": 5}
"""Precedence when steps overlap (lower wins). ``away`` sits under every real kind: only an instant where nothing
else runs is away."""

FALLBACK_SCAN: Final[int] = 64
"""How many earlier steps the critical path looks at for a step its format links to nothing (bounded time)."""

_ORDER: Final[tuple[PieceKind, ...]] = ("model", "tool", "human", "retry", "away", "wait")


@dataclass(frozen=True, slots=True)
class Piece:
    """A stretch of the trace's wall clock given to one kind (consecutive stretches of a kind are merged)."""

    kind: PieceKind
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class TraceAnalysis:
    """The figures of one trace, as ``tokrace traces`` prints them and ``--json`` writes them."""

    e2e_s: float
    """First start to last end, less ``away_s``."""
    away_s: float
    """Time a person was away: the part beyond the idle cap of every ``human`` step (wherever it sits: recorded
    time, the same on every tier)."""
    breakdown: dict[str, float]
    """Seconds per kind (model, tool, human, retry, wait) along the critical path: sums to ``e2e_s``."""
    calls: int
    """Model calls (model steps)."""
    tool_calls: int
    human_steps: int
    retries: int
    """Retry steps (back-offs after a failed call), where the format records them."""
    failed_tools: int
    input_tokens: int | None
    """Input tokens of all model calls, cached ones included; ``None`` when no call records them (unknown is
    not zero)."""
    cached_input_tokens: int | None
    """The part of ``input_tokens`` read from a cache (priced apart); ``None`` when no call records it."""
    output_tokens: int | None
    """Output tokens of all model calls, reasoning included; ``None`` when no call records them."""
    reasoning_tokens: int | None
    models: tuple[str, ...]
    """The models called, in order of first use."""
    model_share: float | None
    """Model time on the critical path ÷ ``e2e_s``; ``None`` for an empty trace."""
    amdahl_max_speedup: float | None
    """``e2e_s`` ÷ ``instant_e2e_s``: measured, the trace re-timed on an instant tier, so no tier beats it;
    ``None`` when the model is all of it (or the trace is empty)."""
    ttft_p50: float | None
    """TTFT percentiles over the model calls that record one; ``None`` where the format records none."""
    ttft_p90: float | None
    ttft_recorded: int
    """How many model calls record a TTFT."""
    cost_usd: float | None
    """USD at the given price (cached input priced apart); ``None`` without a price or without usage."""
    instant_e2e_s: float | None = None
    """``e2e_s`` of the trace re-timed on an instant tier (TTFT 0, an infinite rate): what no model can beat.
    Model calls without an output token count keep their recorded time there too."""
    parallel_s: dict[str, float] = field(default_factory=dict)
    """Seconds of work per kind (model, tool, human) off the critical path: steps, or parts of steps, that ran
    beside it (parallel sub-agents, parallel tools), not in the breakdown. Human seconds are capped."""
    ttfts: tuple[float, ...] = field(default=(), repr=False)
    """Every recorded TTFT (for percentiles over a set of traces)."""

    def to_json(self) -> dict[str, Any]:
        """The per-trace figures with the stable keys of docs/design.md §12."""
        return {
            "models": list(self.models),
            "calls": self.calls,
            "tool_calls": self.tool_calls,
            "human_steps": self.human_steps,
            "retries": self.retries,
            "failed_tools": self.failed_tools,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "e2e_s": _r(self.e2e_s),
            "away_s": _r(self.away_s),
            "breakdown": {k: _r(v) for k, v in self.breakdown.items()},
            "parallel_s": {k: _r(v) for k, v in self.parallel_s.items()},
            "model_share": _r(self.model_share),
            "amdahl_max_speedup": _r(self.amdahl_max_speedup),
            "ttft_s": {"p50": _r(self.ttft_p50), "p90": _r(self.ttft_p90)},
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 8),
        }


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _spans(steps: Iterable[Step], idle_cap_s: float) -> list[tuple[float, float, str]]:
    """Each step as (start, end, kind), a long human step split into its capped part and its ``away`` part."""
    out: list[tuple[float, float, str]] = []
    for s in steps:
        end = max(s.end, s.start)
        if end <= s.start:
            continue
        if s.kind == "human" and end - s.start > idle_cap_s:
            cap = s.start + max(idle_cap_s, 0.0)
            if cap > s.start:
                out.append((s.start, cap, "human"))
            out.append((cap, end, "away"))
        else:
            out.append((s.start, end, s.kind))
    return out


def pieces(trace: Trace, idle_cap_s: float = IDLE_CAP_S) -> list[Piece]:
    """The trace's wall clock from its first start to its last end, each instant given to one kind by
    precedence (model > tool > human > retry > away > wait; uncovered time is ``wait``). A sweep over the
    step boundaries: O(n log n) in the number of steps. This is what a replay's bottleneck view counts over the
    segments it plays; the trace's own breakdown is :func:`critical_path`."""
    spans = _spans(trace.steps, idle_cap_s)
    if not trace.steps:
        return []
    first = min(s.start for s in trace.steps)
    last = max(max(s.end, s.start) for s in trace.steps)
    marks: list[tuple[float, int, str]] = []
    for start, end, kind in spans:
        marks.append((start, 1, kind))
        marks.append((end, -1, kind))
    marks.sort(key=lambda m: m[0])
    active = dict.fromkeys(_RANK, 0)
    out: list[Piece] = []
    t = first
    i = 0
    while i < len(marks):
        at = marks[i][0]
        if at > t:
            _add(out, _top(active), t, at)
            t = at
        while i < len(marks) and marks[i][0] == at:
            active[marks[i][2]] += marks[i][1]
            i += 1
    if last > t:
        _add(out, _top(active), t, last)
    return out


def critical_path(trace: Trace, idle_cap_s: float = IDLE_CAP_S) -> list[Piece]:
    """The trace's wall clock along its critical path (see :func:`_walk`)."""
    return _walk(trace, idle_cap_s)[0]


def _walk(trace: Trace, idle_cap_s: float) -> tuple[list[Piece], dict[int, float], set[int]]:
    """The trace's wall clock from its first start to its last end along its critical path: the chain of steps,
    each waiting for the next, that ends last and so sets the wall time (docs/design.md §12). Walked back from the
    step that ends last: each step's stretch goes to its kind (a ``human`` step past the idle cap to ``away``),
    then the walk goes to the step it waited for that ended last (the one that held it up). The gap between the
    two is the head of the container it runs in (an agent's span: ``wait``; a sub-agent's tool step: ``tool``) or
    ``wait``; a container is walked through the step it holds that ends last. A step the format gives nothing
    to wait for follows the step running just before it (or that ended last before it). Work off the path is
    :attr:`TraceAnalysis.parallel_s`. Also gives each step's seconds on the path (by index; a human step's capped
    part) and the containers."""
    from .retime import dependency_graph

    steps = trace.steps
    if not steps:
        return [], {}, set()
    first = min(s.start for s in steps)
    last = max(max(s.end, s.start) for s in steps)
    on_path: dict[int, float] = {}
    stretch: dict[int, tuple[float, float]] = {}  # each step's stretch on the path
    waits, members = dependency_graph(steps)
    visited: set[int] = set()
    open_: list[int] = []  # the containers the walk is inside, outermost first
    out: list[tuple[str, float, float]] = []  # backwards in time
    t = last

    def key(i: int) -> tuple[float, float, int]:  # the latest end wins; then the outermost, then by precedence
        return (min(_end(steps[i]), t), steps[i].duration, -_RANK[steps[i].kind])

    def gap(a: float, b: float) -> None:  # [a, b] on the path between steps: the open containers' heads and
        # tails (a sub-agent's tool step before the agent span it holds), else wait
        cuts = sorted({a, b, *(steps[c].start for c in open_ if a < steps[c].start < b)}, reverse=True)
        for hi, lo in itertools.pairwise(cuts):
            kinds = [steps[c].kind for c in open_ if steps[c].start <= lo]
            out.append((min(kinds, key=_RANK.__getitem__) if kinds else "wait", lo, hi))

    by_start = sorted(range(len(steps)), key=lambda i: steps[i].start)
    starts = [steps[i].start for i in by_start]

    def before(bound: float) -> int | None:  # nothing to wait for given: the step running at ``bound`` that
        # started last, or that ended last before it, among the FALLBACK_SCAN steps started last (bounded time)
        best: int | None = None
        k = bisect.bisect_left(starts, bound)
        for i in reversed(by_start[max(k - FALLBACK_SCAN, 0):k]):
            if i in visited:
                continue
            if _end(steps[i]) >= bound:  # the latest to start of the steps running then
                return i
            if best is None or _end(steps[i]) > _end(steps[best]):
                best = i
        return best

    node: int | None = max(range(len(steps)), key=key)
    while node is not None and t > first:
        visited.add(node)
        step = steps[node]
        end = min(_end(step), t)
        gap(end, t)
        t = end
        while open_ and steps[open_[-1]].start >= t:
            open_.pop()
        if node in members:
            open_.append(node)
            inside = [j for j in members[node] if j not in visited]
            node = max(inside, key=key) if inside else None
            if node is None:
                break
            continue
        start = max(min(step.start, t), first)
        # what held it up: what it waited for that ended last, looking through a step that ended before what it
        # waited for itself (an instant such as an unfinished call, or a link the format got out of order)
        waited = [j for j in dict.fromkeys([*waits[node], *(k for j in waits[node] for k in waits[j])])
                  if j not in visited]
        nxt = max(waited, key=key) if waited else None
        if nxt is not None and nxt not in members and _RANK[steps[nxt].kind] < _RANK[step.kind]:
            start = max(start, min(_end(steps[nxt]), t))  # an overlap with it goes to the kind first in precedence
        if step.kind == "human" and t - step.start > idle_cap_s:
            cap = max(step.start + max(idle_cap_s, 0.0), start)
            out.append(("away", cap, t))
            t = cap
        out.append((step.kind, start, t))
        on_path[node] = t - start
        stretch[node] = (start, t)
        t = start
        while open_ and steps[open_[-1]].start >= t:
            open_.pop()
        node = nxt if nxt is not None or waits[node] else before(t)
    gap(first, t)
    return _with_people(reversed(out), steps, on_path, stretch, idle_cap_s), on_path, set(members)


def _people(steps: Sequence[Step], idle_cap_s: float) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Where a person's recorded time lies, wherever its steps sit: the union of every ``human`` step's first
    ``idle_cap_s`` seconds, and the union of the rest (away), less the first."""
    capped: list[tuple[float, float]] = []
    beyond: list[tuple[float, float]] = []
    for s in steps:
        if s.kind != "human" or s.end <= s.start:
            continue
        cap = s.start + max(idle_cap_s, 0.0)
        capped.append((s.start, min(cap, s.end)))
        beyond.append((min(cap, s.end), s.end))
    human = merge_intervals(capped)
    return human, _minus(merge_intervals(beyond), human)


def _minus(spans: Sequence[tuple[float, float]], cut: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted disjoint ``spans`` less sorted disjoint ``cut``: two pointers, linear time."""
    out: list[tuple[float, float]] = []
    j = 0
    for a, b in spans:
        while j < len(cut) and cut[j][1] <= a:
            j += 1
        k = j
        while a < b and k < len(cut) and cut[k][0] < b:
            if cut[k][0] > a:
                out.append((a, cut[k][0]))
            a = max(a, cut[k][1])
            k += 1
        if a < b:
            out.append((a, b))
    return out


def _near(cut: Sequence[tuple[float, float]], starts: Sequence[float], a: float,
          b: float) -> Sequence[tuple[float, float]]:
    """The intervals of sorted disjoint ``cut`` (``starts``: their starts) that may meet ``[a, b]``."""
    return cut[max(bisect.bisect_right(starts, a) - 1, 0):bisect.bisect_left(starts, b)]


def _with_people(path: Iterable[tuple[str, float, float]], steps: Sequence[Step], on_path: dict[int, float],
                 stretch: dict[int, tuple[float, float]], idle_cap_s: float) -> list[Piece]:
    """The path's stretches (in time order) with a person's recorded time laid over them wherever it sits
    (docs/design.md §12): every instant of a ``human`` step is ``human`` (up to the idle cap) or ``away`` (past
    it), whatever the path runs through then, so recorded human time is the same on every tier; what a slower
    parallel branch adds beyond a person's steps keeps the branch's kinds. A step's seconds on the path
    (``on_path``) lose what the person's time covers."""
    human, away = _people(steps, idle_cap_s)
    person = merge_intervals([*human, *away])
    starts = [a for a, _ in person]
    marks: list[tuple[float, float, str]] = [(a, b, "human") for a, b in human] + [(a, b, "away") for a, b in away]
    for i, (a, b) in stretch.items():
        if steps[i].kind != "human" and person:
            kept = _minus([(a, b)], _near(person, starts, a, b))
            on_path[i] = sum(hi - lo for lo, hi in kept)
    for kind, a, b in path:
        if b > a and kind not in ("human", "away"):
            marks.extend((lo, hi, kind) for lo, hi in _minus([(a, b)], _near(person, starts, a, b)))
    marks.sort(key=lambda m: (m[0], m[1]))
    result: list[Piece] = []
    for a, b, kind in marks:
        if b > a:
            _add(result, kind, a, b)  # type: ignore[arg-type]
    return result


def _end(step: Step) -> float:
    return max(step.end, step.start)


def _top(active: dict[str, int]) -> PieceKind:
    for kind in _ORDER:
        if active[kind] > 0:
            return kind
    return "wait"


def _add(out: list[Piece], kind: PieceKind, start: float, end: float) -> None:
    if out and out[-1].kind == kind and out[-1].end == start:
        out[-1] = Piece(kind, out[-1].start, end)
    else:
        out.append(Piece(kind, start, end))


def analyse(trace: Trace, idle_cap_s: float = IDLE_CAP_S, price: Price | None = None, *,
            bound: bool = True) -> TraceAnalysis:
    """The figures of docs/design.md §12 for one trace: wall time less away time, the breakdown along the critical
    path summing to it and the work off it, counts, tokens (cached input apart), model share, the Amdahl bound,
    TTFT where recorded, and cost at ``price`` when one is given."""
    parts, on_path, boxes = _walk(trace, idle_cap_s)
    seconds = {kind: 0.0 for kind in _ORDER}
    for p in parts:
        seconds[p.kind] += p.end - p.start
    away = seconds.pop("away")
    breakdown: dict[str, float] = {kind: seconds[kind] for kind in STEP_KINDS}
    e2e = sum(breakdown.values())
    model_s = breakdown["model"]
    models: dict[str, None] = {}
    counts = dict.fromkeys(STEP_KINDS, 0)
    tokens: dict[str, int | None] = {"input": None, "cached": None, "output": None, "reasoning": None}
    ttfts: list[float] = []
    cost = 0.0
    priced = False
    failed_tools = 0
    for s in trace.steps:
        counts[s.kind] += 1
        if s.kind == "tool" and s.failed:
            failed_tools += 1
        if s.kind != "model":
            continue
        if s.model:
            models.setdefault(s.model, None)
        cached = None if s.cached_input_tokens is None else min(s.cached_input_tokens, s.input_tokens or 0)
        for key, value in (("input", s.input_tokens), ("cached", cached), ("output", s.output_tokens),
                           ("reasoning", s.reasoning_tokens)):
            if value is not None:
                tokens[key] = (tokens[key] or 0) + value
        if s.ttft_s is not None:
            ttfts.append(s.ttft_s)
        step_cost = step_cost_usd(s, price)
        if step_cost is not None:
            cost += step_cost
            priced = True
    instant = _instant_e2e(trace, idle_cap_s) if bound and e2e > 0 else None
    parallel = dict.fromkeys(("model", "tool", "human"), 0.0)
    people = 0.0
    for i, s in enumerate(trace.steps):  # a container's time is its steps' (and its head and tail, on the path)
        if s.kind == "human" and s.end > s.start:
            people += min(s.end - s.start, max(idle_cap_s, 0.0))
        elif s.kind in parallel and s.end > s.start and i not in boxes:
            parallel[s.kind] += max(s.end - s.start - on_path.get(i, 0.0), 0.0)
    parallel["human"] = max(people - breakdown["human"], 0.0)  # only where two people's steps overlap
    return TraceAnalysis(
        e2e_s=e2e, away_s=away, breakdown=breakdown, calls=counts["model"], tool_calls=counts["tool"],
        human_steps=counts["human"], retries=counts["retry"], failed_tools=failed_tools,
        input_tokens=tokens["input"], cached_input_tokens=tokens["cached"], output_tokens=tokens["output"],
        reasoning_tokens=tokens["reasoning"], models=tuple(models),
        model_share=model_s / e2e if e2e > 0 else None,
        amdahl_max_speedup=e2e / instant if instant is not None and instant > 1e-9 else None,
        instant_e2e_s=instant, parallel_s=parallel,
        ttft_p50=percentile(ttfts, 50) if ttfts else None, ttft_p90=percentile(ttfts, 90) if ttfts else None,
        ttft_recorded=len(ttfts), cost_usd=cost if priced else None, ttfts=tuple(ttfts))


def amdahl_bound(trace: Trace, e2e_s: float, idle_cap_s: float = IDLE_CAP_S) -> float | None:
    """:attr:`TraceAnalysis.amdahl_max_speedup` of a trace whose ``e2e_s`` is known: ``e2e_s`` ÷ its ``e2e_s`` on
    an instant tier; ``None`` when the model is all of it (or the trace takes no time)."""
    instant = _instant_e2e(trace, idle_cap_s) if e2e_s > 0 else None
    return e2e_s / instant if instant is not None and instant > 1e-9 else None


def _instant_e2e(trace: Trace, idle_cap_s: float) -> float:
    """The trace's ``e2e_s`` re-timed on an instant tier (TTFT 0, infinite rate): the Amdahl bound's denominator."""
    from .retime import TierProfile, retime_on

    instant = TierProfile("an instant tier", ttft_s=0.0, tok_s=float("inf"))
    return analyse(retime_on(trace, instant), idle_cap_s, bound=False).e2e_s


def step_cost_usd(step: Step, price: Price | None) -> float | None:
    """USD for one model step at ``price``: cached input at the cached price and cache writes at the cache-write
    price, each at the input price where the tier has none; ``None`` without a price or usage."""
    if price is None or step.kind != "model" or (step.input_tokens is None and step.output_tokens is None):
        return None
    if price.output is None and price.input is None:
        return None
    inp = step.input_tokens or 0
    cached = min(step.cached_input_tokens or 0, inp)
    writes = min(step.cache_write_tokens or 0, inp - cached)
    total = (step.output_tokens or 0) * (price.output or 0.0)
    if price.input is not None:
        cached_price = price.cached_input if price.cached_input is not None else price.input
        write_price = price.cache_write if price.cache_write is not None else price.input
        total += (inp - cached - writes) * price.input + cached * cached_price + writes * write_price
    return total / 1_000_000


def without_away(trace: Trace, idle_cap_s: float = IDLE_CAP_S) -> Trace:
    """The same trace with its away time cut out and its clock starting at 0: every later instant moves back by
    the away time before it, and a long human step shrinks to the idle cap. Its analysis (at the same cap) has
    the same ``e2e_s`` and breakdown and no away time; it is what the screen replays."""
    return played(trace, idle_cap_s)[0]


def played(trace: Trace, idle_cap_s: float = IDLE_CAP_S) -> tuple[Trace, list[Piece]]:
    """The trace as the screen replays it (:func:`without_away`) and its critical path on that clock: the
    original's path with the away time cut out, so a replayed lane's breakdown is the analysis' exactly."""
    path = critical_path(trace, idle_cap_s)
    away = [p for p in path if p.kind == "away"]
    ends = [p.end for p in away]
    cut_before = list(itertools.accumulate((p.end - p.start for p in away), initial=0.0))
    first = min((s.start for s in trace.steps), default=0.0)

    def shift(t: float) -> float:  # less the away time before t (binary search over the away stretches)
        k = bisect.bisect_right(ends, t)
        cut = cut_before[k]
        if k < len(away) and away[k].start < t:
            cut += t - away[k].start
        return t - cut - first

    steps = [replace(s, start=shift(s.start), end=shift(max(s.end, s.start))) for s in trace.steps]
    moved: list[Piece] = []
    for p in path:
        if p.kind != "away":
            _add(moved, p.kind, shift(p.start), shift(p.end))
    return replace(trace, steps=steps, notes=list(trace.notes)), moved


def ordered(steps: Sequence[Step]) -> list[Step]:
    """Steps in time order (start, then end), for readers that produce them out of order."""
    return sorted(steps, key=lambda s: (s.start, s.end))


def merge_intervals(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals as sorted, disjoint intervals (used by readers to find gaps nothing explains)."""
    heap = [(a, b) for a, b in spans if b > a]
    heapq.heapify(heap)
    out: list[tuple[float, float]] = []
    while heap:
        a, b = heapq.heappop(heap)
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out

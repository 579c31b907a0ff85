"""Loop metrics (docs/design.md §6): a whole agent loop's turns, its timeline, and where its time went.

Pure functions of a lane's events, like the per-turn metrics, so a live scenario, its recording and its replay
agree. The bottleneck figures (breakdown, model share, the Amdahl bound, "what if the model were N× faster")
are here too, as plain data for the bench table and the TUI.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..model.events import (
    SEGMENT_KINDS,
    Delta,
    Done,
    Error,
    Event,
    Extra,
    Request,
    Segment,
    is_loop_end,
    is_token,
    path_span,
)
from ..model.kinds import MODEL_KINDS as MODEL_KINDS  # re-exported: its users read it here
from ..model.tiers import Price
from .turn import STALL_THRESHOLD_S, SegmentSpan, TurnMetrics, percentile, turn_metrics, turn_segments

PRIORITY: Final[tuple[str, ...]] = ("model", "think", "pending", "connect", "retry", "tool", "human", "wait",
                                    "stall")
"""Which kind an instant belongs to when spans overlap (only parallel tool calls and voice stalls ever do)."""

WHAT_IF_FACTOR: Final[float] = 14.0
"""The default N of "a model N× faster": the launch figure of Ultrafast over standard processing."""

_SOURCE_RANK: Final[dict[str, int]] = {"usage": 0, "tokenizer": 1, "chunks": 2}


@dataclass(frozen=True, slots=True)
class WhatIf:
    """What a model ``factor``× faster would do to this loop (tools, people and waits unchanged)."""

    factor: float
    e2e_s: float
    saved_s: float
    sooner_pct: float


@dataclass(slots=True)
class LoopMetrics(TurnMetrics):
    """A whole loop: totals over its turns, plus each turn's own metrics and where the time went."""

    turns: list[TurnMetrics] = field(default_factory=list)
    breakdown: dict[str, float] = field(default_factory=dict)
    """Seconds per segment kind, overlaps counted once: sums to ``e2e_s``."""
    model_s: float = 0.0
    """Time spent waiting on the model API: the pending, think and model segments of its requests."""
    model_parts: dict[str, float] = field(default_factory=dict)
    """``model_s`` by kind (pending, think, model); a ``wait`` in ``breakdown`` is never the model's (a scenario's
    wait step)."""
    model_share: float | None = None
    amdahl_max_speedup: float | None = None
    """e2e ÷ (e2e − model time): the most any faster model could give; ``None`` when the model is all."""

    def what_if(self, factor: float = WHAT_IF_FACTOR) -> WhatIf:
        """The loop with the model ``factor``× faster and everything else as measured."""
        e2e = self.e2e_s or 0.0
        new = e2e - self.model_s + self.model_s / factor
        saved = e2e - new
        return WhatIf(factor, new, saved, 100.0 * saved / e2e if e2e > 0 else 0.0)

    def to_json(self) -> dict[str, Any]:
        """The run object of the JSON contract with the loop keys of docs/design.md §6."""
        out = TurnMetrics.to_json(self)
        out["turns"] = [t.to_json() for t in self.turns]
        out["provider_timing"] = None  # each turn has its own, under turns
        out["breakdown"] = {k: round(v, 6) for k, v in self.breakdown.items()}
        out["model_share"] = None if self.model_share is None else round(self.model_share, 6)
        amdahl = self.amdahl_max_speedup
        out["amdahl_max_speedup"] = None if amdahl is None else round(amdahl, 6)
        return out


@dataclass(slots=True)
class _Split:
    turns: list[list[Event]] = field(default_factory=list)
    steps: list[Segment] = field(default_factory=list)
    error: Error | None = None
    end: Extra | None = None
    last_t: float = 0.0


def _split(events: Iterable[Event]) -> _Split:
    """Cut a lane into its model turns (``Request`` to ``Done``/``Error``) and what happened between them."""
    out = _Split()
    current: list[Event] | None = None
    for e in events:
        out.last_t = max(out.last_t, e.t)
        if isinstance(e, Request):
            current = [e]
            out.turns.append(current)
        elif current is not None:
            current.append(e)
            if isinstance(e, Done | Error):
                current = None
        elif isinstance(e, Segment):
            out.steps.append(e)
        elif isinstance(e, Error) and out.error is None:
            out.error = e
        elif is_loop_end(e):
            out.end = e  # type: ignore[assignment]
    return out


def breakdown(spans: Sequence[SegmentSpan], start: float, end: float) -> dict[str, float]:
    """Seconds per kind over ``[start, end]``, each instant counted once. Overlaps go to the kind first in
    :data:`PRIORITY`; an instant no span covers (a driver's microseconds between steps) goes to the kind
    before it, so the parts always sum to ``end - start``."""
    marks = sorted({start, end, *(min(max(t, start), end) for s in spans for t in (s.start, s.end))})
    totals: dict[str, float] = {}
    pending = 0.0
    previous: str | None = None
    for a, b in itertools.pairwise(marks):
        covering = {s.kind for s in spans if s.start <= a and s.end >= b and s.end > s.start}
        kind = next((k for k in PRIORITY if k in covering), None)
        if kind is None:
            kind = previous
        if kind is None:
            pending += b - a  # nothing before it yet: give it to the first kind that comes
            continue
        totals[kind] = totals.get(kind, 0.0) + (b - a) + pending
        pending = 0.0
        previous = kind
    order = {k: i for i, k in enumerate(SEGMENT_KINDS)}
    return {k: totals[k] for k in sorted(totals, key=lambda k: order.get(k, len(order)))}


def path_breakdown(path: Sequence[tuple[str, float, float]], start: float, end: float) -> dict[str, float]:
    """Seconds per kind along a trace lane's critical path (its ``critical path`` events: disjoint stretches in
    time order), over ``[start, end]``: the trace analysis' breakdown (docs/design.md §12). An instant the path
    does not cover (a recording cut short) goes to the kind before it, as in :func:`breakdown`. Linear in the
    stretches, so the live view can count it every frame."""
    totals: dict[str, float] = {}
    t = start
    previous: str | None = None
    for kind, a, b in path:
        a, b = max(a, t), min(b, end)
        if b <= a:
            continue
        gap = a - t
        if gap > 0:
            into = previous or kind
            totals[into] = totals.get(into, 0.0) + gap
        totals[kind] = totals.get(kind, 0.0) + (b - a)
        t, previous = b, kind
    if end > t and previous is not None:
        totals[previous] += end - t
    order = {k: i for i, k in enumerate(SEGMENT_KINDS)}
    return {k: totals[k] for k in sorted(totals, key=lambda k: order.get(k, len(order)))}


def apply_path(m: LoopMetrics, path: Sequence[tuple[str, float, float]], start: float, end: float,
               amdahl: object = ()) -> None:
    """Give a trace lane's loop the breakdown, model time and share of its critical path, and the trace's
    measured Amdahl bound once its end says it (``amdahl``: that figure, or ``()`` while not known)."""
    m.breakdown = path_breakdown(path, start, end)
    model_s = m.breakdown.get("model", 0.0)
    m.model_parts = {"model": model_s} if model_s > 0 else {}
    m.model_s = model_s
    e2e = end - start
    if e2e > 0:
        m.model_share = model_s / e2e
        if isinstance(amdahl, int | float) and not isinstance(amdahl, bool) and amdahl >= 1.0:
            m.amdahl_max_speedup = float(amdahl)
        elif amdahl is None:  # the trace's own word: the model is all of it
            m.amdahl_max_speedup = None
        else:
            rest = e2e - model_s
            m.amdahl_max_speedup = e2e / rest if rest > 1e-9 else None


def model_time(spans: Iterable[SegmentSpan]) -> dict[str, float]:
    """Seconds spent on the model by kind (pending, think, model), each instant counted once: the requests' own
    spans, and model spans of a sub-agent running beside them (an imported trace's). Where they overlap, the
    instant goes to the kind first in :data:`PRIORITY`; spans that never overlap (a scenario's turns) simply add
    up."""
    marks: list[tuple[float, int, str]] = []
    for s in spans:
        if s.end > s.start and s.kind in MODEL_KINDS:
            marks += [(s.start, 1, s.kind), (s.end, -1, s.kind)]
    marks.sort(key=lambda m: m[0])
    active = dict.fromkeys(MODEL_KINDS, 0)
    out: dict[str, float] = {}
    previous = None
    for at, step, kind in marks:
        if previous is not None and at > previous:
            top = next((k for k in PRIORITY if active.get(k, 0) > 0), None)
            if top is not None:
                out[top] = out.get(top, 0.0) + (at - previous)
        active[kind] += step
        previous = at
    return out


def loop_metrics(events: Iterable[Event], price: Price | None = None, model: str = "",
                 stall_threshold_s: float = STALL_THRESHOLD_S) -> LoopMetrics:
    """All metrics of a scenario lane from its events alone."""
    evs = list(events)
    split = _split(evs)
    turns = [turn_metrics(chunk, price, model, stall_threshold_s) for chunk in split.turns]
    starts = [e.t for e in evs[:1]] + [s.start for s in split.steps]
    start = min(starts) if starts else 0.0
    if split.end is not None:
        end = split.end.t
    elif split.error is not None:
        end = split.error.t
    else:
        end = max([split.last_t, *(s.end for s in split.steps)])
    m = LoopMetrics(ok=False, start=start, turns=turns)
    first = turns[0] if turns else None
    if first is not None:
        m.connect_s, m.ttfb_s, m.ttft_s = first.connect_s, first.ttfb_s, first.ttft_s
        m.ttfa_s, m.ttfs_s, m.service_tier = first.ttfa_s, first.ttfs_s, first.service_tier
        m.finish_reason = turns[-1].finish_reason
    failed = next((t for t in turns if not t.ok), None)
    if failed is not None:
        m.error = failed.error
    elif split.error is not None:
        m.error = split.error.message
    elif split.end is None:
        m.error = "the loop never ended (no end of scenario event)"
    m.ok = m.error is None and bool(turns)
    if not m.ok and not split.steps and all(t.e2e_s is None for t in turns):
        m.e2e_s = None  # it failed before any answer or step: it never ran (see turn_metrics)
        return m
    m.e2e_s = end - start

    m.output_tokens = sum(t.output_tokens for t in turns)
    m.tokens_source = max((t.tokens_source for t in turns), key=lambda s: _SOURCE_RANK.get(s, 0),
                          default="chunks")
    m.encoding = next((t.encoding for t in turns if t.encoding), None)
    m.input_tokens = _sum_or_none(t.input_tokens for t in turns)
    m.reasoning_tokens = _sum_or_none(t.reasoning_tokens for t in turns)
    m.cost_usd = _sum_or_none(t.cost_usd for t in turns)
    m.stalls = sum(t.stalls for t in turns)
    m.retries = sum(t.retries for t in turns)
    m.token_events = sum(t.token_events for t in turns)
    decoded = span_total = itl_span = itl_gaps = 0.0
    gaps: list[float] = []
    for chunk, t in zip(split.turns, turns, strict=True):
        toks = [e.t for e in chunk if is_token(e)]
        gaps.extend((b - a) * 1000.0 for a, b in itertools.pairwise(toks))
        # a delta joining k chunks is k token events at one time: k - 1 gaps of zero
        gaps.extend(itertools.repeat(0.0, sum(e.chunks - 1 for e in chunk if isinstance(e, Delta) and e.text)))
        if t.decode_tok_s is not None and len(toks) > 1:
            span = toks[-1] - toks[0]
            decoded += t.decode_tok_s * span
            span_total += span
        mean = None if t.itl_ms is None else t.itl_ms.get("mean")
        if mean and len(toks) > 1:  # the turn's span over its mean: its tokens less one
            itl_span += (toks[-1] - toks[0]) * 1000.0
            itl_gaps += (toks[-1] - toks[0]) * 1000.0 / mean
    m.decode_tok_s = decoded / span_total if span_total > 0 else None
    m.reads_paced_ms = max((t.reads_paced_ms for t in turns if t.reads_paced_ms is not None), default=None)
    m.itl_ms = {"mean": itl_span / itl_gaps} if itl_gaps > 0 else None  # over every turn's gaps
    if gaps and m.reads_paced_ms is None:  # a turn read paced: its gaps are not the server's (see turn_metrics)
        m.itl_ms = {**(m.itl_ms or {}), "p50": percentile(gaps, 50), "p90": percentile(gaps, 90),
                    "p99": percentile(gaps, 99), "max": max(gaps)}
    if m.token_events:
        m.tokens_per_event = m.output_tokens / m.token_events
    if m.e2e_s and m.output_tokens:
        m.e2e_tok_s = m.output_tokens / m.e2e_s

    turn_spans = [s for chunk in split.turns for s in turn_segments(chunk)]
    step_spans = [SegmentSpan(s.seg, s.start, min(s.end, end), s.label, s.chain) for s in split.steps
                  if s.start < end]
    m.segments = sorted(turn_spans + step_spans, key=lambda s: (s.start, s.end))
    path = [p for p in map(path_span, evs) if p is not None]
    if path:  # a trace's lane: where the time went along its critical path, as ``tokrace traces`` says
        apply_path(m, path, start, end, split.end.data.get("amdahl_max_speedup", ()) if split.end else ())
        return m
    m.breakdown = breakdown(m.segments, start, end)
    m.model_parts = model_time([*turn_spans, *(s for s in step_spans if s.chain is not None)])
    m.model_s = sum(m.model_parts.values())
    if m.e2e_s > 0:
        m.model_share = m.model_s / m.e2e_s
        rest = m.e2e_s - m.model_s
        m.amdahl_max_speedup = m.e2e_s / rest if rest > 1e-9 else None
    return m


def _sum_or_none(values: Iterable[float | int | None]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def representative(runs: Sequence[TurnMetrics]) -> LoopMetrics | None:
    """The run to show for a lane run several times: the median loop by e2e among the successful ones (a real
    run, so its parts still add up), else the first run."""
    loops = [r for r in runs if isinstance(r, LoopMetrics)]
    ok = sorted((r for r in loops if r.ok and r.e2e_s is not None), key=lambda r: r.e2e_s or 0.0)
    if ok:
        return ok[(len(ok) - 1) // 2]
    return loops[0] if loops else None


@dataclass(frozen=True, slots=True)
class Bottleneck:
    """One lane's bottleneck figures: what the bench table and the TUI's bottleneck view show."""

    name: str
    ok: bool
    e2e_s: float
    parts: tuple[tuple[str, float, float], ...]
    """(part, seconds, share of e2e), summing to e2e: ``model`` (all time waiting on the model API: its waits,
    thinking and streaming), then each other segment kind (tool, human, a scenario's plain waits...)."""
    model_parts: dict[str, float]
    """The model's time by segment kind: ``pending`` (to the first token, and stalls), ``think``, ``model``."""
    model_s: float
    model_share: float | None
    amdahl_max_speedup: float | None
    what_if: WhatIf
    decode_tok_s: float | None
    e2e_speedup: float | None = None
    """Measured end-to-end speed-up over the baseline lane (``against``)."""
    token_speedup: float | None = None
    """Token-rate (decode tok/s) speed-up over the same baseline lane."""
    against: str | None = None
    """The baseline lane's name: the reference lane when the race has one, else the one with the slowest token
    rate; ``None`` when no speed-up is given."""


def bottlenecks(lanes: Sequence[tuple[str, LoopMetrics]], factor: float = WHAT_IF_FACTOR,
                reference: str | None = None) -> list[Bottleneck]:
    """Per lane: the breakdown, model share, Amdahl bound and what-if at ``factor``; across lanes, measured
    end-to-end speed-up next to token speed-up, both against the ``reference`` lane when one is named (a trace as
    recorded, raced against itself re-timed), else against the lane with the slowest token rate."""
    rated = [(name, m) for name, m in lanes if m.ok and m.decode_tok_s and m.e2e_s]
    # Against itself a lane's speed-up says nothing: with one lane finished (the others stopped), none is given.
    if reference is not None:
        named = [pair for pair in rated if pair[0] == reference]
        base_pair = named[0] if named and len(rated) > 1 else None
    else:
        base_pair = min(rated, key=lambda pair: pair[1].decode_tok_s or 0.0) if len(rated) > 1 else None
    base = base_pair[1] if base_pair is not None else None
    out = []
    for name, m in lanes:
        e2e = m.e2e_s or 0.0
        # The model's own kinds fold into "model"; what is left of a kind (a scenario's plain waits) stays.
        rest = [(k, s - m.model_parts.get(k, 0.0)) for k, s in m.breakdown.items() if k not in MODEL_KINDS]
        seconds = [("model", m.model_s), *((k, s) for k, s in rest if s > 1e-9)]
        parts = tuple((k, s, s / e2e if e2e > 0 else 0.0) for k, s in seconds)
        e2e_up = tok_up = None
        if base is not None and m.ok and m.e2e_s:
            e2e_up = (base.e2e_s or 0.0) / m.e2e_s
            if m.decode_tok_s and base.decode_tok_s:
                tok_up = m.decode_tok_s / base.decode_tok_s
        out.append(Bottleneck(name=name, ok=m.ok, e2e_s=e2e, parts=parts, model_parts=dict(m.model_parts),
                              model_s=m.model_s,
                              model_share=m.model_share, amdahl_max_speedup=m.amdahl_max_speedup,
                              what_if=m.what_if(factor), decode_tok_s=m.decode_tok_s, e2e_speedup=e2e_up,
                              token_speedup=tok_up, against=base_pair[0] if base_pair is not None else None))
    return out

"""A trace as the event vocabulary, so the replay machinery, the metrics and the screen play it unchanged.

Each model step of the main chain becomes a turn (``Request``, output tokens streamed evenly across the step
after its TTFT where recorded, ``Usage``, ``Done``); tool, human and retry steps become ``segment`` events with
their labels; a sub-agent's steps are segments on a chain of their own (rows of their own under the lane); the
time no step covers is a ``wait`` segment; the lane ends with the loop-end ``Extra``. Away time (a person past the
idle cap) is cut out first. The lane carries the trace's critical path (``critical path`` extras), so the loop
metrics of these events give the trace analysis' ``e2e_s``, breakdown, model share and Amdahl bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ..model.events import Delta, Done, Event, Request, Segment, Usage, loop_end, path_piece
from ..model.tiers import TierSpec
from ..recording import Recorder
from .analysis import IDLE_CAP_S, Piece, amdahl_bound, pieces, played
from .model import MAIN_CHAIN, Step, Trace

MAX_DELTAS: Final[int] = 120
"""A model step streams its tokens in at most this many pieces (each delta carries its token count)."""


def _label(step: Step) -> str:
    """A tool's name, "✗" when it failed, "(+approval)" last when its time includes a person's approval."""
    parts = [step.label] if step.label else []
    if step.kind == "tool" and step.failed:
        parts.append("✗")
    if step.kind == "tool" and step.includes_approval:
        parts.append("(+approval)")
    return " ".join(parts)


def _text(step: Step, n: int) -> str:
    tokens = step.output_tokens or 0
    if step.failed:
        return f"[call {n}] {step.model or 'model'}: failed\n"
    if step.output_tokens is None:
        return f"[call {n}] {step.model or 'model'}: no usage recorded\n"
    what = f"{step.model or 'model'}: {tokens:,} tokens out"
    if step.input_tokens is not None:
        what += f", {step.input_tokens:,} in"
    if step.cached_input_tokens:
        what += f" ({step.cached_input_tokens:,} cached)"
    return f"[call {n}] {what}\n"


def _stream(step: Step, n: int) -> list[Event]:
    """A model step as a turn: its output tokens spread evenly from its first token (its TTFT after its start,
    where recorded, else one piece's share) to its end."""
    tokens = step.output_tokens or 0
    events: list[Event] = [Request(t=step.start, turn=n, model=step.model or "")]
    duration = step.end - step.start
    text = _text(step, n)
    if tokens <= 0 or duration <= 0:  # no usage recorded (or a failed call): its line arrives at its end
        events.append(Delta(t=step.end, text=text, tokens=tokens))
    else:
        parts = min(tokens, MAX_DELTAS, max(len(text), 1))
        first = step.start + (step.ttft_s if step.ttft_s is not None else duration / parts)
        first = min(first, step.end)
        cut = [round(i * len(text) / parts) for i in range(parts + 1)]
        given = 0
        for i in range(parts):
            t = step.end if parts == 1 else first + (step.end - first) * i / (parts - 1)
            share = round((i + 1) * tokens / parts) - given
            given += share
            events.append(Delta(t=t, text=text[cut[i]:cut[i + 1]], tokens=share))
    events.append(Usage(t=step.end, input=step.input_tokens or 0, output=tokens,
                        reasoning=step.reasoning_tokens or 0, cached=step.cached_input_tokens or 0))
    # a failed call the agent went past ends its turn, not the loop (an Error would fail the whole lane)
    events.append(Done(t=step.end, finish_reason="error" if step.failed else "stop"))
    return events


def _clip(step: Step, kind: str, parts: Sequence[Piece]) -> list[tuple[float, float]]:
    """Where a step's kind wins the instant (so a retry under a tool is drawn only where the breakdown counts
    it)."""
    return [(max(p.start, step.start), min(p.end, step.end)) for p in parts
            if p.kind == kind and p.end > step.start and p.start < step.end]


def trace_events(trace: Trace, idle_cap_s: float = IDLE_CAP_S) -> list[Event]:
    """One lane's events for a trace, in time order: first its critical path (``critical path`` extras at its
    start, which the lane's breakdown follows), last the loop's end with the trace's measured Amdahl bound."""
    cut, path = played(trace, idle_cap_s)
    parts = pieces(cut, idle_cap_s)
    timed: list[tuple[float, int, list[Event]]] = []
    n = 0
    for order, step in enumerate(sorted(cut.steps, key=lambda s: (s.start, s.end))):
        chain = None if step.chain == MAIN_CHAIN else step.chain
        if step.kind == "model" and chain is None:
            n += 1
            timed.append((step.start, order, _stream(step, n)))
        elif step.kind == "model":
            label = f"sub-agent · {step.model}" if step.model else "sub-agent"
            timed.append((step.start, order, [Segment(t=step.start, seg="model", start=step.start, end=step.end,
                                                      label=label, chain=chain)]))
        elif step.kind in ("tool", "human"):
            label = "sub-agent" if step.kind == "tool" and step.label == "sub-agent" else _label(step)
            timed.append((step.start, order, [Segment(t=step.start, seg=step.kind, start=step.start, end=step.end,
                                                      label=label, chain=chain)]))
        elif step.kind == "retry":
            timed.extend((a, order, [Segment(t=a, seg="retry", start=a, end=b, label=step.label or "retry",
                                             chain=chain)]) for a, b in _clip(step, "retry", parts))
    for p in parts:
        if p.kind == "wait":
            timed.append((p.start, -1, [Segment(t=p.start, seg="wait", start=p.start, end=p.end, label="wait")]))
    timed.sort(key=lambda x: (x[0], x[1]))
    events = [e for _, _, evs in timed for e in evs]
    end = max((p.end for p in parts), default=0.0)
    events.sort(key=lambda e: e.t)  # stable: a turn's own events keep their order
    head = [path_piece(path[0].start, p.kind, p.start, p.end) for p in path]  # all at the lane's start (0)
    bound = amdahl_bound(trace, sum(p.end - p.start for p in path), idle_cap_s)
    return [*head, *events, loop_end(end, f"{trace.format} trace", n, amdahl_max_speedup=bound)]


def lane_name(trace: Trace) -> str:
    name = trace.session or Path(trace.file).stem
    return name if len(name) <= 24 else name[:23] + "…"


def write_recording(traces: Sequence[Trace], path: Path, idle_cap_s: float = IDLE_CAP_S) -> Path:
    """A recording with one lane per trace, for ``tokrace replay`` to play on the race screen."""
    tiers = [TierSpec(name=lane_name(t), provider="replay", model=", ".join(_models(t))) for t in traces]
    first = traces[0]
    prompt = f"{Path(first.file).name} ({first.format} trace)"
    recorder = Recorder(path, prompt, tiers, scenario=f"{first.format} trace",
                        extra={"trace": {"file": first.file, "format": first.format, "idle_cap_s": idle_cap_s}})
    try:
        for lane, trace in enumerate(traces):
            for event in trace_events(trace, idle_cap_s):
                recorder(lane, event)
    finally:
        recorder.close()
    return path


def _models(trace: Trace) -> list[str]:
    seen: dict[str, None] = {}
    for s in trace.steps:
        if s.kind == "model" and s.model:
            seen.setdefault(s.model, None)
    return list(seen)

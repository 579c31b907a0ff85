"""tokrace's own recordings as traces: one trace per recorded lane and run.

A recorded loop is already a trace: each turn is a model step (from the end of its connection set-up or last
retry back-off to its end, usage and TTFT as its events say), each ``segment`` event a step of its kind
(``connect`` is a ``wait`` step labelled "connect"). An instant no step covers (a driver's microseconds between
steps) goes to the step before it, as the loop metrics count it, so the figures equal those of ``tokrace replay``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from ..metrics.turn import split_turns, turn_metrics
from ..model.events import Done, Error, Event, Request, Segment, Usage, is_loop_end
from ..recording import FORMAT, RecordingError, read_recording
from .analysis import merge_intervals
from .model import STEP_KINDS, Step, Trace
from .reader_tools import Chains, TraceError, link

NAME: Final[str] = "tokrace"


def sniff(objects: list[dict[str, Any]]) -> bool:
    return bool(objects) and objects[0].get("format") == FORMAT


def read(path: Path) -> Iterator[Trace]:
    try:
        rec = read_recording(path)
    except RecordingError as exc:
        raise TraceError(str(exc)) from None
    names = [str(t.get("name") or f"lane {i}") for i, t in enumerate(rec.tiers)]
    for (run, lane), events in sorted(rec.events.items()):
        name = names[lane] if lane < len(names) else f"lane {lane}"
        tier = rec.tiers[lane] if lane < len(rec.tiers) else {}
        session = f"{name} (run {run})" if rec.runs > 1 else name
        trace = lane_trace(events, str(path), str(tier.get("model") or ""), session)
        trace.notes += rec.warnings
        yield trace


def lane_trace(events: Sequence[Event], file: str = "", model: str = "", session: str = "") -> Trace:
    """One recorded lane's events as a trace."""
    chains = Chains()
    start = events[0].t if events else 0.0
    end = start
    for chunk in split_turns(events):
        req = next((e for e in chunk if isinstance(e, Request)), None)
        for e in chunk:
            if isinstance(e, Segment):
                kind = "wait" if e.seg == "connect" else e.seg
                if kind in STEP_KINDS and e.end > e.start:
                    chains.add(kind, e.start, e.end, label=e.label or ("connect" if e.seg == "connect" else ""),
                               includes_approval=False)
                end = max(end, e.end)
            elif is_loop_end(e):
                end = max(end, e.t)
        if req is None:
            continue
        finished = next((e for e in chunk if isinstance(e, Done | Error)), None)
        turn_end = finished.t if finished is not None else max(e.t for e in chunk if not isinstance(e, Segment))
        begin = max([req.t, *(e.end for e in chunk if isinstance(e, Segment) and e.seg in ("connect", "retry")
                               and e.end <= turn_end)])
        turn = [e for e in chunk if not isinstance(e, Segment) or e.seg in ("connect", "retry")]
        cut = turn[: turn.index(finished) + 1] if finished is not None else turn
        tm = turn_metrics(cut, None, req.model or model)
        usage = next((e for e in reversed(cut) if isinstance(e, Usage)), None)
        ttft = None if tm.ttft_s is None else tm.ttft_s - (begin - req.t)
        chains.add("model", begin, turn_end, label=req.model or model, model=req.model or model or None,
                   input_tokens=usage.input if usage is not None else tm.input_tokens,
                   cached_input_tokens=usage.cached if usage is not None else None,
                   output_tokens=tm.output_tokens, reasoning_tokens=tm.reasoning_tokens,
                   ttft_s=ttft if ttft is not None and ttft >= 0 else None, service_tier=tm.service_tier,
                   failed=isinstance(finished, Error))
        end = max(end, turn_end)
    if events:
        end = max(end, max(e.t for e in events))
    _fill_gaps(chains.steps, start, end)
    steps = chains.steps
    first = min([start, *(s.start for s in steps)])
    for s in steps:
        s.start -= first
        s.end -= first
    steps.sort(key=lambda s: (s.start, s.end))
    link(steps)
    return Trace(file=file, format=NAME, session=session, steps=steps,
                 notes=["a recording: every figure measured"])


def _fill_gaps(steps: list[Step], start: float, end: float) -> None:
    """Give every instant no step covers to the step that ended just before it (as the loop breakdown does)."""
    covered = merge_intervals((s.start, s.end) for s in steps)
    if not covered:
        return
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(covered)]
    if covered[-1][1] < end:
        gaps.append((covered[-1][1], end))
    by_end = sorted(steps, key=lambda s: s.end)
    for a, b in gaps:
        before = [s for s in by_end if abs(s.end - a) < 1e-12]
        if before:
            before[-1].end = b
    if covered[0][0] > start:  # before the first step: the loop gives it to the first kind that comes
        first = min(steps, key=lambda s: s.start)
        first.start = start

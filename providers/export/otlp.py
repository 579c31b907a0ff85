"""A race as OpenTelemetry trace JSON (OTLP ``TracesData``) with GenAI semantic-convention spans, to load in any
OpenTelemetry backend and to read back as a trace (docs/design.md §12).

Each lane of each run is one trace: an ``invoke_agent`` span over the whole lane (its loop, or its one turn), a
model-call span (``chat {model}``) per turn with its usage and its time to first chunk, an ``execute_tool`` span
per tool call, and spans for a scenario's people, plain waits and retry back-offs (``tokrace.step.kind`` says
which, as the GenAI conventions have no word for them). A turn's span starts after its last retry back-off, so
each instant of the lane belongs to one kind as in the loop's breakdown.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from .. import __version__
from ..metrics.turn import split_turns, turn_metrics
from ..model.events import Done, Error, Event, Request, Segment, ToolCall, Usage
from ..race.race import LaneRun
from .race_data import ExportSource

KIND_INTERNAL: Final[int] = 1
KIND_CLIENT: Final[int] = 3
STATUS_OK: Final[int] = 1
STATUS_ERROR: Final[int] = 2

STEP_KINDS: Final[dict[str, str]] = {"human": "human", "wait": "wait", "retry": "retry"}
"""Segment kinds that become spans of their own besides tools (``tokrace.step.kind`` names them)."""


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def attributes(pairs: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP key-values, leaving out what is ``None``."""
    return [{"key": key, "value": _value(value)} for key, value in pairs.items() if value is not None]


class _Ids:
    """Stable ids: the same race exports the same trace and span ids every time (diffs stay small)."""

    def __init__(self, seed: str) -> None:
        self.trace_id = hashlib.sha256(seed.encode()).hexdigest()[:32]
        self._n = 0

    def span(self) -> str:
        self._n += 1
        return hashlib.sha256(f"{self.trace_id}/{self._n}".encode()).hexdigest()[:16]


def _nanos(base_ns: int, t: float) -> str:
    return str(base_ns + round(t * 1e9))


def _span(ids: _Ids, name: str, kind: int, start: float, end: float, base_ns: int, parent: str | None,
          attrs: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": ids.trace_id, "spanId": ids.span(), "name": name, "kind": kind,
                            "startTimeUnixNano": _nanos(base_ns, start), "endTimeUnixNano": _nanos(base_ns, end),
                            "attributes": attributes(attrs)}
    if parent is not None:
        span["parentSpanId"] = parent
    span["status"] = {"code": STATUS_ERROR, "message": error} if error else {"code": STATUS_OK}
    return span


def lane_spans(source: ExportSource, run: int, index: int, lane: LaneRun, base_ns: int) -> list[dict[str, Any]]:
    """Every span of one lane's run: the agent first, then its steps in time order."""
    m = source.result.metrics[index][run]
    ids = _Ids(f"{source.file}|{source.first_run + run}|{index}|{lane.tier.name}")
    start = m.start
    end = start + (m.e2e_s or 0.0)
    provider = source.provider(index)
    # The lane's name, so a reader naming a trace by its conversation names it as the race did.
    conversation = lane.tier.name if source.runs == 1 else f"{lane.tier.name} ({source.run_label(run)})"
    agent = _span(ids, f"invoke_agent {lane.tier.name}", KIND_INTERNAL, start, end, base_ns, None, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": lane.tier.name,
        "gen_ai.provider.name": provider, "gen_ai.request.model": lane.tier.model or None,
        "gen_ai.conversation.id": conversation, "tokrace.run": source.first_run + run, "tokrace.lane": index,
        "tokrace.scenario": source.loop, "tokrace.e2e_s": m.e2e_s}, None if m.ok else (m.error or "failed"))
    spans = [agent]
    parent = agent["spanId"]
    calls = [e for e in lane.events if isinstance(e, ToolCall)]
    for chunk in split_turns(lane.events):
        request = next((e for e in chunk if isinstance(e, Request)), None)
        if request is not None:
            spans.append(_model_span(ids, chunk, request, lane, provider, base_ns, parent))
        spans += _step_spans(ids, chunk, calls, base_ns, parent, end)
    return spans


def _model_span(ids: _Ids, chunk: list[Event], request: Request, lane: LaneRun, provider: str, base_ns: int,
                parent: str) -> dict[str, Any]:
    """A turn as a GenAI model call, from after its last retry back-off to its end."""
    tm = turn_metrics(chunk, lane.tier.price, lane.tier.model)
    usage = next((e for e in reversed(chunk) if isinstance(e, Usage)), None)
    ended = next((e for e in chunk if isinstance(e, Done | Error)), None)
    retries = [e for e in chunk if isinstance(e, Segment) and e.seg == "retry"]
    begin = max([request.t, *(s.end for s in retries)])
    finish = ended.t if ended is not None else max(e.t for e in chunk)
    model = request.model or lane.tier.model
    first = None if tm.ttft_s is None else tm.ttft_s - (begin - request.t)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.request.model": model,
        "gen_ai.response.model": model, "gen_ai.response.time_to_first_chunk": first,
        "gen_ai.response.finish_reasons": [tm.finish_reason] if tm.finish_reason else None,
        "error.type": ended.error if isinstance(ended, Error) else None,
        "tokrace.turn": request.turn, "tokrace.output_tokens": tm.output_tokens,
        "tokrace.tokens_source": tm.tokens_source, "tokrace.decode_tok_s": tm.decode_tok_s,
        "tokrace.ttft_s": tm.ttft_s, "tokrace.e2e_s": tm.e2e_s,
    }
    if usage is not None:
        attrs.update({"gen_ai.usage.input_tokens": usage.input, "gen_ai.usage.output_tokens": usage.output,
                      "gen_ai.usage.cache_read.input_tokens": usage.cached,
                      "gen_ai.usage.reasoning.output_tokens": usage.reasoning})
    error = ended.message if isinstance(ended, Error) else None
    return _span(ids, f"chat {model}".strip(), KIND_CLIENT, begin, finish, base_ns, parent, attrs, error)


def _step_spans(ids: _Ids, chunk: list[Event], calls: list[ToolCall], base_ns: int, parent: str,
                lane_end: float) -> list[dict[str, Any]]:
    """Tools, people, plain waits and retry back-offs of one turn (and of what followed it)."""
    spans = []
    for event in chunk:
        if not isinstance(event, Segment) or event.start >= lane_end:
            continue
        end = min(event.end, lane_end)  # a step cut short by the lane's end (stopped) ends there
        if event.seg == "tool":
            call = next((c for c in calls if c.name == event.label), None)
            if call is not None:
                calls.remove(call)
            spans.append(_span(ids, f"execute_tool {event.label}".strip(), KIND_INTERNAL, event.start, end,
                               base_ns, parent, {"gen_ai.operation.name": "execute_tool",
                                                 "gen_ai.tool.name": event.label or None,
                                                 "gen_ai.tool.type": "function",
                                                 "gen_ai.tool.call.id": call.id if call is not None else None,
                                                 "tokrace.step.kind": "tool"}))
        elif event.seg in STEP_KINDS:
            kind = STEP_KINDS[event.seg]
            name = f"{kind} {event.label}".strip()
            spans.append(_span(ids, name, KIND_INTERNAL, event.start, end, base_ns, parent,
                               {"tokrace.step.kind": kind, "tokrace.label": event.label or None}))
    return spans


def to_otlp(source: ExportSource) -> dict[str, Any]:
    """The ``TracesData`` object: one resource (tokrace), one scope, a trace per lane and run."""
    base_ns = round(source.start_unix() * 1e9)
    spans: list[dict[str, Any]] = []
    for run in range(source.runs):
        for index, lane in enumerate(source.lanes(run)):
            spans += lane_spans(source, run, index, lane, base_ns)
        # The runs went one after the other: the next starts where this one's last lane ended.
        base_ns += round(max((m[run].start + (m[run].e2e_s or 0.0) for m in source.result.metrics), default=0.0)
                         * 1e9)
    resource = attributes({"service.name": "tokrace", "service.version": __version__,
                           "tokrace.source": source.file, "tokrace.prompt": source.prompt,
                           "tokrace.scenario": source.loop})
    return {"resourceSpans": [{"resource": {"attributes": resource},
                               "scopeSpans": [{"scope": {"name": "tokrace", "version": __version__},
                                               "spans": spans}]}]}


def to_otlp_json(source: ExportSource) -> str:
    """The OTLP JSON text."""
    return json.dumps(to_otlp(source), ensure_ascii=False, indent=1) + "\n"

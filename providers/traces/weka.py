"""WEKA agentic traces (per-request records with relative times) as traces.

A trace is ``{"id", "models", "requests": [...]}`` (one JSON document, a list of them, or JSON Lines of them);
each request record has ``t`` (seconds from the trace's start), ``model``, ``in`` / ``out`` tokens, ``api_time``
(the request's duration), ``ttft`` on streaming requests, ``think_time`` (the gap *before* this request, from the
previous completed answer's end, in whole seconds) and ``stop``. A request is a model step from ``t`` to
``t + api_time``; the gap before the next one is a tool step when the answer stopped for a tool (``tool_use``), a
``sub-agent`` tool step when a sub-agent ran in it, else the person's (``human``). A request without
``api_time`` (a streamed request that never finished) is still a model call: counted with its tokens, marked
unfinished, an instant on the clock; the gap around it runs from the last completed answer.

Sub-agents come as records of their own among the requests (``{"type": "subagent", "t", "duration_ms",
"requests": [...]}``) or nested under the request that started them (``subagent``): each runs as a chain of its
own from its ``t`` (its requests' times taken as relative to the trace, or to the sub-agent's start when they
begin before it). The wall time is the last ``t`` plus its ``api_time`` (docs/traces.md). No wall clock, ids,
tool names or cached tokens are recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .model import MAIN_CHAIN, Trace
from .reader_tools import Chains, Lines, as_float, as_int, json_lines, load_document

NAME: Final[str] = "weka"
TOOL_STOPS: Final[frozenset[str]] = frozenset({"tool_use", "tool_calls", "function_call"})
ROUNDING_S: Final[float] = 1.0
"""``think_time`` is written in whole seconds: a gap within this of it is all think time."""


def _is_subagent(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "subagent" and isinstance(obj.get("requests"), list)


def _is_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "t" in obj and (
        "api_time" in obj or "think_time" in obj or ("in" in obj and "out" in obj) or _is_subagent(obj))


def _is_trace(obj: Any) -> bool:
    requests = obj.get("requests") if isinstance(obj, dict) else None
    return isinstance(requests, list) and not _is_subagent(obj) and (not requests or _is_record(requests[0]))


def sniff_text(data: bytes) -> bool:
    """Whether the start of a file looks like WEKA records (``"api_time"`` next to ``"t"`` and ``"in"``)."""
    return b'"api_time"' in data and b'"t"' in data and (b'"requests"' in data or b'"in"' in data)


def read(path: Path) -> Iterator[Trace]:
    """One trace per ``{"requests": [...]}`` object: from one JSON document, a list, or JSON Lines."""
    if not json_lines(path):
        doc = load_document(path)
        items = doc if isinstance(doc, list) else [doc]
        if items and all(_is_record(i) for i in items):
            items = [{"requests": items}]
        for n, item in enumerate(items):
            if _is_trace(item):
                yield _trace(path, item, n, 0, [])
        return
    lines = Lines(path)
    records: list[dict[str, Any]] = []
    n = 0
    for obj in lines:
        if _is_trace(obj):
            yield _trace(path, obj, n, 0, [])
            n += 1
        elif _is_record(obj):
            records.append(obj)
        else:
            lines.skip("a line that is not a WEKA trace or request")
    if records or n == 0:
        yield _trace(path, {"requests": records}, n, lines.skipped, lines.notes())
    elif lines.skipped:
        yield Trace(file=str(path), format=NAME, session="(lines skipped)", skipped=lines.skipped,
                    notes=lines.notes())


@dataclass(slots=True)
class _State:
    skipped: int
    reasons: dict[str, int] = field(default_factory=dict)
    subagents: int = 0
    relative: int = 0
    unfinished: int = 0
    unfinished_tokens: int = 0

    def skip(self, why: str) -> None:
        self.skipped += 1
        self.reasons[why] = self.reasons.get(why, 0) + 1


def _trace(path: Path, doc: dict[str, Any], n: int, skipped: int, notes: list[str]) -> Trace:
    chains = Chains()
    state = _State(skipped)
    _chain(chains, doc.get("requests") or [], MAIN_CHAIN, 0.0, state)
    notes = [*notes, *(f"skipped {k} × {why}" for why, k in sorted(state.reasons.items()))]
    if state.unfinished:
        notes.append(f"{state.unfinished} request{'s' * (state.unfinished != 1)} never finished (no api_time): "
                     f"counted with {state.unfinished_tokens} output tokens, an instant on the clock, not re-timed")
    if state.relative:
        notes.append("sub-agent request times were relative to the sub-agent's start")
    notes.append("no wall clock, tool names or cached tokens recorded; the gap before a request is a tool's when "
                 "the answer before it stopped for one, else the person's")
    session = str(doc.get("id") or (f"#{n}" if n else ""))
    return Trace(file=str(path), format=NAME, session=session, steps=chains.finish(),
                 skipped=state.skipped + chains.dropped, notes=chains.notes(notes))


def _subagent(chains: Chains, sub: dict[str, Any], start: float, offset: float,
              state: _State) -> tuple[float, float]:
    """A sub-agent's chain from ``start`` (on the trace's clock); returns when it started and ended."""
    state.subagents += 1
    listed = sub.get("requests")
    records: list[Any] = listed if isinstance(listed, list) else []
    times = [as_float(r.get("t")) for r in records if isinstance(r, dict)]
    earliest = min((x for x in times if x is not None), default=start - offset)
    relative = earliest + offset + 1e-6 < start
    state.relative += relative
    last = _chain(chains, records, f"subagent-{state.subagents}", start if relative else offset, state)
    duration = as_float(sub.get("duration_ms"))
    return start, max(last, start + (duration / 1000.0 if duration and duration > 0 else 0.0))


def _chain(chains: Chains, records: list[Any], chain: str, offset: float, state: _State) -> float:
    """Add a chain's requests, its sub-agents and the gaps between its answers; returns when its last step ends."""
    requests: list[tuple[float, float | None, dict[str, Any]]] = []
    subs: list[tuple[float, float]] = []
    for rec in records:
        t = as_float(rec.get("t")) if isinstance(rec, dict) else None
        if t is None or not isinstance(rec, dict):
            state.skip("a record without a time (t)")
            continue
        if _is_subagent(rec):
            subs.append(_subagent(chains, rec, t + offset, offset, state))
            continue
        api = as_float(rec.get("api_time"))
        if api is not None and api < 0:
            state.skip("a request with a negative api_time")
            continue
        requests.append((t + offset, api, rec))
    requests.sort(key=lambda r: r[0])
    end = offset
    prev_end: float | None = None
    prev_stop: Any = None
    pending: float | None = None  # the latest unfinished request since the last completed answer
    for t, api, rec in requests:
        model = rec.get("model") if isinstance(rec.get("model"), str) else None
        fields: dict[str, Any] = {"input_tokens": as_int(rec.get("in")), "output_tokens": as_int(rec.get("out"))}
        if api is None:
            state.unfinished += 1
            state.unfinished_tokens += fields["output_tokens"] or 0
            chains.add("model", t, t, chain=chain, label=model or "", model=model, unfinished=True, **fields)
            pending = t
            end = max(end, t)
            continue
        if prev_end is not None:
            _gap(chains, chain, prev_end, t, prev_stop, as_float(rec.get("think_time")), subs)
        ttft = as_float(rec.get("ttft"))
        nested = rec.get("subagent")
        chains.add("model", t, t + api, chain=chain, label=model or "", model=model,
                   ttft_s=ttft if ttft is not None and 0 <= ttft <= api else None,
                   failed=rec.get("stop") in ("error", "failed"), **fields)
        for sub in [nested] if isinstance(nested, dict) else nested if isinstance(nested, list) else []:
            if isinstance(sub, dict):  # the older layout: under the request that started it, from its end
                subs.append(_subagent(chains, sub, t + api, offset, state))
            else:
                state.skip("a sub-agent that is not an object")
        prev_end, prev_stop, pending = t + api, rec.get("stop"), None
        end = max(end, t + api)
    if prev_end is not None and pending is not None and pending > prev_end:
        _gap(chains, chain, prev_end, pending, prev_stop, None, subs)
    return max([end, *(b for _, b in subs)])


def _gap(chains: Chains, chain: str, start: float, end: float, stop: Any, think: float | None,
         subs: list[tuple[float, float]]) -> None:
    """The gap from an answer's end to the next request: a sub-agent's, a tool's, or the person's; when
    ``think_time`` is well short of it, the part before the think time is left to ``wait``."""
    if end <= start:
        return
    if any(start - 1e-6 <= a < end for a, _ in subs):
        chains.add("tool", start, end, chain=chain, label="sub-agent")
        return
    if think is not None and 0 <= think < end - start - ROUNDING_S:
        start = end - think
    if end <= start:
        return
    if stop in TOOL_STOPS:
        chains.add("tool", start, end, chain=chain, includes_approval=True)  # no tool names recorded
    elif chain == MAIN_CHAIN:
        chains.add("human", start, end, chain=chain, label="person")

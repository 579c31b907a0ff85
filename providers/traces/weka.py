"""WEKA agentic traces (per-request records with relative times) as traces.

A trace is ``{"id", "models", "requests": [...]}`` (one JSON document, a list of them, or JSON Lines of them);
each request record has ``t`` (seconds from the trace's start), ``model``, ``in`` / ``out`` tokens, ``api_time``
(the request's duration), ``ttft`` on streaming requests, ``think_time`` (the gap before the next request),
``stop``, and nested ``subagent`` records with requests of their own. A request is a model step from ``t`` to
``t + api_time``; the think time after it is a tool step when the request stopped for a tool (``tool_use``), a
``sub-agent`` tool step when it started one, else the person (``human``). Sub-agents run as chains of their own;
their request times are taken as relative to the trace, or to the sub-agent's start when they begin before it.
No wall clock, ids or tool names are recorded; no cached tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from .model import MAIN_CHAIN, Trace
from .reader_tools import Chains, Lines, as_float, as_int, json_lines, load_document

NAME: Final[str] = "weka"
TOOL_STOPS: Final[frozenset[str]] = frozenset({"tool_use", "tool_calls", "function_call"})


def _is_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "t" in obj and ("api_time" in obj or "think_time" in obj)


def _is_trace(obj: Any) -> bool:
    requests = obj.get("requests") if isinstance(obj, dict) else None
    return isinstance(requests, list) and (not requests or _is_record(requests[0]))


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


def _trace(path: Path, doc: dict[str, Any], n: int, skipped: int, notes: list[str]) -> Trace:
    chains = Chains()
    state = {"skipped": skipped, "subagents": 0, "relative": 0}
    _requests(chains, doc.get("requests") or [], MAIN_CHAIN, 0.0, state)
    notes = [*notes, *(["sub-agent request times were relative to the sub-agent's start"] if state["relative"]
                       else []), "no wall clock, tool names or cached tokens recorded; "
                       "think time is a tool's when the request stopped for one, else the person's"]
    session = str(doc.get("id") or (f"#{n}" if n else ""))
    return Trace(file=str(path), format=NAME, session=session, steps=chains.finish(),
                 skipped=state["skipped"] + chains.dropped, notes=chains.notes(notes))


def _requests(chains: Chains, records: list[Any], chain: str, offset: float, state: dict[str, int]) -> float:
    """Add a chain's requests and the gaps between them; returns when the chain's last step ends."""
    good: list[tuple[float, float, dict[str, Any]]] = []
    for rec in records:
        t, api = (as_float(rec.get("t")), as_float(rec.get("api_time"))) if isinstance(rec, dict) else (None, None)
        if t is None or api is None or api < 0:
            state["skipped"] += 1
            continue
        good.append((t + offset, api, rec))
    good.sort(key=lambda g: g[0])
    end = offset
    for i, (t, api, rec) in enumerate(good):
        model = rec.get("model") if isinstance(rec.get("model"), str) else None
        ttft = as_float(rec.get("ttft"))
        chains.add("model", t, t + api, chain=chain, label=model or "", model=model,
                   input_tokens=as_int(rec.get("in")), output_tokens=as_int(rec.get("out")),
                   ttft_s=ttft if ttft is not None and 0 <= ttft <= api else None,
                   failed=rec.get("stop") in ("error", "failed"))
        end = max(end, t + api)
        raw = rec.get("subagent")
        subs: list[Any] = [raw] if isinstance(raw, dict) else raw if isinstance(raw, list) else []
        sub_end = t + api
        for sub in subs:
            if not isinstance(sub, dict):
                state["skipped"] += 1
                continue
            state["subagents"] += 1
            listed = sub.get("requests")
            sub_records: list[Any] = listed if isinstance(listed, list) else []
            times = [as_float(r.get("t")) for r in sub_records if isinstance(r, dict)]
            earliest = min((x for x in times if x is not None), default=t + api)
            relative = earliest + 1e-6 < t + api - offset
            state["relative"] += relative
            last = _requests(chains, sub_records, f"subagent-{state['subagents']}",
                             t + api if relative else offset, state)
            duration = as_float(sub.get("duration_ms"))
            sub_end = max(sub_end, last, t + api + (duration / 1000.0 if duration else 0.0))
        nxt = good[i + 1][0] if i + 1 < len(good) else None
        think = as_float(rec.get("think_time"))
        gap_end = t + api + think if think is not None and think > 0 else nxt
        if subs:
            gap_end = max(gap_end or sub_end, sub_end)
        if gap_end is None or gap_end <= t + api:
            continue
        if subs:
            chains.add("tool", t + api, gap_end, chain=chain, label="sub-agent")
        elif rec.get("stop") in TOOL_STOPS:
            chains.add("tool", t + api, gap_end, chain=chain, includes_approval=True)  # no tool names recorded
        elif nxt is not None and chain == MAIN_CHAIN:
            chains.add("human", t + api, gap_end, chain=chain, label="person")
        else:
            continue
        end = max(end, gap_end)
    return end

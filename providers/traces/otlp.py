"""OpenTelemetry trace exports (OTLP JSON) with GenAI semantic-convention spans as traces; one trace per
``traceId``.

Reads one ``TracesData`` object, JSON Lines of them (the collector's file exporter), or the older envelope
(``batches`` → ``instrumentationLibrarySpans``). Model calls are GenAI spans (``chat`` / ``text_completion`` /
``generate_content``) or OpenInference ``LLM`` spans or spans carrying usage; nested instrumentations of one
request count once (the innermost model span, its usage taken from the nearest ancestor when it has none). Tool
calls are ``execute_tool`` / ``TOOL`` spans, the leaves when tool spans nest. ``invoke_agent`` spans below the
top agent are sub-agents with chains of their own. A span's ``tokrace.step.kind`` (our own exports) names
``human``, ``wait`` and ``retry`` steps. Other spans (HTTP, frameworks) are not steps; time inside an agent span
that no step covers is ``wait``. TTFT comes from ``gen_ai.response.time_to_first_chunk`` or a first-token
event; a failed model call followed by another in its chain makes the gap between them a ``retry``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .model import MAIN_CHAIN, STEP_KINDS, Trace
from .reader_tools import Chains, Lines, as_float, as_int, json_lines, load_document

NAME: Final[str] = "otlp"
MODEL_OPS: Final[frozenset[str]] = frozenset({"chat", "text_completion", "generate_content", "completion"})
AGENT_OPS: Final[frozenset[str]] = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
USAGE_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "input": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
    "cached": ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
               "llm.token_count.prompt_details.cache_read"),
    "cache_write": ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
                    "llm.token_count.prompt_details.cache_write"),
    "output": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
    "reasoning": ("gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning"),
}


def sniff_text(data: bytes) -> bool:
    """Whether the start of a file looks like OTLP trace JSON."""
    return (b'"resourceSpans"' in data or b'"batches"' in data) and (
        b'"scopeSpans"' in data or b'"instrumentationLibrarySpans"' in data or b'"spans"' in data)


def _value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain Python value."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return as_int(v["intValue"]) if not isinstance(v["intValue"], int) else v["intValue"]
    if "arrayValue" in v:
        values = v["arrayValue"].get("values") if isinstance(v["arrayValue"], dict) else None
        return [_value(x) for x in values] if isinstance(values, list) else []
    return None


def _attrs(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(items, list):
        for kv in items:
            if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                out[kv["key"]] = _value(kv.get("value"))
    return out


@dataclass(slots=True)
class _Span:
    id: str
    parent: str
    name: str
    start: float
    end: float
    attrs: dict[str, Any]
    error: bool
    first_token: float | None = None
    role: str = ""
    children: list[str] = field(default_factory=list)


def _role(name: str, a: dict[str, Any]) -> str:
    """What a span is: model, tool, agent, a tokrace step kind, or "" (not a step)."""
    kind = a.get("tokrace.step.kind")
    if kind in STEP_KINDS:
        return str(kind)
    op = a.get("gen_ai.operation.name") if isinstance(a.get("gen_ai.operation.name"), str) else None
    oi = str(a.get("openinference.span.kind") or "").upper()
    first = name.split(" ", 1)[0]
    if op in MODEL_OPS or oi == "LLM" or (op is None and first in MODEL_OPS):
        return "model"
    if op == "execute_tool" or oi == "TOOL" or first == "execute_tool" or "gen_ai.tool.name" in a:
        return "tool"
    if op in AGENT_OPS or oi == "AGENT" or (op is None and first in AGENT_OPS):
        return "agent"
    if any(k in a for keys in USAGE_KEYS.values() for k in keys):
        return "model"
    return ""


def _spans_of(doc: Any, into: dict[str, dict[str, _Span]], counts: dict[str, int]) -> None:
    """Every span of a ``TracesData`` object, grouped by trace id; a span that cannot be read is counted."""
    if not isinstance(doc, dict):
        counts["skipped"] += 1
        return
    resources = doc.get("resourceSpans") if "resourceSpans" in doc else doc.get("batches")
    if not isinstance(resources, list):
        if "resourceLogs" not in doc and "resourceMetrics" not in doc:
            counts["skipped"] += 1
        return
    for res in resources:
        scopes = res.get("scopeSpans") if isinstance(res, dict) else None
        if scopes is None and isinstance(res, dict):
            scopes = res.get("instrumentationLibrarySpans")
        for scope in scopes if isinstance(scopes, list) else []:
            spans = scope.get("spans") if isinstance(scope, dict) else None
            for raw in spans if isinstance(spans, list) else []:
                add_span(raw, into, counts)


def add_span(raw: Any, into: dict[str, dict[str, _Span]], counts: dict[str, int]) -> None:
    """One OTLP JSON span into its trace's spans; one that cannot be read is counted, one seen twice noted."""
    span = _span(raw)
    if span is None:
        counts["skipped"] += 1
        return
    spans_of_trace = into.setdefault(str(raw.get("traceId") or ""), {})
    if span.id in spans_of_trace:
        counts["duplicates"] = counts.get("duplicates", 0) + 1  # the later copy is kept
    spans_of_trace[span.id] = span


def _span(raw: Any) -> _Span | None:
    if not isinstance(raw, dict):
        return None
    start, end = as_int(raw.get("startTimeUnixNano")), as_int(raw.get("endTimeUnixNano"))
    sid = raw.get("spanId")
    if start is None or end is None or not isinstance(sid, str) or not sid:
        return None
    name = str(raw.get("name") or "")
    attrs = _attrs(raw.get("attributes"))
    status = raw.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    error = code in (2, "STATUS_CODE_ERROR") or "error.type" in attrs
    span = _Span(sid, str(raw.get("parentSpanId") or ""), name, start / 1e9, max(end, start) / 1e9, attrs, error)
    span.role = _role(name, attrs)
    events = raw.get("events")
    for ev in events if isinstance(events, list) else []:
        if isinstance(ev, dict) and "first token" in str(ev.get("name") or "").lower():
            at = as_int(ev.get("timeUnixNano"))
            if at is not None:
                span.first_token = at / 1e9 - span.start
                break
    return span


def read(path: Path) -> Iterator[Trace]:
    traces: dict[str, dict[str, _Span]] = {}
    counts = {"skipped": 0}
    notes: list[str] = []
    if json_lines(path):
        lines = Lines(path)
        for obj in lines:
            _spans_of(obj, traces, counts)
        counts["skipped"] += lines.skipped
        notes += lines.notes()
    else:
        _spans_of(load_document(path), traces, counts)
    yield from traces_of(path, traces, counts, notes, NAME)


def traces_of(path: Path, traces: dict[str, dict[str, _Span]], counts: dict[str, int], notes: list[str],
              name: str) -> Iterator[Trace]:
    """A trace per trace id from spans read (by this reader or another that gives OTLP-shaped spans)."""
    if counts.get("duplicates"):
        notes.append(f"{counts['duplicates']} span id(s) seen twice: each counted once (the later copy)")
    if not traces:
        yield Trace(file=str(path), format=name, skipped=counts["skipped"],
                    notes=[*notes, "no spans"] if not counts["skipped"] else notes)
        return
    for n, (trace_id, spans) in enumerate(traces.items()):
        trace = _trace(path, trace_id, spans, counts["skipped"] if n == 0 else 0, notes if n == 0 else [])
        trace.format = name
        yield trace


def _trace(path: Path, trace_id: str, spans: dict[str, _Span], skipped: int, notes: list[str]) -> Trace:
    for s in spans.values():
        if s.parent in spans:
            spans[s.parent].children.append(s.id)

    def ancestors(s: _Span) -> Iterator[_Span]:
        seen = {s.id}
        while s.parent in spans and s.parent not in seen:
            s = spans[s.parent]
            seen.add(s.id)
            yield s

    def has_descendant(s: _Span, role: str) -> bool:
        stack, seen = list(s.children), set()
        while stack:
            c = spans[stack.pop()]
            if c.id in seen:
                continue
            seen.add(c.id)
            if c.role == role:
                return True
            stack.extend(c.children)
        return False

    agents = [s for s in spans.values() if s.role == "agent"]
    top_agents = {s.id for s in agents if not any(a.role == "agent" for a in ancestors(s))}
    chains = Chains()
    session = ""
    for s in sorted(spans.values(), key=lambda s: (s.start, s.end)):
        session = session or str(s.attrs.get("gen_ai.conversation.id") or "")
        if not s.role:
            continue
        agent = next((a for a in ancestors(s) if a.role == "agent"), None)
        chain = MAIN_CHAIN if agent is None or agent.id in top_agents else f"agent-{agent.id}"
        if s.role == "agent":
            # an agent's own time that no step covers is wait (lowest precedence, so it fills only the gaps)
            chain = MAIN_CHAIN if s.id in top_agents else f"agent-{s.id}"
            chains.add("wait", s.start, s.end, chain=chain, label=str(s.attrs.get("gen_ai.agent.name") or "agent"))
            if s.id not in top_agents:
                parent_chain = MAIN_CHAIN if agent is None or agent.id in top_agents else f"agent-{agent.id}"
                chains.add("tool", s.start, s.end, chain=parent_chain, label="sub-agent", id=f"agent-{s.id}")
            continue
        if s.role in ("model", "tool") and has_descendant(s, s.role):
            continue  # a wrapper of the real call(s): the innermost span counts
        if s.role == "model":
            _model(chains, s, chain, ancestors)
        elif s.role == "tool":
            label = s.attrs.get("gen_ai.tool.name") or s.attrs.get("tool.name") or s.name.removeprefix(
                "execute_tool").strip() or "tool"
            chains.add("tool", s.start, s.end, chain=chain, label=str(label), id=s.id, failed=s.error)
        else:
            label = s.attrs.get("tokrace.label") or s.role
            chains.add(s.role, s.start, s.end, chain=chain, label=str(label), id=s.id)  # type: ignore[arg-type]
    roots = [s for s in spans.values() if s.parent not in spans and not s.role]
    if chains.steps and roots:
        # the root span is what the user waited for: its time outside every step is wait, never dropped
        root = max(roots, key=lambda r: r.end - r.start)
        first, last = min(st.start for st in chains.steps), max(st.end for st in chains.steps)
        if root.start < first - 1e-9 or root.end > last + 1e-9:
            chains.add("wait", root.start, root.end, label=root.name or "root span")
            notes = [*notes, f"wall time from the root span {root.name!r} ({root.end - root.start:.3f} s)"]
    _retries(chains)
    notes = [*notes, "approvals and people are recorded only where a span says so (tokrace.step.kind)"]
    return Trace(file=str(path), format=NAME, session=session or trace_id, steps=chains.finish(),
                 skipped=skipped + chains.dropped, notes=chains.notes(notes))


def _model(chains: Chains, s: _Span, chain: str, ancestors: Any) -> None:
    usage: dict[str, int | None] = {}
    sources = [s, *(a for a in ancestors(s) if a.role == "model")]
    for key, names in USAGE_KEYS.items():
        usage[key] = next((v for src in sources for n in names if (v := as_int(src.attrs.get(n))) is not None),
                          None)
    model = next((str(v) for src in sources for n in ("gen_ai.response.model", "gen_ai.request.model",
                                                       "llm.model_name") if (v := src.attrs.get(n))), None)
    ttft = as_float(s.attrs.get("gen_ai.response.time_to_first_chunk"))
    if ttft is None:
        ttft = s.first_token
    tier = s.attrs.get("openai.response.service_tier") or s.attrs.get("gen_ai.openai.response.service_tier")
    chains.add("model", s.start, s.end, chain=chain, label=model or "", id=s.id, model=model,
               input_tokens=usage["input"], cached_input_tokens=usage["cached"], output_tokens=usage["output"],
               cache_write_tokens=usage["cache_write"],
               reasoning_tokens=usage["reasoning"],
               ttft_s=ttft if ttft is not None and 0 <= ttft <= s.end - s.start + 1e-9 else None,
               service_tier=str(tier) if tier else None, failed=s.error)


def _retries(chains: Chains) -> None:
    """The gap after a failed model call to the next model call in its chain is a retry back-off."""
    by_chain: dict[str, list[Any]] = {}
    recorded = {s.chain for s in chains.steps if s.kind == "retry"}  # back-offs a span names are not inferred
    for step in sorted(chains.steps, key=lambda s: (s.start, s.end)):
        if step.chain in recorded:
            continue
        if step.kind == "model":
            by_chain.setdefault(step.chain, []).append(step)
    for calls in by_chain.values():
        for a, b in itertools.pairwise(calls):
            if a.failed and b.start > a.end:
                chains.add("retry", a.end, b.start, chain=a.chain, label="retry")


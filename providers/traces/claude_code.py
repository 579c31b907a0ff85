"""Claude Code session transcripts (JSON Lines, one per session) as traces.

A model call is written as several lines sharing ``message.id`` whose usage repeats or grows: it is counted once,
with its largest counts, from the line it answered (a prompt or a tool result) to its last line. A tool step runs
from its ``tool_use`` line to its ``tool_result`` line; any permission prompt is inside (``includes_approval``).
The time from an answer to the person's next prompt is ``human``; ``api_error`` lines give failed calls and
retry back-offs. Sub-agents come inline (``isSidechain`` lines, one chain per sidechain root) or in files of their
own beside the session (``<session>/subagents/*.jsonl``, ``agent-*.jsonl``), read with it. No TTFT is recorded.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .model import MAIN_CHAIN, Trace
from .reader_tools import Chains, Lines, TraceError, as_int, dig, head, head_objects, timestamp

NAME: Final[str] = "claude-code"
LINE_TYPES: Final[frozenset[str]] = frozenset({"user", "assistant", "system", "summary"})
SUBAGENT_TOOLS: Final[frozenset[str]] = frozenset({"Task", "Agent"})
"""Tools that start a sub-agent: their steps are labelled "sub-agent"."""


def sniff(objects: list[dict[str, Any]]) -> bool:
    """A Claude Code transcript: lines with a ``type`` it writes and its ``uuid``/``sessionId`` fields."""
    return any(o.get("type") in LINE_TYPES and ("sessionId" in o or "uuid" in o or "leafUuid" in o)
               for o in objects)


@dataclass(slots=True)
class _Call:
    chain: str
    start: float
    end: float
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    tier: str | None = None
    failed: bool = False


@dataclass(slots=True)
class _Tool:
    chain: str
    start: float
    name: str
    end: float | None = None
    failed: bool = False


@dataclass(slots=True)
class _Session:
    """What one pass over a session's lines (and its sub-agent files) collects before steps are built."""

    calls: dict[str, _Call] = field(default_factory=dict)
    tools: dict[str, _Tool] = field(default_factory=dict)
    humans: list[tuple[float, float]] = field(default_factory=list)
    retries: list[tuple[str, float, float]] = field(default_factory=list)
    session: str = ""
    first: float | None = None
    """The session file's first timestamp (a ``/clear`` or a command can come long before the first prompt)."""
    skipped: int = 0
    notes: list[str] = field(default_factory=list)
    tool_calls: dict[str, str] = field(default_factory=dict)
    """Each tool id and the call (message) it was seen in: one seen in another call too is a repeat."""
    repeated: int = 0


def _usage_of(message: Any) -> dict[str, int]:
    usage = dig(message, "usage")
    out: dict[str, int] = {}
    if isinstance(usage, dict):
        for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            value = as_int(usage.get(key))
            if value is not None:
                out[key] = value
    return out


def _read_lines(path: Path, into: _Session, default_chain: str | None) -> None:
    """One pass over a transcript: calls, tools, prompts and retries, each with its chain."""
    lines = Lines(path)
    ts_of: dict[str, float] = {}
    chain_of: dict[str, str] = {}
    last_answer: dict[str, float] = {}  # per chain: the last assistant line (the end of the latest answer)
    resume: dict[str, float] = {}  # per chain: when the next model call starts (a prompt, a result, a back-off)
    for obj in lines:
        kind = obj.get("type")
        if kind not in ("user", "assistant", "system"):
            continue
        t = timestamp(obj.get("timestamp"))
        if t is None:
            lines.skip("a line without a timestamp")
            continue
        into.session = into.session or str(obj.get("sessionId") or "")
        if default_chain is None and (into.first is None or t < into.first):
            into.first = t
        uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) else None
        parent = obj.get("parentUuid") if isinstance(obj.get("parentUuid"), str) else None
        if obj.get("isSidechain") is True:
            chain = default_chain or chain_of.get(parent or "", f"sidechain-{uuid or len(chain_of)}")
        else:
            chain = default_chain or MAIN_CHAIN
        if uuid:
            ts_of[uuid] = t
            chain_of[uuid] = chain
        message = obj.get("message")
        if kind == "assistant":
            # a call starts at what it answered, or where the call before it in its chain ended
            start = min(max(resume.get(chain, t), last_answer.get(chain, float("-inf"))), t)
            _assistant(obj, message, t, chain, into, start)
            last_answer[chain] = t
        elif kind == "user":
            content = dig(message, "content")
            blocks = content if isinstance(content, list) else []
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            for block in results:
                tool = into.tools.get(str(block.get("tool_use_id")))
                if tool is not None and tool.end is None:
                    tool.end = t
                    tool.failed = block.get("is_error") is True
            prompt = not results and not obj.get("isMeta") and (isinstance(content, str) or bool(blocks))
            if prompt and chain in last_answer and chain == MAIN_CHAIN:
                # a person's next message after an answer (a sub-agent's next message comes from its parent
                # agent, not a person: its gap is the sub-agent's own wait)
                into.humans.append((last_answer[chain], t))
            resume[chain] = t
        elif obj.get("subtype") == "api_error":
            wait_ms = as_int(obj.get("retryInMs")) or 0
            into.retries.append((chain, t, t + wait_ms / 1000.0))
            # the attempt from the last resume point to the error failed
            into.calls[f"failed-{uuid or t}"] = _Call(chain, resume.get(chain, t), t, failed=True)
            resume[chain] = t + wait_ms / 1000.0
    into.skipped += lines.skipped
    into.notes += [f"{path.name}: {note}" for note in lines.notes()]


def _assistant(obj: dict[str, Any], message: Any, t: float, chain: str, into: _Session, start: float) -> None:
    mid = dig(message, "id")
    key = f"{obj.get('requestId') or ''}/{mid}" if isinstance(mid, str) else f"line-{obj.get('uuid') or t}"
    call = into.calls.get(key)
    if call is None:
        call = into.calls[key] = _Call(chain, start, t)
    call.end = max(call.end, t)
    model = dig(message, "model")
    if isinstance(model, str) and model and not model.startswith("<"):
        call.model = model
    for name, value in _usage_of(message).items():
        call.usage[name] = max(call.usage.get(name, 0), value)
    tier = dig(message, "usage", "service_tier")
    if isinstance(tier, str):
        call.tier = tier
    content = dig(message, "content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            seen_in = into.tool_calls.setdefault(block["id"], key)
            if seen_in != key:
                into.repeated += 1  # the same tool id in another call: the first one is kept
            into.tools.setdefault(block["id"], _Tool(chain, t, str(block.get("name") or "tool")))


def subagent_files(path: Path) -> list[Path]:
    """The sub-agent transcripts kept beside a session: ``<session>/subagents/*.jsonl``."""
    folder = path.parent / path.stem / "subagents"
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def parent_session(path: Path) -> Path | None:
    """The session a sub-agent file belongs to, when it is one and its session is beside it; else ``None``."""
    if path.parent.name == "subagents":
        session = path.parent.parent.with_suffix(".jsonl")
        return session if session.is_file() else None
    if path.name.startswith("agent-"):
        for obj in head_objects(head(path), limit=5):
            sid = obj.get("sessionId")
            if isinstance(sid, str) and sid and obj.get("isSidechain") is True:
                session = path.with_name(f"{sid}.jsonl")
                return session if session.is_file() else None
    return None


@functools.lru_cache(maxsize=8)
def _agents_beside(folder: Path, mtime: int) -> dict[str, tuple[Path, ...]]:
    """The sub-agent files (``agent-*.jsonl``) of a folder by the session id they belong to, looked up once per
    folder (and again when the folder changes), not once per session in it."""
    out: dict[str, list[Path]] = {}
    for sub in sorted(folder.glob("agent-*.jsonl")):
        try:
            objects = head_objects(head(sub, 16 * 1024), limit=5)
        except TraceError:
            continue
        sid = next((o.get("sessionId") for o in objects if isinstance(o.get("sessionId"), str)), None)
        if sid:
            out.setdefault(sid, []).append(sub)
    return {sid: tuple(paths) for sid, paths in out.items()}


def read(path: Path) -> Iterator[Trace]:
    """One trace per session file, its sub-agent files folded in as chains of their own."""
    s = _Session()
    _read_lines(path, s, None)
    for sub in subagent_files(path):
        _read_lines(sub, s, f"agent-{sub.stem}")
    if not path.name.startswith("agent-"):
        folder = path.parent
        mtime = folder.stat().st_mtime_ns if folder.is_dir() else 0
        for sub in _agents_beside(folder, mtime).get(path.stem, ()):
            _read_lines(sub, s, sub.stem)
    yield _build(path, s)


def _build(path: Path, s: _Session) -> Trace:
    chains = Chains()
    timed: list[tuple[float, int, Any]] = []
    for i, call in enumerate(s.calls.values()):
        timed.append((call.start, i, call))
    for i, (tid, tool) in enumerate(s.tools.items()):
        timed.append((tool.start, len(s.calls) + i, (tid, tool)))
    for i, (a, b) in enumerate(s.humans):
        timed.append((a, 10**9 + i, ("human", a, b)))
    for i, (chain, a, b) in enumerate(s.retries):
        timed.append((a, 2 * 10**9 + i, ("retry", chain, a, b)))
    timed.sort(key=lambda x: (x[0], x[1]))
    unanswered = 0
    for _, _, item in timed:
        if isinstance(item, _Call):
            u = item.usage
            uncached = u.get("input_tokens")
            cached = u.get("cache_read_input_tokens")
            created = u.get("cache_creation_input_tokens")
            total_in = None if uncached is None and cached is None else (uncached or 0) + (cached or 0) + (
                created or 0)
            chains.add("model", item.start, item.end, chain=item.chain, label=item.model or "",
                       model=item.model, input_tokens=total_in, cached_input_tokens=cached, cache_write_tokens=created,
                       output_tokens=u.get("output_tokens"), service_tier=item.tier, failed=item.failed)
        elif isinstance(item, tuple) and item[0] == "human":
            chains.add("human", item[1], item[2], label="person")
        elif isinstance(item, tuple) and item[0] == "retry":
            chains.add("retry", item[2], item[3], chain=item[1], label="retry")
        else:
            tid, tool = item
            if tool.end is None:
                unanswered += 1
            label = "sub-agent" if tool.name in SUBAGENT_TOOLS else tool.name
            chains.add("tool", tool.start, tool.end if tool.end is not None else tool.start, chain=tool.chain,
                       label=label, id=tid, includes_approval=True, failed=tool.failed)
    notes = list(s.notes)
    starts = [step.start for step in chains.steps]
    if s.first is not None and starts and s.first < min(starts):
        chains.add("human", s.first, min(starts), label="before the first prompt")
        notes.append(f"{min(starts) - s.first:.1f} s from the file's first line to the first prompt (after /clear "
                     "or a command): the person's, past the idle cap away")
    if s.repeated:
        notes.append(f"{s.repeated} tool id(s) seen in two model calls: counted once (the first)")
    if unanswered:
        notes.append(f"{unanswered} tool call(s) without a result (the session ended first): counted as instants")
    notes.append("no TTFT recorded; tool times include any permission prompt")
    return Trace(file=str(path), format=NAME, session=s.session, steps=chains.finish(),
                 skipped=s.skipped + chains.dropped, notes=chains.notes(notes))

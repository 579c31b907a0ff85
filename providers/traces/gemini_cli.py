"""Gemini CLI chat recordings (``~/.gemini/tmp/<project hash>/chats/session-*.json``) as traces.

A recording is one JSON document: ``sessionId``, ``projectHash``, ``startTime``, ``lastUpdated`` and
``messages``; a message has ``id``, ``timestamp``, ``type`` (``user``, ``gemini``; newer versions add ``info``,
``error``, ``warning``) and, on a ``gemini`` message, ``model``, ``thoughts`` (each with its ``timestamp``),
``toolCalls`` (``id``, ``name``, ``status``, ``timestamp``) and ``tokens`` (``input``, ``output``, ``cached``,
``thoughts``, ``tool``, ``total``). Each ``gemini`` message is a model call: from what it answered (the person's
message, or the end of the tools the message before it called) to its last recorded moment (its own timestamp or
its last thought's; the last call of the file ends at ``lastUpdated``, written when its tokens were). Its tool
calls run from there to their own timestamps, in parallel. The time from an answer to the person's next message
is ``human``. Input tokens are ``input`` plus ``tool`` (the tool-use prompt), cached ``cached``, output ``output``
plus ``thoughts`` (reasoning). No TTFT is recorded, nor when a response that calls no tool finished streaming.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from .model import Trace
from .reader_tools import Chains, as_int, load_document, timestamp

NAME: Final[str] = "gemini-cli"
FAILED: Final[frozenset[str]] = frozenset({"error", "cancelled"})


def sniff_text(data: bytes) -> bool:
    """A chat recording: a document with ``sessionId``, ``projectHash`` and ``messages``."""
    return b'"projectHash"' in data and b'"messages"' in data and b'"sessionId"' in data


def _tokens(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        return {}
    inp, tool, cached = as_int(raw.get("input")), as_int(raw.get("tool")), as_int(raw.get("cached"))
    out, thoughts = as_int(raw.get("output")), as_int(raw.get("thoughts"))
    return {"input_tokens": None if inp is None and tool is None else (inp or 0) + (tool or 0),
            "cached_input_tokens": cached,
            "output_tokens": None if out is None and thoughts is None else (out or 0) + (thoughts or 0),
            "reasoning_tokens": thoughts}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def read(path: Path) -> Iterator[Trace]:
    doc = load_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return
    chains = Chains()
    skipped = 0
    ids: set[str] = set()
    repeated = untimed_tokens = 0
    resume: float | None = timestamp(doc.get("startTime"))
    last_answer: float | None = None
    messages = [m for m in doc["messages"] if isinstance(m, dict)]
    skipped += len(doc["messages"]) - len(messages)
    last_gemini = max((i for i, m in enumerate(messages) if m.get("type") == "gemini"), default=-1)
    for i, msg in enumerate(messages):
        t = timestamp(msg.get("timestamp"))
        kind = msg.get("type")
        if t is None:
            skipped += 1
            continue
        if kind == "user":
            if last_answer is not None and t > last_answer:
                chains.add("human", last_answer, t, label="person")
            resume = t
            continue
        if kind != "gemini":
            continue  # info, warning, error lines: not steps
        thoughts = [x for th in _list(msg.get("thoughts")) if isinstance(th, dict)
                    if (x := timestamp(th.get("timestamp"))) is not None]
        start = resume if resume is not None else min([t, *thoughts])
        end = max([t, *thoughts])
        calls = [c for c in _list(msg.get("toolCalls")) if isinstance(c, dict)]
        updated = timestamp(doc.get("lastUpdated"))
        if i == last_gemini and not calls and updated is not None and updated > end:
            end = updated  # the file was last written when this call's tokens were
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        tokens = _tokens(msg.get("tokens"))
        untimed_tokens += not tokens
        chains.add("model", min(start, end), end, label=model or "", model=model, **tokens)
        tool_end = end
        for call in calls:
            cid = str(call.get("id") or "")
            if cid and cid in ids:
                repeated += 1
            ids.add(cid)
            at = timestamp(call.get("timestamp"))
            done = max(at if at is not None else end, end)
            chains.add("tool", end, done, label=str(call.get("name") or "tool"), id=cid or None,
                       failed=str(call.get("status") or "").lower() in FAILED)
            tool_end = max(tool_end, done)
        resume = tool_end
        last_answer = tool_end
    notes = []
    if skipped:
        notes.append(f"skipped {skipped} message(s) without a time")
    if repeated:
        notes.append(f"{repeated} tool call id(s) seen twice: each call counted where it appears")
    if untimed_tokens:
        notes.append(f"{untimed_tokens} response(s) without token counts (not recorded)")
    notes.append("no TTFT recorded; a response that calls no tool ends at its last recorded moment (its text's "
                 "start or last thought), the file's last response at lastUpdated")
    yield Trace(file=str(path), format=NAME, session=str(doc.get("sessionId") or ""), steps=chains.finish(),
                skipped=skipped + chains.dropped, notes=chains.notes(notes))

"""Codex CLI session rollouts (JSON Lines of ``{timestamp, type, payload}``) as traces.

A model call starts at what it answered (the person's message, the last tool output, or the call before it) and
ends at its ``token_count`` event, whose ``last_token_usage`` is its usage; a repeated ``token_count`` with
unchanged totals is not a new call. Rollouts without ``token_count`` events end a call at its last response item.
A tool step runs from a ``function_call`` (or ``custom_tool_call``) to the output with the same ``call_id``;
approvals are not written, so their time is inside the tool step (``includes_approval`` unless the approval
policy was ``never``). The time from an answer to the person's next message is ``human``. No TTFT or retries are
recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .model import Trace
from .reader_tools import Chains, Lines, as_int, dig, timestamp

NAME: Final[str] = "codex"
CALLS: Final[frozenset[str]] = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUTS: Final[frozenset[str]] = frozenset({"function_call_output", "custom_tool_call_output"})
ASSISTANT_ITEMS: Final[frozenset[str]] = frozenset({"message", "reasoning", *CALLS, "web_search_call"})


def sniff(objects: list[dict[str, Any]]) -> bool:
    """A rollout: ``{timestamp, type, payload}`` lines with the types Codex writes."""
    return any({"timestamp", "type", "payload"} <= o.keys()
               and o.get("type") in ("session_meta", "turn_context", "response_item", "event_msg") for o in objects)


@dataclass(slots=True)
class _State:
    chains: Chains = field(default_factory=Chains)
    model: str | None = None
    approval: bool = True
    session: str = ""
    call_from: float | None = None
    """When the model call under way started (what it answered arrived)."""
    last_item: float | None = None
    """The last assistant item of the call under way (where it ends without a ``token_count``)."""
    last_answer: float | None = None
    totals: tuple[int, ...] | None = None
    open_tools: dict[str, tuple[float, str]] = field(default_factory=dict)
    tools: list[tuple[float, float, str, str, bool]] = field(default_factory=list)
    searches: int = 0
    repeated: int = 0
    call_ids: set[str] = field(default_factory=set)
    usage_seen: bool = False


def _failed(output: Any) -> bool:
    """Whether a tool output says it failed (a non-zero exit code, or ``success: false``)."""
    data = output
    if isinstance(output, str) and output.startswith("{"):
        try:
            data = json.loads(output)
        except json.JSONDecodeError:
            return False
    if isinstance(data, dict):
        code = as_int(dig(data, "metadata", "exit_code"))
        return bool(code) or data.get("success") is False
    return False


def _close_call(s: _State, end: float, usage: dict[str, Any] | None) -> None:
    start = s.call_from if s.call_from is not None else end
    fields: dict[str, Any] = {}
    if usage is not None:
        fields = {"input_tokens": as_int(usage.get("input_tokens")),
                  "cached_input_tokens": as_int(usage.get("cached_input_tokens")),
                  "output_tokens": as_int(usage.get("output_tokens")),
                  "reasoning_tokens": as_int(usage.get("reasoning_output_tokens"))}
    s.chains.add("model", start, end, label=s.model or "", model=s.model, **fields)
    s.last_answer = end
    s.call_from = end
    s.last_item = None


def read(path: Path) -> Iterator[Trace]:
    lines = Lines(path)
    s = _State()
    for obj in lines:
        t = timestamp(obj.get("timestamp"))
        payload = obj.get("payload")
        if t is None or not isinstance(payload, dict):
            lines.skip("a line without a timestamp or payload")
            continue
        kind, ptype = obj.get("type"), payload.get("type")
        if kind == "session_meta":
            s.session = str(payload.get("id") or s.session)
        elif kind == "turn_context":
            model = payload.get("model")
            s.model = model if isinstance(model, str) and model else s.model
            s.approval = payload.get("approval_policy") != "never"
        elif kind == "response_item":
            if ptype in CALLS:
                call_id = str(payload.get("call_id") or payload.get("id") or f"call-{t}")
                name = payload.get("name") or ("shell" if ptype == "local_shell_call" else "tool")
                if call_id in s.call_ids:
                    s.repeated += 1  # the later call with this id is the one timed
                s.call_ids.add(call_id)
                s.open_tools[call_id] = (t, str(name))
            if ptype == "web_search_call":  # run inside the model's answer: a tool call, its time the model's
                s.searches += 1
                s.tools.append((t, t, "web_search", str(payload.get("id") or f"search-{s.searches}"), False))
            if ptype in OUTPUTS:
                opened = s.open_tools.pop(str(payload.get("call_id")), None)
                if opened is not None:
                    failed = _failed(payload.get("output"))
                    s.tools.append((opened[0], t, opened[1], str(payload.get("call_id")), failed))
                if s.last_item is not None:  # a call that no token_count closed
                    _close_call(s, s.last_item, None)
                s.call_from = t
            elif ptype in ASSISTANT_ITEMS and dig(payload, "role") in (None, "assistant"):
                s.last_item = t
        elif kind == "event_msg":
            if ptype == "user_message":
                if s.last_item is not None:
                    _close_call(s, s.last_item, None)
                if s.last_answer is not None and t > s.last_answer:
                    s.chains.add("human", s.last_answer, t, label="person")
                s.call_from = t
            elif ptype == "token_count":
                info = payload.get("info")
                total = dig(info, "total_token_usage")
                key = tuple(as_int(total.get(k)) or 0 for k in sorted(total)) if isinstance(total, dict) else None
                if key is None or key == s.totals:
                    continue  # no usage, or the same totals again: not a new call
                s.totals = key
                last = dig(info, "last_token_usage")
                s.usage_seen = s.usage_seen or isinstance(last, dict)
                _close_call(s, t, last if isinstance(last, dict) else None)
    if s.last_item is not None:
        _close_call(s, s.last_item, None)
    for start, end, name, call_id, failed in s.tools:
        s.chains.add("tool", start, end, label=name, id=call_id, includes_approval=s.approval, failed=failed)
    for call_id, (start, name) in s.open_tools.items():
        s.chains.add("tool", start, start, label=name, id=call_id, includes_approval=s.approval)
    notes = lines.notes()
    if s.open_tools:
        notes.append(f"{len(s.open_tools)} tool call(s) without an output (the session ended first): "
                     "counted as instants")
    if not s.usage_seen and any(step.kind == "model" for step in s.chains.steps):
        notes.append("no token counts recorded (no token_count events): the model's time cannot be re-timed")
    if s.repeated:
        notes.append(f"{s.repeated} tool call id(s) seen twice: each id timed once (from its later call)")
    if s.searches:
        notes.append(f"{s.searches} web search{'es' * (s.searches != 1)} ran inside the model's answers: counted "
                     "as tool calls, their time is the model's")
    notes.append("no TTFT or retries recorded; tool times include any approval")
    yield Trace(file=str(path), format=NAME, session=s.session, steps=s.chains.finish(),
                skipped=lines.skipped + s.chains.dropped, notes=s.chains.notes(notes))


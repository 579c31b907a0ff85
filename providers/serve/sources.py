"""What ``tokrace serve`` streams: a timed plan for each request, from a synthetic profile or a recorded lane, and
what a request's body asks of it (its turn, its token limit)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Final

from ..adapters.synthetic import Profile, pieces, schedule
from ..metrics.turn import split_turns
from ..model.events import Delta, Done, Error, Headers, Request, Segment, ToolCall, Usage
from ..model.tiers import MAX_TOKENS_LIMIT
from .faults import ServeError
from .wire import Call, Piece, Plan


class Source:
    """What to stream: a plan for each request."""

    model: str = "tokrace-serve"

    def plan(self, body: dict[str, Any], max_tokens: int, turn: int) -> Plan:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class SyntheticSource(Source):
    """A synthetic profile's schedule, answer by answer (a turn's seed follows the conversation's length)."""

    def __init__(self, profile: Profile, model: str = "tokrace-serve") -> None:
        self.profile = profile
        self.model = model
        self._plans: dict[tuple[int, int], Plan] = {}
        """Plans already made: the schedule is computed once, not while other answers are being timed."""

    def plan(self, body: dict[str, Any], max_tokens: int, turn: int) -> Plan:
        made = self._plans.get((max_tokens, turn))
        if made is None:
            made = self._plans[(max_tokens, turn)] = self._make(max_tokens, turn)
        return dataclasses.replace(made, input_tokens=_input_tokens(body))

    def _make(self, max_tokens: int, turn: int) -> Plan:
        steps = list(schedule(self.profile, max_tokens, turn))
        head = self.profile.ttfb_ms / 1000.0 if self.profile.ttfb_ms is not None else min(
            0.02, self.profile.ttft_ms / 1000.0)
        if steps:
            head = min(head, steps[0].t)
        reasoning = sum(s.tokens for s in steps if s.channel == "reasoning")
        produced = sum(s.tokens for s in steps)
        return Plan(head_t=head, pieces=[Piece(s.t, s.text, s.channel, s.tokens) for s in steps],
                    end_t=steps[-1].t if steps else head, output_tokens=produced, reasoning_tokens=reasoning,
                    finish="length" if produced >= max_tokens else "stop")

    def describe(self) -> str:
        p = self.profile
        return f"a synthetic profile (ttft {p.ttft_ms:g} ms, {p.tok_s:g} tok/s, {p.tokens_per_event} per event)"


class RecordingSource(Source):
    """A recorded lane: turn k of the lane answers a conversation with k assistant messages in it."""

    def __init__(self, path: Path, lane: int | str = 0, run: int = 0) -> None:
        from ..recording import read_recording

        recording = read_recording(path)
        index = recording.lane_index(lane)
        if not 0 <= run < recording.runs:
            raise ServeError(f"{path}: no run {run} (it has {recording.runs})")
        self.path = path
        # A scenario's lane may open with a person or a tool before its first request: only requests are turns.
        self.turns = [t for t in split_turns(recording.lane_events(index, run)) if isinstance(t[0], Request)]
        if not self.turns:
            raise ServeError(f"{path}: lane {lane} of run {run} has no events to serve")
        tiers = recording.tiers
        self.model = str(tiers[index].get("model") or "tokrace-serve") if index < len(tiers) else "tokrace-serve"

    def plan(self, body: dict[str, Any], max_tokens: int, turn: int) -> Plan:
        events = self.turns[turn % len(self.turns)]
        request = next((e for e in events if isinstance(e, Request)), None)
        origin = request.t if request is not None else events[0].t
        for e in events:  # the server's clock starts when the request reached it, after connecting
            if isinstance(e, Segment) and e.seg == "connect":
                origin = e.end
        plan = Plan(head_t=0.0, pieces=[], end_t=0.0, input_tokens=_input_tokens(body))
        pending: list[Delta] = []
        head: Headers | None = None
        for e in events:
            t = max(e.t - origin, 0.0)
            if isinstance(e, Headers) and head is None:
                head, plan.head_t = e, t
            elif isinstance(e, Delta) and e.text:
                if e.channel == "tool_args":
                    pending.append(e)
                else:
                    plan.pieces.extend(Piece(t, text, e.channel, tokens) for text, tokens in _chunk_parts(e))
            elif isinstance(e, ToolCall):
                plan.calls.append(Call(e.id, e.name))
                index = len(plan.calls) - 1
                parts = pending or [Delta(t=e.t, text=e.arguments, channel="tool_args")]
                plan.pieces.extend(Piece(max(d.t - origin, 0.0), text, "tool_args", tokens, index)
                                   for d in parts for text, tokens in _chunk_parts(d))
                pending = []
            elif isinstance(e, Usage):
                plan.output_tokens, plan.reasoning_tokens = e.output, e.reasoning
            elif isinstance(e, Done):
                plan.finish, plan.end_t = e.finish_reason, t
                break  # what follows a turn's end (a scenario's tools, people, its end) is not the answer
            elif isinstance(e, Error) and plan.error is None:
                failed_early = head is None or head.status >= 400
                plan.error = ((e.status or (head.status if head else 500)) if failed_early else 200, e.message)
                plan.end_t = t
        plan.pieces.sort(key=lambda p: p.t)
        if not plan.output_tokens:
            plan.output_tokens = sum(p.tokens for p in plan.pieces)
        plan.end_t = max(plan.end_t, plan.pieces[-1].t if plan.pieces else plan.head_t)
        return plan

    def describe(self) -> str:
        return f"{self.path} ({len(self.turns)} turn{'s' if len(self.turns) != 1 else ''})"


def _chunk_parts(delta: Delta) -> list[tuple[str, int]]:
    """A recorded delta as the chunks it joined (``Delta.chunks``), each with its tokens: its text cut into that
    many parts, all sent at its time, so a client counts the chunks (and the gaps of zero between them) the
    recording counts; its tokens (1 per chunk when it has no count) shared among them."""
    k, text = delta.chunks, delta.text
    tokens = delta.tokens if delta.tokens is not None else k
    if k == 1:
        return [(text, delta.tokens or 1)]
    size = len(text)
    return [(text[i * size // k:(i + 1) * size // k], tokens * (i + 1) // k - tokens * i // k) for i in range(k)]


_COUNTS: dict[str, int] = {}
"""Token counts of long texts already counted: an agent sends its whole conversation again with every request, so
only the new messages are counted."""
_COUNTED_CHARS: list[int] = [0]
COUNTS_KEPT_CHARS: Final[int] = 64 * 1024 * 1024
"""The most characters of counted texts kept (then the counts start over)."""


def _count(text: str) -> int:
    if len(text) < 256:
        return len(pieces(text))
    count = _COUNTS.get(text)
    if count is None:
        count = len(pieces(text))
        if _COUNTED_CHARS[0] + len(text) > COUNTS_KEPT_CHARS:
            _COUNTS.clear()
            _COUNTED_CHARS[0] = 0
        _COUNTS[text] = count
        _COUNTED_CHARS[0] += len(text)
    return count


def _input_tokens(body: dict[str, Any]) -> int:
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for key in ("content", "text", "input", "system", "instructions", "output", "arguments"):
                if key in value:
                    walk(value[key])

    for key in ("messages", "input", "system", "instructions"):
        walk(body.get(key))
    return sum(map(_count, texts))


def turn_of(body: dict[str, Any]) -> int:
    """How many answers the conversation already holds: runs of assistant items (in the Responses API a turn
    that only called tools is ``function_call`` items, with no assistant message)."""
    items = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    if not isinstance(items, list):
        return 0
    turns, inside = 0, False
    for m in items:
        answer = isinstance(m, dict) and (m.get("role") == "assistant" or m.get("type") == "function_call")
        turns += answer and not inside
        inside = answer
    return turns


def max_tokens_of(body: dict[str, Any], default: int) -> int:
    """The output limit a request asks for (``default`` when it names none), at most the tiers' cap."""
    for key in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return min(value, MAX_TOKENS_LIMIT)  # a client asking for a billion tokens gets the cap's worth
    return default

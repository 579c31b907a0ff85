"""What ``tokrace serve`` writes on the wire: a planned answer as OpenAI Chat, Responses or Anthropic SSE frames.

A :class:`Plan` is protocol-neutral (pieces of text with their times, tool calls, usage, how it ends); one wire
class per protocol turns it into the frames that protocol's real servers send, plus its error shapes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Final

FLAVORS: Final[tuple[str, ...]] = ("openai", "groq", "cerebras", "llamacpp")
"""Which OpenAI-compatible server a Chat stream imitates: its reasoning field and its own timing extras."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of the answer, sent ``t`` seconds after the request was read."""

    t: float
    text: str
    channel: str = "content"
    tokens: int = 1
    call: int | None = None
    """For ``tool_args``: which of the plan's calls the text belongs to."""


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the answer makes."""

    id: str
    name: str


@dataclass(slots=True)
class Plan:
    """A whole answer, timed: the head, the pieces, the end; or a failure the recording had."""

    head_t: float
    pieces: list[Piece]
    end_t: float
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    finish: str = "stop"
    calls: list[Call] = field(default_factory=list)
    error: tuple[int, str] | None = None
    """(status, message) of a recorded failure: a status of 400 up fails before the stream, 200 in it."""


@dataclass(slots=True)
class Timing:
    """What the server itself measured, for the providers' own timing extras (seconds)."""

    received: float
    first: float | None = None
    last: float | None = None

    def extras(self) -> tuple[float, float]:
        """(prompt time, completion time): request read → first piece, first → last piece."""
        first = self.first if self.first is not None else self.received
        last = self.last if self.last is not None else first
        return first - self.received, last - first


_OPENAI_TYPES: Final[dict[int, tuple[str, str | None]]] = {
    400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"), 429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None), 503: ("server_error", None),
}
_ANTHROPIC_TYPES: Final[dict[int, str]] = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error",
}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class Wire:
    """Frames of one response in one protocol; stateful, since blocks and items open and close."""

    def __init__(self, body: dict[str, Any], request_id: str, model: str, tier: str, usage: bool,
                 flavor: str = "openai") -> None:
        self.body = body
        self.request_id = request_id
        self.model = model
        self.tier = tier
        self.usage = usage
        self.flavor = flavor

    def opening(self, plan: Plan) -> bytes:
        """Frames sent with the response head."""
        raise NotImplementedError

    def piece(self, plan: Plan, piece: Piece) -> bytes:
        raise NotImplementedError

    def closing(self, plan: Plan, timing: Timing) -> bytes:
        raise NotImplementedError

    def error_event(self, message: str) -> bytes:
        raise NotImplementedError

    def malformed(self) -> bytes:
        """A frame whose JSON is cut off."""
        raise NotImplementedError

    def non_utf8(self, plan: Plan) -> bytes:
        """A text frame carrying bytes that are not UTF-8."""
        frame = self.piece(plan, Piece(0.0, "\x00MARK\x00", "content", 0))
        return frame.replace(b"\\u0000MARK\\u0000", b"\xff\xfe\xfd")

    @staticmethod
    def error_body(status: int, message: str, request_id: str) -> dict[str, Any]:
        kind, code = _OPENAI_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error",
                                                None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class ChatWire(Wire):
    """OpenAI Chat Completions chunks, ending ``data: [DONE]``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.created = int(time.time())
        self.started_calls: set[int] = set()
        options = self.body.get("stream_options") or {}
        self.include_usage = self.usage and isinstance(options, dict) and bool(options.get("include_usage"))

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        obj: dict[str, Any] = {"id": f"chatcmpl-{self.request_id}", "object": "chat.completion.chunk",
                               "created": self.created, "model": self.model, "service_tier": self.tier,
                               "choices": choices}
        obj.update(extra)
        return b"data: " + _dumps(obj) + b"\n\n"

    def _delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    def opening(self, plan: Plan) -> bytes:
        return self._delta({"role": "assistant", "content": ""})

    def piece(self, plan: Plan, piece: Piece) -> bytes:
        if piece.channel == "reasoning":
            field_name = "reasoning_content" if self.flavor == "llamacpp" else "reasoning"
            return self._delta({field_name: piece.text})
        if piece.channel == "tool_args" and piece.call is not None:
            fragment: dict[str, Any] = {"index": piece.call, "function": {"arguments": piece.text}}
            if piece.call not in self.started_calls:
                self.started_calls.add(piece.call)
                call = plan.calls[piece.call]
                fragment.update(id=call.id, type="function")
                fragment["function"]["name"] = call.name
            return self._delta({"tool_calls": [fragment]})
        return self._delta({"content": piece.text})

    def closing(self, plan: Plan, timing: Timing) -> bytes:
        out = self._delta({}, plan.finish)
        usage = {"prompt_tokens": plan.input_tokens, "completion_tokens": plan.output_tokens,
                 "total_tokens": plan.input_tokens + plan.output_tokens,
                 "prompt_tokens_details": {"cached_tokens": 0},
                 "completion_tokens_details": {"reasoning_tokens": plan.reasoning_tokens}}
        prompt_s, completion_s = timing.extras()
        extra: dict[str, Any] = {}
        if self.flavor == "groq" and self.usage:
            extra["x_groq"] = {"id": f"req_{self.request_id}", "usage": {
                **usage, "queue_time": 0.0, "prompt_time": prompt_s, "completion_time": completion_s,
                "total_time": prompt_s + completion_s}}
        elif self.flavor == "cerebras":
            extra["time_info"] = {"queue_time": 0.0, "prompt_time": prompt_s, "completion_time": completion_s,
                                  "total_time": prompt_s + completion_s, "created": time.time()}
        elif self.flavor == "llamacpp":
            done = max(plan.output_tokens, 1)
            extra["timings"] = {"prompt_n": plan.input_tokens, "prompt_ms": prompt_s * 1000.0,
                                "predicted_n": plan.output_tokens, "predicted_ms": completion_s * 1000.0,
                                "predicted_per_second": done / completion_s if completion_s > 0 else 0.0}
        if self.include_usage:
            out += self._chunk([], usage=usage, **extra)
        elif extra:
            out += self._chunk([], usage=None, **extra)
        return out + b"data: [DONE]\n\n"

    def error_event(self, message: str) -> bytes:
        failure = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
        return b"data: " + _dumps(failure) + b"\n\ndata: [DONE]\n\n"

    def malformed(self) -> bytes:
        return b'data: {"id":"chatcmpl-cut","choices":[{"index":0,"delta":{"content":"cut\n\n'


class ResponsesWire(Wire):
    """OpenAI Responses events (``event:`` lines and a ``sequence_number``), ending ``response.completed``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seq = 0
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        """The output item being streamed: a message, a reasoning item or a function call."""
        self.created = int(time.time())

    def _event(self, kind: str, **data: Any) -> bytes:
        obj = {"type": kind, "sequence_number": self.seq, **data}
        self.seq += 1
        return f"event: {kind}\ndata: ".encode() + _dumps(obj) + b"\n\n"

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {"id": f"resp_{self.request_id}", "object": "response", "created_at": self.created,
                "status": status, "model": self.model, "service_tier": self.tier, "output": self.output, **extra}

    def opening(self, plan: Plan) -> bytes:
        return (self._event("response.created", response=self._response("in_progress"))
                + self._event("response.in_progress", response=self._response("in_progress")))

    def _close(self) -> bytes:
        item = self.open
        if item is None:
            return b""
        self.open = None
        index = len(self.output) - 1
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out = (self._event("response.output_text.done", item_id=item["id"], output_index=index,
                               content_index=0, text=text)
                   + self._event("response.content_part.done", item_id=item["id"], output_index=index,
                                 content_index=0, part=item["content"][0]))
        elif item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            out = (self._event("response.reasoning_summary_text.done", item_id=item["id"], output_index=index,
                               summary_index=0, text=text)
                   + self._event("response.reasoning_summary_part.done", item_id=item["id"],
                                 output_index=index, summary_index=0, part=item["summary"][0]))
        else:
            out = self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                              name=item["name"], arguments=item["arguments"])
        item["status"] = "completed"
        return out + self._event("response.output_item.done", output_index=index, item=item)

    def _open(self, item: dict[str, Any]) -> bytes:
        out = self._close()
        self.output.append(item)
        self.open = item
        index = len(self.output) - 1
        out += self._event("response.output_item.added", output_index=index, item=item)
        if item["type"] == "message":
            out += self._event("response.content_part.added", item_id=item["id"], output_index=index,
                               content_index=0, part=item["content"][0])
        elif item["type"] == "reasoning":
            out += self._event("response.reasoning_summary_part.added", item_id=item["id"], output_index=index,
                               summary_index=0, part=item["summary"][0])
        return out

    def piece(self, plan: Plan, piece: Piece) -> bytes:
        out = b""
        n = len(self.output)
        if piece.channel == "tool_args" and piece.call is not None:
            call = plan.calls[piece.call]
            if self.open is None or self.open.get("call_id") != call.id:
                out += self._open({"id": f"fc_{self.request_id}_{piece.call}", "type": "function_call",
                                   "status": "in_progress", "call_id": call.id, "name": call.name,
                                   "arguments": ""})
            item = self.open
            assert item is not None
            item["arguments"] += piece.text
            return out + self._event("response.function_call_arguments.delta", item_id=item["id"],
                                     output_index=len(self.output) - 1, delta=piece.text)
        kind = "reasoning" if piece.channel == "reasoning" else "message"
        if self.open is None or self.open["type"] != kind:
            if kind == "message":
                out += self._open({"id": f"msg_{self.request_id}_{n}", "type": "message", "status": "in_progress",
                                   "role": "assistant",
                                   "content": [{"type": "output_text", "text": "", "annotations": []}]})
            else:
                out += self._open({"id": f"rs_{self.request_id}_{n}", "type": "reasoning",
                                   "summary": [{"type": "summary_text", "text": ""}]})
        item = self.open
        assert item is not None
        index = len(self.output) - 1
        if kind == "message":
            item["content"][0]["text"] += piece.text
            return out + self._event("response.output_text.delta", item_id=item["id"], output_index=index,
                                     content_index=0, delta=piece.text, logprobs=[])
        item["summary"][0]["text"] += piece.text
        return out + self._event("response.reasoning_summary_text.delta", item_id=item["id"],
                                 output_index=index, summary_index=0, delta=piece.text)

    def closing(self, plan: Plan, timing: Timing) -> bytes:
        out = self._close()
        usage = {"input_tokens": plan.input_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": plan.output_tokens,
                 "output_tokens_details": {"reasoning_tokens": plan.reasoning_tokens},
                 "total_tokens": plan.input_tokens + plan.output_tokens}
        if plan.finish == "length":
            return out + self._event("response.incomplete", response=self._response(
                "incomplete", usage=usage, incomplete_details={"reason": "max_output_tokens"}))
        return out + self._event("response.completed", response=self._response("completed", usage=usage))

    def error_event(self, message: str) -> bytes:
        return self._event("error", code="server_error", message=message, param=None)

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"cut\n\n'


class AnthropicWire(Wire):
    """Anthropic Messages events: ``message_start``, content blocks, ``message_delta``, ``message_stop``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = -1
        self.block: tuple[str, int | None] | None = None
        """The open content block: its kind and, for ``tool_use``, which call."""

    @staticmethod
    def _event(kind: str, **data: Any) -> bytes:
        return f"event: {kind}\ndata: ".encode() + _dumps({"type": kind, **data}) + b"\n\n"

    def opening(self, plan: Plan) -> bytes:
        usage = {"input_tokens": plan.input_tokens, "output_tokens": 1, "service_tier": self.tier}
        message: dict[str, Any] = {
            "id": f"msg_{self.request_id}", "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
        return self._event("message_start", message=message) + self._event("ping")

    def _close(self) -> bytes:
        if self.block is None:
            return b""
        out = b""
        if self.block[0] == "thinking":
            out += self._event("content_block_delta", index=self.index,
                               delta={"type": "signature_delta", "signature": "tokrace-serve"})
        self.block = None
        return out + self._event("content_block_stop", index=self.index)

    def piece(self, plan: Plan, piece: Piece) -> bytes:
        kind = {"reasoning": "thinking", "tool_args": "tool_use"}.get(piece.channel, "text")
        want = (kind, piece.call if kind == "tool_use" else None)
        out = b""
        if self.block != want:
            out += self._close()
            self.index += 1
            self.block = want
            if kind == "tool_use" and piece.call is not None:
                call = plan.calls[piece.call]
                block: dict[str, Any] = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            elif kind == "thinking":
                block = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                block = {"type": "text", "text": ""}
            out += self._event("content_block_start", index=self.index, content_block=block)
        if not piece.text:
            return out
        if kind == "tool_use":
            delta = {"type": "input_json_delta", "partial_json": piece.text}
        elif kind == "thinking":
            delta = {"type": "thinking_delta", "thinking": piece.text}
        else:
            delta = {"type": "text_delta", "text": piece.text}
        return out + self._event("content_block_delta", index=self.index, delta=delta)

    def closing(self, plan: Plan, timing: Timing) -> bytes:
        reason = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}.get(plan.finish,
                                                                                           plan.finish)
        return (self._close()
                + self._event("message_delta", delta={"stop_reason": reason, "stop_sequence": None},
                              usage={"output_tokens": plan.output_tokens})
                + self._event("message_stop"))

    def error_event(self, message: str) -> bytes:
        return self._event("error", error={"type": "overloaded_error", "message": message})

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"te\n\n'

    @staticmethod
    def error_body(status: int, message: str, request_id: str) -> dict[str, Any]:
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}

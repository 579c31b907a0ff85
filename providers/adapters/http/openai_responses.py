"""The ``openai-responses`` provider: the Responses API, where OpenAI offers its service tiers such as
``priority``, ``fast`` and ``ultrafast``. Reasoning summaries stream as the ``reasoning`` channel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...model.events import Done, Error, Event, ToolCall, Usage
from ...model.messages import Message, TurnRequest
from ...model.presets import DEFAULT_KEY_ENV
from ...model.tiers import TierSpec
from .decoder import PendingCall, StreamDecoder, StreamProblem, load_json
from .provider import HTTP_OPTIONS, HTTPProvider
from .shapes import tool_parts, usage_number
from .sse import SSEEvent

RESPONSES_OPTIONS: Final[dict[str, tuple[type, ...]]] = {
    **HTTP_OPTIONS,
    "reasoning_effort": (str,),
    "reasoning_summary": (str,),
}
"""Config keys of an ``openai-responses`` tier: the shared HTTP ones plus ``reasoning.effort`` and
``reasoning.summary`` (``auto``, ``concise``, ``detailed``: without one, reasoning is not streamed)."""

_TEXT: Final[frozenset[str]] = frozenset({"response.output_text.delta", "response.refusal.delta"})
_REASONING: Final[frozenset[str]] = frozenset({"response.reasoning_summary_text.delta",
                                                "response.reasoning_text.delta"})
_STARTED: Final[frozenset[str]] = frozenset({"response.created", "response.in_progress", "response.queued"})
_INCOMPLETE: Final[dict[str, str]] = {"max_output_tokens": "length", "content_filter": "content_filter"}


def responses_input(conversation: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Responses input items (``function_call``, ``function_call_output`` for tools)."""
    items: list[dict[str, Any]] = []
    for m in conversation:
        if m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.extra.get("tool_call_id", ""),
                          "output": m.content})
            continue
        if m.content or m.role != "assistant":
            items.append({"role": m.role, "content": m.content})
        for call in (m.extra.get("tool_calls") or ()) if m.role == "assistant" else ():
            items.append({"type": "function_call", "call_id": call["id"], "name": call["name"],
                          "arguments": call["arguments"]})
    return items


def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools in the Responses API's flat function form."""
    out = []
    for tool in tools:
        name, description, parameters = tool_parts(tool)
        out.append({"type": "function", "name": name, "description": description, "parameters": parameters})
    return out


class ResponsesDecoder(StreamDecoder):
    """Responses events → tokrace events; ``response.completed`` / ``.incomplete`` end it, ``.failed`` and
    ``error`` fail it."""

    text_keys = (('"delta":"', "content"), ('"delta":"', "reasoning"))
    """An answer's or a reasoning summary's text event says its text and nothing else (the event's type, in its
    frame, says which); a tool call's arguments are kept by the call, so they are never a frame."""

    def __init__(self, asked_tier: str | None) -> None:
        super().__init__(asked_tier)
        self.calls: dict[str, PendingCall] = {}

    def feed(self, sse: SSEEvent, t: float) -> list[Event]:
        if sse.data.startswith("[DONE]"):
            return [] if self.finished else [self.incomplete(t)]
        data = load_json(sse)
        if not isinstance(data, dict):
            raise StreamProblem("protocol", "the server sent something other than a Responses event object; "
                                            "is base_url a Responses endpoint?")
        kind = data.get("type") or sse.event
        if kind in _TEXT or kind in _REASONING:
            text = data.get("delta")
            if isinstance(text, str) and text:
                return [self.delta(t, text, "reasoning" if kind in _REASONING else "content")]
            return []
        if kind == "response.function_call_arguments.delta":
            piece = data.get("delta")
            call = self.calls.get(str(data.get("item_id")))
            if not isinstance(piece, str) or not piece:
                return []
            if call is not None:
                call.arguments += piece
            return [self.delta(t, piece, "tool_args")]
        if kind in ("response.output_item.added", "response.output_item.done"):
            return self._item(data.get("item"), t, done=kind.endswith(".done"))
        if kind == "response.function_call_arguments.done":
            call = self.calls.get(str(data.get("item_id")))
            if call is not None and isinstance(data.get("arguments"), str):
                call.arguments = data["arguments"]
            return self._send(call, t)
        if kind in _STARTED:
            return self.reported_tier(_get(data, "response", "service_tier"), t)
        if kind in ("response.completed", "response.incomplete"):
            return self._finish(data, t, kind)
        if kind == "response.failed":
            self.finished = True
            err = _get(data, "response", "error") or {}
            return [Error(t=t, error="stream", message="the response failed after "
                          f"{self.deltas} text chunks: {_said(err)}; try again")]
        if kind == "error":
            self.finished = True
            return [self.reported_error(t, _said(data))]
        return []

    def _item(self, item: Any, t: float, done: bool) -> list[Event]:
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            return []
        key = str(item.get("id") or item.get("call_id"))
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = PendingCall(str(item.get("call_id") or key), str(item.get("name") or ""))
        if done:
            if isinstance(item.get("arguments"), str):
                call.arguments = item["arguments"]
            return self._send(call, t)
        return []

    def _send(self, call: PendingCall | None, t: float) -> list[Event]:
        if call is None or call.sent:
            return []
        call.sent = True
        return [ToolCall(t=t, id=call.id, name=call.name, arguments=call.arguments)]

    def _finish(self, data: Mapping[str, Any], t: float, kind: str) -> list[Event]:
        self.finished = True
        response = data.get("response") or {}
        out: list[Event] = self.reported_tier(response.get("service_tier"), t)
        for call in self.calls.values():
            out.extend(self._send(call, t))
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            out.append(Usage(t=t, input=usage_number(usage, "input_tokens"),
                             output=usage_number(usage, "output_tokens"),
                             reasoning=usage_number(usage, "output_tokens_details", "reasoning_tokens"),
                             cached=usage_number(usage, "input_tokens_details", "cached_tokens")))
        if kind == "response.incomplete":
            reason = str(_get(data, "response", "incomplete_details", "reason") or "incomplete")
            finish = _INCOMPLETE.get(reason, reason)
        else:
            finish = "tool_calls" if self.calls else "stop"
        out.append(Done(t=t, finish_reason=finish))
        return out


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _said(err: Any) -> str:
    if not isinstance(err, Mapping):
        return str(err) or "no message"
    code = err.get("code") or err.get("type")
    message = err.get("message") or "no message"
    return f"{code}: {message}" if code else str(message)


class OpenAIResponsesProvider(HTTPProvider):
    """Responses streaming (``POST {base_url}/responses``)."""

    name = "openai-responses"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = DEFAULT_KEY_ENV["openai-responses"]
    options = RESPONSES_OPTIONS

    def __init__(self, tier: TierSpec, **kwargs: Any) -> None:
        super().__init__(tier, **kwargs)
        self.reasoning_effort: str | None = tier.options.get("reasoning_effort")
        self.reasoning_summary: str | None = tier.options.get("reasoning_summary")

    def endpoint(self) -> str:
        return self.base_url + "/responses"

    def body(self, request: TurnRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.tier.model,
            "input": responses_input(request.conversation()),
            "stream": True,
            "max_output_tokens": self.max_tokens(request),
        }
        if self.tier.service_tier:
            body["service_tier"] = self.tier.service_tier
        asked = (("effort", self.reasoning_effort), ("summary", self.reasoning_summary))
        reasoning = {k: v for k, v in asked if v}
        if reasoning:
            body["reasoning"] = reasoning
        if request.tools:
            body["tools"] = responses_tools(request.tools)
        return body

    def decoder(self) -> ResponsesDecoder:
        return ResponsesDecoder(self.tier.service_tier)

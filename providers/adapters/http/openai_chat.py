"""The ``openai`` provider: Chat Completions streaming, for OpenAI and every OpenAI-compatible server.

Cerebras, Groq, OpenRouter, Ollama, vLLM, llama.cpp and LM Studio speak it too (by ``base_url``); their
reasoning fields (``reasoning``, ``reasoning_content``) and their own timing (``x_groq.usage``, ``time_info``,
``timings``) are read when present.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...model.errors import ConfigError
from ...model.events import Done, Error, Event, Extra, ToolCall, Usage
from ...model.messages import Message, TurnRequest
from ...model.presets import DEFAULT_KEY_ENV
from ...model.tiers import TierSpec
from .decoder import PendingCall, StreamDecoder, StreamProblem, load_json
from .provider import HTTP_OPTIONS, HTTPProvider
from .shapes import tool_parts, usage_number
from .sse import SSEEvent

OPENAI_OPTIONS: Final[dict[str, tuple[type, ...]]] = {
    **HTTP_OPTIONS,
    "reasoning_effort": (str,),
    "max_tokens_field": (str,),
}
"""Config keys of an ``openai`` tier: the shared HTTP ones, ``reasoning_effort``, and which body field carries
the token limit (``max_completion_tokens`` for OpenAI itself, ``max_tokens`` elsewhere unless set)."""

MAX_TOKENS_FIELDS: Final[tuple[str, ...]] = ("max_completion_tokens", "max_tokens")


def chat_messages(conversation: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages in Chat Completions form (assistant ``tool_calls``, ``tool`` results)."""
    out: list[dict[str, Any]] = []
    for m in conversation:
        calls = m.extra.get("tool_calls") if m.role == "assistant" else None
        if calls:
            out.append({"role": "assistant", "content": m.content or None, "tool_calls": [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls]})
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.extra.get("tool_call_id", ""),
                        "content": m.content})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools in Chat Completions' nested function form."""
    out = []
    for tool in tools:
        name, description, parameters = tool_parts(tool)
        out.append({"type": "function", "function": {"name": name, "description": description,
                                                      "parameters": parameters}})
    return out


def timing_extras(chunk: Mapping[str, Any], t: float) -> list[Event]:
    """The providers' own timing, kept beside tokrace's numbers, with the decode rate each implies."""
    out: list[Event] = []
    x_groq = chunk.get("x_groq")
    if isinstance(x_groq, Mapping) and isinstance(x_groq.get("usage"), Mapping):
        data = dict(x_groq["usage"])
        done, took = usage_number(data, "completion_tokens"), data.get("completion_time")
        if isinstance(took, int | float) and took > 0:
            data["decode_tok_s"] = done / took
        out.append(Extra(t=t, source="groq", data=data))
    time_info = chunk.get("time_info")
    if isinstance(time_info, Mapping):
        data = dict(time_info)
        usage = chunk.get("usage")
        took = data.get("completion_time")
        if isinstance(usage, Mapping) and isinstance(took, int | float) and took > 0:
            data["decode_tok_s"] = usage_number(usage, "completion_tokens") / took
        out.append(Extra(t=t, source="cerebras", data=data))
    timings = chunk.get("timings")
    if isinstance(timings, Mapping):
        data = dict(timings)
        if isinstance(data.get("predicted_per_second"), int | float):
            data["decode_tok_s"] = data["predicted_per_second"]
        out.append(Extra(t=t, source="llamacpp", data=data))
    return out


def chat_usage(usage: Mapping[str, Any], t: float) -> Usage:
    return Usage(t=t, input=usage_number(usage, "prompt_tokens"),
                 output=usage_number(usage, "completion_tokens"),
                 reasoning=usage_number(usage, "completion_tokens_details", "reasoning_tokens"),
                 cached=usage_number(usage, "prompt_tokens_details", "cached_tokens"))


class ChatDecoder(StreamDecoder):
    """Chat chunks → events; ``[DONE]``, or the end of the bytes after a ``finish_reason``, ends it."""

    text_keys = (('"content":"', "content"), ('"reasoning":"', "reasoning"), ('"reasoning_content":"', "reasoning"))

    def __init__(self, asked_tier: str | None) -> None:
        super().__init__(asked_tier)
        self.finish: str | None = None
        self.calls: dict[int, PendingCall] = {}
        self._sent_calls = False

    def feed(self, sse: SSEEvent, t: float) -> list[Event]:
        if sse.data.startswith("[DONE]"):
            return self._done(t)
        chunk = load_json(sse)
        if not isinstance(chunk, dict):
            raise StreamProblem("protocol", f"the server sent {type(chunk).__name__} where a chunk object "
                                            "belongs; is base_url a Chat Completions endpoint?")
        # JSON objects are dicts: ``type(x) is dict`` says what ``isinstance(x, Mapping)`` would, far cheaper.
        tier = chunk.get("service_tier")
        out: list[Event] = self.reported_tier(tier, t) if tier is not None and tier != self._reported_tier else []
        groq = chunk.get("x_groq")
        failure = chunk.get("error") or (groq or {}).get("error")
        if failure:
            self.finished = True
            return [*out, self._failed(failure, t)]
        for choice in chunk.get("choices") or ():
            if type(choice) is not dict or choice.get("index", 0) != 0:
                continue
            out.extend(self._choice(choice, t))
        usage = chunk.get("usage")
        if type(usage) is dict:
            out.append(chat_usage(usage, t))
        elif type(groq) is dict and type(groq.get("usage")) is dict:
            out.append(chat_usage(groq["usage"], t))
        if groq is not None or "time_info" in chunk or "timings" in chunk:
            out.extend(timing_extras(chunk, t))
        return out

    def _choice(self, choice: Mapping[str, Any], t: float) -> list[Event]:
        out: list[Event] = []
        delta = choice.get("delta") or {}
        if len(delta) == 1 and "content" in delta:  # nearly every chunk: one piece of the answer
            text = delta["content"]
            if isinstance(text, str) and text:
                out.append(self.delta(t, text))
        elif delta:
            for field in ("reasoning", "reasoning_content"):
                text = delta.get(field)
                if isinstance(text, str) and text:
                    out.append(self.delta(t, text, "reasoning"))
            for field in ("content", "refusal"):
                text = delta.get(field)
                if isinstance(text, str) and text:
                    out.append(self.delta(t, text))
            for fragment in delta.get("tool_calls") or ():
                out.extend(self._tool_fragment(fragment, t))
        finish = choice.get("finish_reason")
        if finish is None:
            return out
        if finish == "error":
            self.finished = True
            out.append(self._failed(choice.get("error") or "the provider stopped the stream", t))
        elif isinstance(finish, str) and finish:
            self.finish = finish
            out.extend(self._tool_calls(t))
        return out

    def _tool_fragment(self, fragment: Mapping[str, Any], t: float) -> list[Event]:
        index = fragment.get("index")
        call_id = fragment.get("id")
        if not isinstance(index, int):  # Cerebras may leave the index out: a new id is a new call
            known = next((i for i, c in self.calls.items() if call_id and c.id == call_id), None)
            index = known if known is not None else (len(self.calls) if call_id or not self.calls
                                                     else max(self.calls))
        function = fragment.get("function") or {}
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = PendingCall(id=str(call_id or ""), name="")
        elif call_id and not call.id:
            call.id = str(call_id)
        name = function.get("name")
        if isinstance(name, str) and name and not call.name:
            call.name = name
        piece = function.get("arguments")
        if isinstance(piece, str) and piece:
            call.arguments += piece
            return [self.delta(t, piece, "tool_args")]
        return []

    def _tool_calls(self, t: float) -> list[Event]:
        if self._sent_calls:
            return []
        self._sent_calls = True
        return [ToolCall(t=t, id=c.id, name=c.name, arguments=c.arguments)
                for _, c in sorted(self.calls.items())]

    def _failed(self, failure: Any, t: float) -> Error:
        kind, message = _error_parts(failure)
        return self.reported_error(t, f"{kind + ': ' if kind else ''}{message}")

    def _done(self, t: float) -> list[Event]:
        self.finished = True
        return [*self._tool_calls(t), Done(t=t, finish_reason=self.finish or "stop")]

    def end(self, t: float) -> list[Event]:
        if self.finished:
            return []
        # Some compatible servers end without [DONE]; once the finish reason arrived, the answer is whole.
        return self._done(t) if self.finish is not None else [self.incomplete(t)]


def _error_parts(failure: Any) -> tuple[str, str]:
    if isinstance(failure, Mapping):
        kind = failure.get("type") or failure.get("code") or ""
        return str(kind), str(failure.get("message") or "no message")
    return "", str(failure)


class OpenAIChatProvider(HTTPProvider):
    """Chat Completions streaming (``POST {base_url}/chat/completions``) with ``include_usage`` on."""

    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = DEFAULT_KEY_ENV["openai"]
    options = OPENAI_OPTIONS

    def __init__(self, tier: TierSpec, **kwargs: Any) -> None:
        super().__init__(tier, **kwargs)
        default_field = "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"
        self.max_tokens_field = str(tier.options.get("max_tokens_field", default_field))
        if self.max_tokens_field not in MAX_TOKENS_FIELDS:
            raise ConfigError(f"tier {tier.name!r}: max_tokens_field must be one of "
                              f"{', '.join(MAX_TOKENS_FIELDS)}", key="max_tokens_field")
        self.reasoning_effort: str | None = tier.options.get("reasoning_effort")

    def endpoint(self) -> str:
        return self.base_url + "/chat/completions"

    def body(self, request: TurnRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.tier.model,
            "messages": chat_messages(request.conversation()),
            "stream": True,
            "stream_options": {"include_usage": True},
            self.max_tokens_field: self.max_tokens(request),
        }
        if self.tier.service_tier:
            body["service_tier"] = self.tier.service_tier
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        if request.tools:
            body["tools"] = chat_tools(request.tools)
        return body

    def decoder(self) -> ChatDecoder:
        return ChatDecoder(self.tier.service_tier)

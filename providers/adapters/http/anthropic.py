"""The ``anthropic`` provider: Messages streaming. Thinking streams as the ``reasoning`` channel, ``tool_use``
input as ``tool_args``; usage is cumulative (replaced, never added)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ...model.errors import ConfigError
from ...model.events import Done, Event, ToolCall, Usage
from ...model.messages import Message, TurnRequest
from ...model.presets import DEFAULT_KEY_ENV
from ...model.tiers import TierSpec
from .decoder import PendingCall, StreamDecoder, StreamProblem, load_json
from .provider import HTTP_OPTIONS, HTTPProvider
from .shapes import tool_parts, usage_number
from .sse import SSEEvent

ANTHROPIC_OPTIONS: Final[dict[str, tuple[type, ...]]] = {
    **HTTP_OPTIONS,
    "thinking_budget": (int,),
    "anthropic_version": (str,),
}
"""Config keys of an ``anthropic`` tier: the shared HTTP ones, ``thinking_budget`` (extended thinking with
that many tokens, below ``max_tokens``) and the ``anthropic-version`` header."""

ANTHROPIC_VERSION: Final[str] = "2023-06-01"
_FINISH: Final[dict[str, str]] = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                                  "tool_use": "tool_calls"}


def anthropic_messages(conversation: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, messages) in Messages form: ``tool_use`` blocks for assistant tool calls, and tool
    results as ``tool_result`` blocks of one user message."""
    system = "\n\n".join(m.content for m in conversation if m.role == "system")
    out: list[dict[str, Any]] = []
    for m in conversation:
        if m.role == "system":
            continue
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.extra.get("tool_call_id", ""),
                     "content": m.content}
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and isinstance(last["content"], list) and all(
                    b.get("type") == "tool_result" for b in last["content"]):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        calls = m.extra.get("tool_calls") if m.role == "assistant" else None
        if calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks.extend({"type": "tool_use", "id": c["id"], "name": c["name"],
                           "input": _arguments(c["arguments"])} for c in calls)
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": m.content})
    return system, out


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools in Messages form (``input_schema``)."""
    out = []
    for tool in tools:
        name, description, parameters = tool_parts(tool)
        out.append({"name": name, "description": description, "input_schema": parameters})
    return out


class AnthropicDecoder(StreamDecoder):
    """Messages events → tokrace events; ``message_stop`` ends it, an ``error`` event fails it."""

    text_keys = (('"text":"', "content"), ('"thinking":"', "reasoning"))

    def __init__(self, asked_tier: str | None) -> None:
        super().__init__(asked_tier)
        self.stop_reason: str | None = None
        self.tools: dict[int, PendingCall] = {}
        self.input = self.output = self.cached = 0

    def feed(self, sse: SSEEvent, t: float) -> list[Event]:
        data = load_json(sse)
        if not isinstance(data, dict):
            raise StreamProblem("protocol", "the server sent something other than a Messages event object; "
                                            "is base_url the Anthropic host (without /v1)?")
        kind = data.get("type") or sse.event
        if kind == "content_block_delta":
            return self._block_delta(data, t)
        if kind == "content_block_start":
            return self._block_start(data, t)
        if kind == "content_block_stop":
            block = self.tools.pop(data.get("index", -1), None)
            if block is None:
                return []
            return [ToolCall(t=t, id=block.id, name=block.name, arguments=block.arguments or "{}")]
        if kind == "message_start":
            usage = (data.get("message") or {}).get("usage") or {}
            out = self.reported_tier(usage.get("service_tier"), t)
            return [*out, self._usage(usage, t)] if usage else out
        if kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if isinstance(reason, str):
                self.stop_reason = reason
            usage = data.get("usage")
            return [self._usage(usage, t)] if isinstance(usage, Mapping) else []
        if kind == "message_stop":
            self.finished = True
            reason = self.stop_reason or "end_turn"
            return [Done(t=t, finish_reason=_FINISH.get(reason, reason))]
        if kind == "error":
            self.finished = True
            err = data.get("error") or {}
            etype = str(err.get("type", "")) if isinstance(err, Mapping) else ""
            message = str(err.get("message", "no message")) if isinstance(err, Mapping) else str(err)
            return [self.reported_error(t, f"{etype + ': ' if etype else ''}{message}",
                                        "overloaded" if etype == "overloaded_error" else "stream")]
        return []  # ping, and any event type added later

    def _block_start(self, data: Mapping[str, Any], t: float) -> list[Event]:
        block = data.get("content_block") or {}
        kind = block.get("type")
        if kind == "tool_use":
            self.tools[data.get("index", 0)] = PendingCall(str(block.get("id", "")), str(block.get("name", "")))
        elif kind == "text" and block.get("text"):
            return [self.delta(t, str(block["text"]))]
        elif kind == "thinking" and block.get("thinking"):
            return [self.delta(t, str(block["thinking"]), "reasoning")]
        return []

    def _block_delta(self, data: Mapping[str, Any], t: float) -> list[Event]:
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            text, channel = delta.get("text"), "content"
        elif kind == "thinking_delta":
            text, channel = delta.get("thinking"), "reasoning"
        elif kind == "input_json_delta":
            text, channel = delta.get("partial_json"), "tool_args"
            block = self.tools.get(data.get("index", -1))
            if block is not None and isinstance(text, str):
                block.arguments += text
        else:
            return []  # signature_delta, citations_delta
        return [self.delta(t, text, channel)] if isinstance(text, str) and text else []

    def _usage(self, usage: Mapping[str, Any], t: float) -> Usage:
        # Cumulative: each count replaces the one before when present. Input is the whole prompt, cache in.
        if "input_tokens" in usage or "cache_read_input_tokens" in usage:
            self.cached = usage_number(usage, "cache_read_input_tokens")
            self.input = (usage_number(usage, "input_tokens") + self.cached
                          + usage_number(usage, "cache_creation_input_tokens"))
        if "output_tokens" in usage:
            self.output = usage_number(usage, "output_tokens")
        return Usage(t=t, input=self.input, output=self.output, cached=self.cached)

    def end(self, t: float) -> list[Event]:
        if self.finished:
            return []
        if self.stop_reason is not None:  # the last event was lost but the answer was whole
            self.finished = True
            return [Done(t=t, finish_reason=_FINISH.get(self.stop_reason, self.stop_reason))]
        return [self.incomplete(t)]


class AnthropicProvider(HTTPProvider):
    """Messages streaming (``POST {base_url}/v1/messages``; ``base_url`` is the host, as in the SDK)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    default_key_env = DEFAULT_KEY_ENV["anthropic"]
    warm_path = "/v1/models"
    options = ANTHROPIC_OPTIONS

    def __init__(self, tier: TierSpec, **kwargs: Any) -> None:
        super().__init__(tier, **kwargs)
        if self.base_url.endswith("/v1"):
            raise ConfigError(f"tier {tier.name!r}: an anthropic base_url is the host without /v1 (as in the "
                              f"official SDK): use {self.base_url[:-3]!r}", key="base_url")
        self.thinking_budget: int | None = tier.options.get("thinking_budget")
        if self.thinking_budget is not None and self.thinking_budget < 1024:
            raise ConfigError(f"tier {tier.name!r}: thinking_budget must be 1024 or more",
                              key="thinking_budget")
        self.version = str(tier.options.get("anthropic_version", ANTHROPIC_VERSION))

    def endpoint(self) -> str:
        return self.base_url + "/v1/messages"

    def auth_headers(self, key: str) -> dict[str, str]:
        headers = {"anthropic-version": self.version}
        if key:
            headers["x-api-key"] = key
        return headers

    def body(self, request: TurnRequest) -> dict[str, Any]:
        system, messages = anthropic_messages(request.conversation())
        max_tokens = self.max_tokens(request)
        body: dict[str, Any] = {"model": self.tier.model, "max_tokens": max_tokens, "messages": messages,
                                "stream": True}
        if system:
            body["system"] = system
        if self.tier.service_tier:
            body["service_tier"] = self.tier.service_tier
        if self.thinking_budget is not None:
            if self.thinking_budget >= max_tokens:
                raise ConfigError(f"tier {self.tier.name!r}: thinking_budget ({self.thinking_budget}) must "
                                  f"be below max_tokens ({max_tokens}); raise max_tokens",
                                  key="thinking_budget")
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)
        return body

    def decoder(self) -> AnthropicDecoder:
        return AnthropicDecoder(self.tier.service_tier)

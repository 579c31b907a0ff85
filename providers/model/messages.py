"""What a lane asks of its model: the messages of a conversation and one turn's request, protocol-neutral."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Message:
    """One message of a conversation sent to a model, in a protocol-neutral form each adapter translates.

    Conventions: an assistant turn that called tools is ``Message("assistant", text, {"tool_calls": [{"id",
    "name", "arguments"}]})``; a tool's result is ``Message("tool", result, {"tool_call_id": id, "name": name})``.
    """

    role: str
    content: str
    extra: dict[str, Any] = field(default_factory=dict)
    """Protocol-specific parts (tool calls, tool results) kept for the adapters that need them."""


@dataclass(slots=True)
class TurnRequest:
    """What a lane asks of its model for one turn."""

    prompt: str
    max_tokens: int = 400
    turn: int = 0
    messages: list[Message] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    scripted_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """For synthetic and replay tiers: the tool calls a scenario scripts for this turn."""

    def conversation(self) -> list[Message]:
        """The messages to send: the history when there is one, else the prompt as one user message."""
        return self.messages or [Message("user", self.prompt)]


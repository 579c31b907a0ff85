"""What every provider is: a tier's settings in, an async stream of events out.

Adapters (synthetic, replay, and the HTTP ones) subclass :class:`Provider`; the race prepares them all before
the start, then asks each for the events of one turn.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final

from .clock import Clock
from .events import Event
from .masking import mask_url, redact

MAX_TOKENS_LIMIT: Final[int] = 200_000
"""The most output tokens a turn may ask for (``max_tokens`` in a config, a scenario or ``--max-tokens``): above
every model's own output limit, and small enough that a lane's events stay a few hundred MB at most."""


class TokraceError(Exception):
    """An error a user can act on; the CLI prints its message as one line."""


class ConfigError(TokraceError):
    """A tier or config setting is wrong; ``key`` names the setting when one is to blame."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float | None = None
    output: float | None = None
    cached_input: float | None = None


PRICE_KEYS: Final[tuple[str, ...]] = ("input", "output", "cached_input")
"""The fields of a price, as a config's ``price`` table names them."""


@dataclass(slots=True)
class TierSpec:
    """One lane's settings, as written in the config (keys never live here, only the variable's name)."""

    name: str
    provider: str
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    service_tier: str | None = None
    preset: str | None = None
    price: Price | None = None
    max_tokens: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    """Provider-specific settings (a synthetic profile, a replay file...)."""

    @classmethod
    def from_public(cls, public: dict[str, Any]) -> TierSpec:
        """A tier rebuilt from its recorded (public) form, leniently: recordings are data, not config."""
        price = public.get("price")
        return cls(
            name=str(public.get("name", "lane")), provider=str(public.get("provider", "")),
            model=str(public.get("model", "")), service_tier=public.get("service_tier"),
            price=Price(**{k: v for k, v in price.items() if k in PRICE_KEYS}) if isinstance(price, dict) else None,
            max_tokens=public.get("max_tokens"),
        )

    def public(self) -> dict[str, Any]:
        """The tier as written into recordings and JSON: never a secret, only the key variable's name."""
        out: dict[str, Any] = {"name": self.name, "provider": self.provider, "model": self.model}
        for key in ("base_url", "api_key_env", "service_tier", "preset", "max_tokens"):
            value = getattr(self, key)
            if value is not None:
                out[key] = mask_url(value) if key == "base_url" else value
        if self.price is not None:
            out["price"] = {k: v for k, v in (("input", self.price.input), ("output", self.price.output),
                                              ("cached_input", self.price.cached_input)) if v is not None}
        out.update(_public(self.options))
        return out


SECRET_WORDS: Final[frozenset[str]] = frozenset({
    "key", "apikey", "secret", "token", "authorization", "auth", "password", "passwd", "cookie", "bearer",
    "credential", "credentials",
})
"""Words of a setting's name that mark its value as a secret (``api_key``, ``x-api-key``, ``access_token``)."""


def _looks_secret(key: str) -> bool:
    lowered = key.lower()
    return not lowered.endswith("_env") and bool(SECRET_WORDS.intersection(re.split(r"[^a-z0-9]+", lowered)))


def _public(value: Any) -> Any:
    """A setting with every secret-named entry left out, however deeply nested (headers, extra bodies), and every
    value shaped like a key masked (``extra_body = { user = "sk-..." }``)."""
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not (isinstance(k, str) and _looks_secret(k))}
    if isinstance(value, list):
        return [_public(v) for v in value]
    if isinstance(value, str):
        return redact(value, ())
    return value


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


class Provider(ABC):
    """Turns a request into an async stream of events, stamped on the lane's clock.

    Subclasses set ``name`` (the config's ``provider`` value). ``prepare`` does anything slow (clients,
    connections, files) before the race starts, so lanes start on equal footing. ``stream`` must yield a
    ``Request`` first and end with ``Done`` or ``Error``; an exception escaping it becomes an ``Error`` event.
    """

    name: str = ""
    plays_whole_lane: bool = False
    """True for providers that replay a lane's whole event history (turns, tools) rather than answer turns."""

    def __init__(self, tier: TierSpec) -> None:
        self.tier = tier

    async def prepare(self, warm: bool = False) -> None:  # noqa: B027 (an optional hook: most need none)
        """Get ready before the start (create clients; with ``warm``, open connections)."""

    @abstractmethod
    def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        """The events of one turn."""

    async def aclose(self) -> None:  # noqa: B027 (an optional hook: most need none)
        """Release clients and files."""

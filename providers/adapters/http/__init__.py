"""The HTTP providers: one adapter per protocol on a shared streaming provider over a socket-stamped transport."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .anthropic import ANTHROPIC_OPTIONS, AnthropicProvider
    from .openai_chat import OPENAI_OPTIONS, OpenAIChatProvider
    from .openai_responses import RESPONSES_OPTIONS, OpenAIResponsesProvider
    from .provider import HTTPProvider

__all__ = [
    "ANTHROPIC_OPTIONS",
    "OPENAI_OPTIONS",
    "RESPONSES_OPTIONS",
    "AnthropicProvider",
    "HTTPProvider",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
]

_HOMES: Final[dict[str, str]] = {
    "ANTHROPIC_OPTIONS": "anthropic",
    "AnthropicProvider": "anthropic",
    "OPENAI_OPTIONS": "openai_chat",
    "OpenAIChatProvider": "openai_chat",
    "RESPONSES_OPTIONS": "openai_responses",
    "OpenAIResponsesProvider": "openai_responses",
    "HTTPProvider": "provider",
}
"""The module each name lives in, imported when the name is first asked for: the registry's lazy import of one
adapter loads only that adapter, and nothing here loads httpx before a provider is made."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(import_module(f"{__name__}.{home}"), name)
    return value

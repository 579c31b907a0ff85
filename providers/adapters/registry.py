"""Which provider names exist, what options each accepts, and how to build one from a tier."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ..model.errors import ConfigError
from ..model.tiers import TierSpec
from .base import Provider


def _synthetic(tier: TierSpec) -> Provider:
    from .synthetic import SyntheticProvider

    return SyntheticProvider(tier)


def _replay(tier: TierSpec) -> Provider:
    from .replay import ReplayProvider

    return ReplayProvider(tier)


def _openai(tier: TierSpec) -> Provider:
    from .http import OpenAIChatProvider

    return OpenAIChatProvider(tier)


def _openai_responses(tier: TierSpec) -> Provider:
    from .http import OpenAIResponsesProvider

    return OpenAIResponsesProvider(tier)


def _anthropic(tier: TierSpec) -> Provider:
    from .http import AnthropicProvider

    return AnthropicProvider(tier)


FACTORIES: Final[dict[str, Callable[[TierSpec], Provider]]] = {
    "synthetic": _synthetic,
    "replay": _replay,
    "openai": _openai,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
}
"""Provider name → constructor."""


def known_providers() -> list[str]:
    """The provider names a config may use."""
    return sorted(FACTORIES)


def provider_options(name: str) -> dict[str, tuple[type, ...]]:
    """The provider-specific config keys of a provider, with their accepted TOML types."""
    if name == "synthetic":
        from .synthetic import SYNTHETIC_OPTIONS

        return SYNTHETIC_OPTIONS
    if name == "replay":
        from .replay import REPLAY_OPTIONS

        return REPLAY_OPTIONS
    if name == "openai":
        from .http import OPENAI_OPTIONS

        return OPENAI_OPTIONS
    if name == "openai-responses":
        from .http import RESPONSES_OPTIONS

        return RESPONSES_OPTIONS
    if name == "anthropic":
        from .http import ANTHROPIC_OPTIONS

        return ANTHROPIC_OPTIONS
    return {}


def create_provider(tier: TierSpec) -> Provider:
    """A provider for a tier; an unknown provider name is a config error listing the known ones."""
    factory = FACTORIES.get(tier.provider)
    if factory is None:
        raise ConfigError(
            f"tier {tier.name!r}: unknown provider {tier.provider!r} (known: {', '.join(known_providers())})")
    return factory(tier)

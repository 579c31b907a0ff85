"""Which provider names exist, what options each accepts, and how to build one from a tier."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .base import ConfigError, Provider, TierSpec


def _synthetic(tier: TierSpec) -> Provider:
    from .synthetic import SyntheticProvider

    return SyntheticProvider(tier)


def _replay(tier: TierSpec) -> Provider:
    from .replay import ReplayProvider

    return ReplayProvider(tier)


FACTORIES: Final[dict[str, Callable[[TierSpec], Provider]]] = {
    "synthetic": _synthetic,
    "replay": _replay,
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
    return {}


def create_provider(tier: TierSpec) -> Provider:
    """A provider for a tier; an unknown provider name is a config error listing the known ones."""
    factory = FACTORIES.get(tier.provider)
    if factory is None:
        raise ConfigError(
            f"tier {tier.name!r}: unknown provider {tier.provider!r} (known: {', '.join(known_providers())})")
    return factory(tier)

"""A tier: one lane's settings as the config writes them, its price, and the public form recordings keep."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .masking import mask_url, redact
from .printable import one_line

MAX_TOKENS_LIMIT: Final[int] = 200_000
"""The most output tokens a turn may ask for (``max_tokens`` in a config, a scenario or ``--max-tokens``): above
every model's own output limit, and small enough that a lane's events stay a few hundred MB at most."""




@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float | None = None
    output: float | None = None
    cached_input: float | None = None
    cache_write: float | None = None
    """Input written to a prompt cache (Anthropic's cache creation); at the input price when not set."""


PRICE_KEYS: Final[tuple[str, ...]] = ("input", "output", "cached_input", "cache_write")
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

    @property
    def raced_on(self) -> str:
        """The provider the lane raced on: a replay names its recording's own (the replay bar says it replays)."""
        recorded = self.options.get("recorded_provider") if self.provider == "replay" else None
        return recorded if isinstance(recorded, str) and recorded else self.provider

    @property
    def reference(self) -> bool:
        """Whether the race's speed-ups are measured against this lane: a trace as recorded, raced against itself
        re-timed on tiers (``tokrace replay TRACE --on``), is what every comparison is about."""
        return self.options.get("reference") is True

    @classmethod
    def from_public(cls, public: dict[str, Any]) -> TierSpec:
        """A tier rebuilt from its recorded (public) form, leniently: recordings are data, not config."""
        price = public.get("price")
        service_tier = public.get("service_tier")
        return cls(  # names from a file are shown: one safe line each (docs/faults.md#text-from-outside)
            name=one_line(str(public.get("name", "lane"))), provider=one_line(str(public.get("provider", ""))),
            model=one_line(str(public.get("model", ""))),
            service_tier=one_line(service_tier) if isinstance(service_tier, str) else None,
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
                                              ("cached_input", self.price.cached_input),
                                              ("cache_write", self.price.cache_write)) if v is not None}
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


def reference_name(tiers: Sequence[TierSpec]) -> str | None:
    """The name of the lane every speed-up is measured against, when a lane is marked so (see
    :attr:`TierSpec.reference`); else ``None``: against the slowest."""
    return next((t.name for t in tiers if t.reference), None)


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


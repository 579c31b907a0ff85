"""Presets: a tier can say ``preset = "groq"`` plus a model; the preset brings base URL, protocol and key variable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .errors import ConfigError


@dataclass(frozen=True, slots=True)
class Preset:
    """What a preset fills in (a tier's own keys win)."""

    provider: str
    base_url: str
    api_key_env: str | None


PRESETS: Final[dict[str, Preset]] = {
    "openai": Preset("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic": Preset("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
    "cerebras": Preset("openai", "https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"),
    "groq": Preset("openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "openrouter": Preset("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "ollama": Preset("openai", "http://localhost:11434/v1", None),
    "vllm": Preset("openai", "http://localhost:8000/v1", None),
    "llamacpp": Preset("openai", "http://localhost:8080/v1", None),
    "lmstudio": Preset("openai", "http://localhost:1234/v1", None),
}
"""The known presets; OpenAI's base URL ends in ``/v1``, Anthropic's is the host (as in the official SDKs)."""


DEFAULT_KEY_ENV: Final[dict[str, str]] = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
"""The key variable a provider reads when a tier names none (as the official SDKs do)."""


def apply_preset(raw: dict[str, Any]) -> dict[str, Any]:
    """A tier's raw table with its preset's values filled in where the tier did not set them."""
    name = raw.get("preset")
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None:
        raise ConfigError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})")
    out = dict(raw)
    out.setdefault("provider", preset.provider)
    out.setdefault("base_url", preset.base_url)
    if preset.api_key_env is not None:
        out.setdefault("api_key_env", preset.api_key_env)
    return out

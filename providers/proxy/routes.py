"""Where the proxy forwards a request: the configured upstreams (Anthropic, OpenAI, or one URL or tier for all), chosen
by the request's path, never by its Host header (docs/design.md §13)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from ..model.errors import ConfigError
from .http1 import Head

ANTHROPIC_URL: Final[str] = "https://api.anthropic.com"
OPENAI_URL: Final[str] = "https://api.openai.com"

GENERATION_PATHS: Final[dict[str, str]] = {
    "/v1/messages": "anthropic", "/messages": "anthropic",
    "/v1/chat/completions": "openai", "/chat/completions": "openai",
    "/v1/responses": "openai-responses", "/responses": "openai-responses",
}
"""The paths whose answers are model calls, and the protocol each speaks (the other paths are relayed only)."""


@dataclass(frozen=True, slots=True)
class Upstream:
    """One place the proxy forwards to: scheme, host, port and the path its API sits under."""

    name: str
    scheme: str
    host: str
    port: int
    base_path: str = ""
    auth: tuple[tuple[str, str], ...] = ()
    """Headers that replace the client's auth (only for ``--upstream TIER``, which asks for that tier's key)."""

    @classmethod
    def parse(cls, url: str, name: str = "", auth: tuple[tuple[str, str], ...] = ()) -> Upstream:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--upstream {url!r}: expected anthropic, openai, a tier or an http(s):// URL")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ConfigError(f"--upstream {url!r}: a bad port") from None
        base = parts.path.rstrip("/")
        return cls(name or url, parts.scheme, parts.hostname, port, base, auth)

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def authority(self) -> str:
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    def target(self, path: str) -> str:
        """The request target upstream for the client's ``path`` (with its query): the base path before it, one
        ``/v1`` when both have it (an OpenAI base_url ends in ``/v1``, the client's paths start with it)."""
        base = self.base_path
        if base.endswith("/v1") and (path == "/v1" or path.startswith(("/v1/", "/v1?"))):
            base = base[:-3]
        return base + path

    def public(self) -> str:
        """The upstream as shown and recorded: no credentials, no query."""
        return f"{self.scheme}://{self.authority}{self.base_path}"


@dataclass(frozen=True, slots=True)
class Routes:
    """The upstreams: one for everything (``--upstream URL|TIER``), else Anthropic's and OpenAI's by path."""

    anthropic: Upstream
    openai: Upstream

    @classmethod
    def default(cls) -> Routes:
        return cls(Upstream.parse(ANTHROPIC_URL, "anthropic"), Upstream.parse(OPENAI_URL, "openai"))

    @classmethod
    def single(cls, upstream: Upstream) -> Routes:
        return cls(upstream, upstream)

    def pick(self, path: str, head: Head) -> Upstream:
        """Anthropic's paths (and requests with Anthropic's headers) go to its upstream; the rest to OpenAI's."""
        bare = path.split("?", 1)[0].rstrip("/")
        kind = GENERATION_PATHS.get(bare) or GENERATION_PATHS.get(bare.removesuffix("/count_tokens"))
        if kind == "anthropic" or (kind is None and (head.get("anthropic-version") or head.get("x-api-key"))):
            return self.anthropic
        return self.openai


def protocol_of(path: str) -> str | None:
    """The protocol of a model call's path (``anthropic``, ``openai``, ``openai-responses``), else ``None``."""
    return GENERATION_PATHS.get(path.split("?", 1)[0].rstrip("/"))

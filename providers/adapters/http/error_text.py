"""What a failure says: a provider's error body read in any of its usual shapes, cut to one line, and the words
for a failed attempt; a base URL refused before it is used."""

from __future__ import annotations

import json
import re
from typing import Final
from urllib.parse import urlsplit

import httpx

from ...model.errors import ConfigError
from ...model.masking import mask_url, url_has_userinfo

_MAX_ERROR_TEXT: Final[int] = 240
_SPACES: Final[re.Pattern[str]] = re.compile(r"\s+")


def excerpt(text: str, limit: int = _MAX_ERROR_TEXT) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    one = _SPACES.sub(" ", text).strip()
    return one if len(one) <= limit else one[: limit - 1] + "…"


def error_body(raw: bytes) -> tuple[str, str]:
    """The (type, message) of a provider's JSON error body, whichever of the usual shapes it has."""
    text = raw.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return "", excerpt(text) if text.strip() else ""
    if not isinstance(data, dict):
        return "", excerpt(text)
    err = data.get("error", data)
    if isinstance(err, str):
        return "", excerpt(err)
    if not isinstance(err, dict):
        return "", excerpt(text)
    kind = err.get("type") or err.get("code") or ""
    message = err.get("message") or err.get("detail") or data.get("message") or ""
    return str(kind), excerpt(str(message))


async def read_error_body(response: httpx.Response, limit: int = 64_000) -> bytes:
    """An error response's body (enough of it to find the message), closing the response."""
    raw = b""
    try:
        async for chunk in response.aiter_bytes():
            raw += chunk
            if len(raw) >= limit:
                break
    except httpx.HTTPError:
        pass
    finally:
        await response.aclose()
    return raw


def retry_reason(exc: httpx.TransportError) -> str:
    """A few words for a failed attempt, as a retry segment's label."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if refused(exc) else "cannot connect"
    if isinstance(exc, httpx.TimeoutException):
        return "no response in time"
    return "connection failed"


def refused(exc: BaseException) -> bool:
    """Whether a connection failure was a refusal, wherever in the chain of causes the socket said so."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError) or "refused" in str(e).lower():
            return True
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
    return False


def check_base_url(tier: str, url: str) -> None:
    """Refuse a base URL that is not http(s), or that carries a key as ``user:password@`` (httpx would send it as
    Basic auth, and the URL is shown and recorded): the key belongs in the variable ``api_key_env`` names."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"tier {tier!r}: base_url must start with http:// or https:// (got {mask_url(url)!r})",
                          key="base_url")
    parts = urlsplit(url)
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        what = "a query string" if parts.query or url.endswith("?") else "a fragment"
        raise ConfigError(f"tier {tier!r}: base_url carries {what} ({mask_url(url)}); the request path is added after "
                          "it, so it would be sent somewhere else: put parameters such as api-version in the tier's "
                          "query table (query = { api-version = \"...\" })", key="base_url")
    if url_has_userinfo(url):
        raise ConfigError(f"tier {tier!r}: base_url carries a user name or key before the host "
                          f"({mask_url(url)}); keys never go in the URL: put the key in an environment variable "
                          "and name it with api_key_env", key="base_url")

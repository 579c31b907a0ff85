"""Keeping secrets out of everything tokrace shows or writes: URLs, events, recordings, messages.

A secret is known by its value (the key read from ``api_key_env``, every header value a tier sends, the secret
query parameters of its ``base_url``) or by its shape (an ``Authorization`` value, a bearer or Basic token, the
prefixes providers give their keys: ``sk-``, ``gsk_``, ``AIza``...). Either is replaced by ``[redacted]``.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from .events import Delta, Error, Event, Extra, Headers, Request, Segment, ToolCall

MASK: Final[str] = "[redacted]"

MIN_SECRET_LEN: Final[int] = 6
"""Shorter values are not masked by value (a header ``x-debug: 1`` would blank every 1)."""

MIN_HEADER_SECRET_LEN: Final[int] = 8
"""A header value is masked wherever it comes back from this length on (shorter ones are flags, not keys)."""

SECRET_PARAM_WORDS: Final[frozenset[str]] = frozenset({
    "key", "apikey", "secret", "token", "auth", "authorization", "password", "passwd", "pwd", "pass", "sig",
    "signature", "credential", "credentials", "session", "code", "access", "bearer",
})
"""Words of a query parameter's name that make its value a secret (``key``, ``api_key``, ``access_token``,
``X-Amz-Signature``, ``sig``)."""

_CREDENTIALS: Final[tuple[re.Pattern[str], ...]] = (
    re.compile(r"(?i)((?:proxy-)?authorization|x-api-key|x-goog-api-key|api[-_]?key)((?:\\?[\"'])?\s*[:=]\s*"
               r"(?:\\?[\"'])?(?:(?:bearer|basic|token)\s+)?)(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\b(bearer)(\s+)(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\b(basic)(\s+)(?=[A-Za-z]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"),
)
"""Credentials recognisable by their context (an Authorization or API-key header's value, a bearer or Basic
token), masked even when no key variable names them; the group before the token is kept."""

_CREDENTIAL_WORDS: Final[tuple[str, ...]] = ("authorization", "api", "bearer", "basic")
_I_LOOKALIKES: Final[tuple[str, ...]] = ("\u0130", "\u0131")
"""A context pattern can match only a text holding one of its words (lower-cased), or a character that
case-insensitive matching takes for their i (İ, ı). Without either, the patterns are not run: they cost ~10 µs
per recorded line, the rest of the line ~2 µs."""

_KEY_SHAPE: Final[re.Pattern[str]] = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}"  # OpenAI sk-proj-, Anthropic sk-ant-, OpenRouter sk-or-
    r"|(?:sk|gsk|fw)_[A-Za-z0-9]{20,}|(?:csk|xai|pplx)-[A-Za-z0-9]{20,}"  # Groq, Fireworks, Cerebras, xAI...
    r"|(?:nvapi|glpat)-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|hf_[A-Za-z0-9]{30,}|AIza[0-9A-Za-z_-]{30,})")
"""The shapes of provider keys (OpenAI and Anthropic ``sk-``, Groq ``gsk_``, Cerebras ``csk-``, xAI, NVIDIA,
GitHub, GitLab, Hugging Face, Google ``AIza``...): masked wherever they appear, whoever sent them. Specific
enough that code and prose (``pk_user_id``, ``or_else``) never match."""

_KEY_PREFIX_HINTS: Final[tuple[str, ...]] = ("sk", "fw_", "csk-", "xai-", "pplx-", "nvapi-", "glpat-", "gh",
                                            "hf_", "AIza")

LONG_TEXT_CHARS: Final[int] = 1 << 16
"""A text longer than this is looked at by :func:`shapes_free` a window of this many characters at a time (each
with the end of the one before, as long as the longest hint): never lower-cased whole (a huge answer copied once
more), and never searched by one regular expression of every hint in any case (110 ns a character: half a second
for a misbehaving server's 4 MB event, and the recorder looks again)."""

_HINT_REACH: Final[int] = max(map(len, (*_CREDENTIAL_WORDS, *_KEY_PREFIX_HINTS, "://"))) - 1
"""How far back a window starts into the one before it: a hint cut by a window's end is whole in the next."""

_URL_USERINFO: Final[re.Pattern[str]] = re.compile(r"(?i)\b(https?://)[^/\s@\"'<>]+@")
_URL_PARAM: Final[re.Pattern[str]] = re.compile(r"([?&;])([A-Za-z0-9_.\-]+)=([^&#\s\"'<>\\]+)")


def _secret_param(name: str) -> bool:
    return bool(SECRET_PARAM_WORDS.intersection(re.split(r"[^a-z0-9]+", name.lower())))


def url_has_userinfo(url: str) -> bool:
    """Whether a URL carries ``user:password@`` (which httpx would send as a Basic-auth header)."""
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def mask_url(url: str) -> str:
    """``url`` safe to show: userinfo and the values of secret-looking query parameters masked; unchanged when
    it holds neither."""
    if "@" not in url and not ("?" in url or ";" in url or "&" in url):
        return url
    text = _URL_USERINFO.sub(rf"\g<1>{MASK}@", url)
    return _URL_PARAM.sub(_param_repl, text)


def _param_repl(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}={MASK}" if _secret_param(m.group(2)) else m.group(0)


def url_secrets(url: str | None) -> list[str]:
    """The values of a URL's secret query parameters and userinfo (to mask wherever they come back)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    out = [v for k, v in parse_qsl(parts.query, keep_blank_values=False) if _secret_param(k)]
    if parts.password:
        out.append(parts.password)
    return [v for v in out if len(v) >= MIN_SECRET_LEN]


def base64_forms(secret: str) -> list[str]:
    """The parts of ``base64(anything + secret + anything)`` that depend on the secret alone, at each of the three
    alignments: masking them hides a secret sent in its Basic-auth form (``base64("user:" + key)``) or any other
    base64 wrapping, whatever came before it."""
    raw = secret.encode("utf-8")
    out = []
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode("ascii")
        core = encoded[-(-8 * pad // 6) : 8 * (pad + len(raw)) // 6]
        if len(core) >= MIN_SECRET_LEN + 2:
            out.append(core)
    return out


def with_more_secrets(secrets: Sequence[str], values: Iterable[str]) -> list[str] | None:
    """``secrets`` with ``values`` added (each at least :data:`MIN_SECRET_LEN` long, and its base64 forms), longest
    first as masking wants them; ``None`` when none of them is new."""
    found = {v for v in values if len(v) >= MIN_SECRET_LEN} - set(secrets)
    if not found:
        return None
    found.update(form for value in list(found) for form in base64_forms(value))
    return sorted(set(secrets) | found, key=len, reverse=True)


def looks_like_key(text: str) -> bool:
    """Whether a value has a provider key's shape."""
    return bool(_KEY_SHAPE.search(text))


def shapes_free(text: str) -> bool:
    """Whether ``text`` holds none of what makes :func:`redact` look for shapes (a credential word in any case, a
    character taken for its i, a key prefix, a URL or a parameter): then only secret values could change it."""
    if len(text) > LONG_TEXT_CHARS:
        return all(_window_free(text[max(at - _HINT_REACH, 0):at + LONG_TEXT_CHARS])
                   for at in range(0, len(text), LONG_TEXT_CHARS))
    return _window_free(text)


def _window_free(text: str) -> bool:
    """:func:`shapes_free` for a text of at most :data:`LONG_TEXT_CHARS` (plus :data:`_HINT_REACH`)."""
    lowered = text.lower()
    for word in _CREDENTIAL_WORDS:
        if word in lowered:
            return False
    for ch in _I_LOOKALIKES:
        if ch in text:
            return False
    for hint in _KEY_PREFIX_HINTS:
        if hint in text:
            return False
    return "://" not in text and "=" not in text


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret value, every URL secret and anything shaped like a credential, masked."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if shapes_free(text):  # nearly every streamed piece: what follows would leave it as it is
        return text  # (substring scans: a regular expression of every trigger cost 60 µs on a 900-character read)
    # Plain loops rather than any(...) over generators: the recorder runs this on every line it writes.
    lowered = text.lower()
    credential = False
    for word in _CREDENTIAL_WORDS:
        if word in lowered:
            credential = True
            break
    else:
        for ch in _I_LOOKALIKES:
            if ch in text:
                credential = True
                break
    if credential:
        for pattern in _CREDENTIALS:
            text = pattern.sub(rf"\g<1>\g<2>{MASK}", text)
    for hint in _KEY_PREFIX_HINTS:
        if hint in text:
            text = _KEY_SHAPE.sub(MASK, text)
            break
    if "://" in text or "=" in text:
        text = mask_url(text)
    return text


class Masker:
    """Masks the text fields of a lane's events before anyone sees them (the screen, the recording, the JSON).

    ``shapes`` also masks credential shapes and URL secrets (for lanes that talk to servers, which may echo
    anything back); a masker with neither secrets nor shapes passes events through untouched."""

    __slots__ = ("_clean", "active", "secrets", "shapes")

    def __init__(self, secrets: Sequence[str] = (), shapes: bool = True) -> None:
        self.secrets = list(secrets)
        self.shapes = shapes
        self.active = bool(self.secrets) or shapes
        self._clean: set[str] = set()
        """Delta texts found to hold nothing to mask (:meth:`deltas`)."""

    def add(self, values: Sequence[str]) -> None:
        """Mask these values too from now on (each at least :data:`MIN_SECRET_LEN` long, and its base64 forms):
        secrets seen only as a session runs, such as the keys a proxied client sends."""
        secrets = with_more_secrets(self.secrets, values)
        if secrets is not None:
            self.secrets = secrets
            self.active = True
            self._clean.clear()  # a text found clean before may hold one of them

    def text(self, text: str) -> str:
        if self.shapes:
            return redact(text, self.secrets)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def deltas(self, deltas: Sequence[Delta]) -> Sequence[Delta]:
        """Each delta as :meth:`__call__` gives it, for deltas handed over together: a short text seen before to
        hold nothing to mask is not looked at again (a stream repeats its words; at most :data:`CLEAN_TEXTS_KEPT`
        of at most :data:`CLEAN_TEXT_CHARS` are remembered, then it starts over). The same sequence when nothing
        was masked."""
        if not self.active:
            return deltas
        clean = self._clean
        out: list[Delta] | None = None
        for at, delta in enumerate(deltas):
            text = delta.text
            if text in clean:
                continue
            masked = self.text(text)
            if masked == text:
                if len(text) <= CLEAN_TEXT_CHARS:
                    if len(clean) >= CLEAN_TEXTS_KEPT:
                        clean.clear()
                    clean.add(text)
                continue
            if out is None:
                out = list(deltas)
            out[at] = dataclasses.replace(delta, text=masked)
        return deltas if out is None else out

    def __call__(self, event: Event) -> Event:
        if not self.active:
            return event
        field = _TEXT_FIELDS.get(type(event))
        if field is not None:
            value = getattr(event, field)
            masked = self.text(value)
            return event if masked == value else dataclasses.replace(event, **{field: masked})  # type: ignore[arg-type]
        if isinstance(event, Extra):
            data = _mask_data(event.data, self)
            return event if data == event.data else dataclasses.replace(event, data=data)
        return event


CLEAN_TEXTS_KEPT: Final[int] = 4096
CLEAN_TEXT_CHARS: Final[int] = 32
"""How many distinct delta texts, each of at most how many characters, a masker remembers as holding nothing to
mask (a few hundred KB at most)."""

_TEXT_FIELDS: Final[dict[type[Any], str]] = {
    Delta: "text", Error: "message", Request: "endpoint", Segment: "label", ToolCall: "arguments",
    Headers: "request_id",
}
"""The one free-text field of each event kind that a server can fill."""


def _mask_data(value: Any, masker: Masker) -> Any:
    if isinstance(value, str):
        return masker.text(value)
    if isinstance(value, dict):
        return {k: _mask_data(v, masker) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_data(v, masker) for v in value]
    return value

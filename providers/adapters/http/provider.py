"""What the HTTP providers share: clients made before the race, socket-time stamps, retries, error messages.

Each protocol adapter (OpenAI Chat, OpenAI Responses, Anthropic) says how to build its request and how to
decode its stream; this module sends it, stamps every event when its bytes are read, measures ``connect`` with
httpx's ``trace`` extension, retries like the official SDKs, and turns every failure into one line a user can
act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
import os
import random
import re
import socket
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar, cast
from urllib.parse import urlsplit

import httpx

from ...metrics.turn import PACED_SOURCE, FirstSentence
from ...model.errors import ConfigError, TokraceError
from ...model.events import Delta, Done, Error, Event, Extra, Headers, Request, Segment
from ...model.masking import mask_url, url_has_userinfo
from ...model.messages import TurnRequest
from ...model.tiers import TierSpec
from ...timing.clock import Clock
from ..base import Provider
from . import backend as socket_reads
from .backend import StampedBackend
from .sse import MAX_EVENT_BYTES, EventTooLarge, SSEEvent, SSEParser
from .text_events import TextFrames
from .transport import LeanTransport, stamped_reads

HTTP_OPTIONS: Final[dict[str, tuple[type, ...]]] = {
    "headers": (dict,),
    "extra_body": (dict,),
    "connect_timeout_s": (int, float),
    "read_timeout_s": (int, float),
    "max_retries": (int,),
    "turn_timeout_s": (int, float),
    "exact_reads": (bool,),
}
"""Config keys every HTTP tier accepts: extra request headers (never keys), extra JSON body fields, timeouts
(``read_timeout_s`` bounds the silence between two chunks, ``turn_timeout_s`` a whole turn), how many times
to retry, and ``exact_reads`` (read every packet on its own even when packets come fast, see :mod:`.transport`)."""

DEFAULT_MAX_RETRIES: Final[int] = 2
MAX_RETRY_AFTER_S: Final[float] = 60.0
"""A ``retry-after`` up to this is waited as asked; longer or missing, the SDKs' backoff is used instead."""
CONNECT_TIMEOUT_S: Final[float] = 5.0
READ_TIMEOUT_S: Final[float] = 600.0
"""The official SDKs' defaults: 5 s to connect, 600 s overall (here: of silence between two chunks)."""
TURN_TIMEOUT_S: Final[float] = 1800.0
"""The longest one turn may stream (request to final event) before the lane ends with a timeout: a server that
streams forever must not keep a bench running forever."""
MAX_TIMEOUT_S: Final[float] = 86_400.0
MAX_RETRIES: Final[int] = 10
"""Above these a setting is a typo (a day; ten retries)."""

RETRY_STATUSES: Final[frozenset[int]] = frozenset({408, 409, 429})
"""Retried before any byte of the stream, like the SDKs; every status from 500 up is retried too."""

RUNAWAY_FACTOR: Final[int] = 4
RUNAWAY_SLACK: Final[int] = 256
"""A turn that streams more text chunks than 4 × max_tokens + 256 is ended: a token is at least a chunk on every
server seen, so that is a server ignoring the limit, never a long answer."""

_OPENING: Final[int] = 2048
"""How much of a body is kept to say what it was when it held no event."""

_NOT_STREAMS: Final[tuple[str, ...]] = ("json", "html", "xml")
"""Content types of a response that cannot be an event stream (an error body, a web page)."""

_SECRET_HEADERS: Final[frozenset[str]] = frozenset(
    {"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})
_MAX_ERROR_TEXT: Final[int] = 240
_SPACES: Final[re.Pattern[str]] = re.compile(r"\s+")


class StreamProblem(Exception):
    """A stream said something the adapter cannot read; becomes an ``Error`` event of ``kind``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


_FINAL: Final[tuple[type[Event], ...]] = (Done, Error)
"""The events that end a turn (a tuple: ``isinstance`` takes it faster than ``Done | Error``)."""

_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The JSON scanner under ``json.loads``, without its per-call set-up: half the cost on a small object."""


def load_json(sse: SSEEvent) -> Any:
    """The JSON of an event's data, or a :class:`StreamProblem` quoting the start of what came instead."""
    data = sse.data
    try:
        value, end = _SCAN(data, 0)
        if end == len(data):
            return value
    except (StopIteration, ValueError):  # not a value at its very start: json.loads says what it is
        pass
    try:  # surrounding white space, something after the value, malformed: exactly as json.loads reads it
        return json.loads(data)
    except json.JSONDecodeError:
        raise StreamProblem("protocol", f"the server sent malformed JSON ({excerpt(sse.data, 60)!r}); "
                                        "the stream is garbled, try again") from None


def excerpt(text: str, limit: int = _MAX_ERROR_TEXT) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    one = _SPACES.sub(" ", text).strip()
    return one if len(one) <= limit else one[: limit - 1] + "…"


@dataclass(slots=True)
class PendingCall:
    """A tool call whose arguments are still streaming, in any protocol."""

    id: str
    name: str
    arguments: str = ""
    sent: bool = False
    """Whether its ``ToolCall`` event has gone out."""


class StreamDecoder(ABC):
    """Turns one response's SSE events into tokrace events, keeping whatever state the protocol needs."""

    text_keys: tuple[tuple[str, str], ...] = ()
    """``("\"key\":\"", channel)`` for each JSON key whose string, alone in an event, is all the event says: a
    piece of text of that channel, and nothing else changes (see :class:`TextFrames`)."""

    def __init__(self, asked_tier: str | None) -> None:
        self.asked_tier = asked_tier
        self.finished = False
        """True once the protocol's terminal event (or an error) was seen."""
        self.deltas = 0
        """How many pieces of generated text arrived (for error messages)."""
        self._reported_tier: str | None = None

    @abstractmethod
    def feed(self, sse: SSEEvent, t: float) -> list[Event]:
        """The events an SSE event stands for, stamped ``t``; a terminal one ends in ``Done`` or ``Error``."""

    def end(self, t: float) -> list[Event]:
        """What the end of the byte stream means (by default: it came too early)."""
        return [] if self.finished else [self.incomplete(t)]

    def incomplete(self, t: float) -> Error:
        return Error(t=t, error="incomplete",
                     message=f"the stream ended without its final event after {self.deltas} text chunks; "
                             "the answer may be cut short, try again")

    def reported_error(self, t: float, said: str, error: str = "stream") -> Error:
        """The error event a server sent mid-stream, with what it said."""
        return Error(t=t, error=error, message=f"the server reported an error mid-stream after {self.deltas} text "
                                               f"chunks: {said}; try again")

    def delta(self, t: float, text: str, channel: str = "content") -> Delta:
        self.deltas += 1
        return Delta(t=t, text=text, channel=channel)  # type: ignore[arg-type]

    def reported_tier(self, got: Any, t: float) -> list[Event]:
        """The service tier asked for and the one the server says it used once per change."""
        if not isinstance(got, str) or not got or got == self._reported_tier:
            return []
        self._reported_tier = got
        return [Extra(t=t, source="service_tier", data={"asked": self.asked_tier or "", "got": got})]


def decode(decoder: StreamDecoder, sse: SSEEvent, t: float) -> list[Event]:
    """``decoder.feed``, where a chunk of a shape the decoder does not expect (a number where a list belongs, a
    list where an object does) is a :class:`StreamProblem` quoting it, never a Python error."""
    try:
        return decoder.feed(sse, t)
    except StreamProblem:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, RecursionError):
        raise StreamProblem("protocol", f"the server sent a chunk tokrace cannot read: {excerpt(sse.data, 120)!r}; "
                                        "is base_url an endpoint of this tier's protocol? try again") from None


class _Pacing:
    """A turn on a stream that may pace its reads (see :mod:`.transport`), watching the turn's events as they go
    out. Pacing is allowed only once every moment a figure takes from one token has passed, each read per packet:
    the first token (TTFT), the first answer text (``ttfa_s``, and where thinking ends) and the end of the answer's
    first sentence (``ttfs_s``, found exactly as the metrics find it). A turn whose answer never completes a
    sentence is never paced. Once a paced read brought bytes, that is said once, as an ``extra`` event
    (:data:`PACED_SOURCE`): the turn's inter-token gaps were not measured (``itl_ms`` null); the last token's
    time, e2e and the rates stay the packets' own stamps."""

    __slots__ = ("allowed", "before", "sentence", "stream")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.allowed = False
        self.before: int = stream.paced_reads
        self.sentence = FirstSentence()

    def see(self, event: Event) -> Extra | None:
        """Called with each event before it goes out: the ``extra`` event to send before it once reads were paced
        (then there is nothing more to watch)."""
        if not self.allowed:
            if isinstance(event, Delta) and event.channel == "content" and event.text:
                self.sentence.feed(event.t, event.text)
                if self.sentence.at is not None:
                    self.allowed = True
                    self.stream.allow_pacing()
            return None
        if self.stream.paced_reads == self.before:
            return None
        return Extra(t=event.t, source=PACED_SOURCE, data={"paced_ms": round(socket_reads.PACE_S * 1000.0, 3)})

    def see_many(self, deltas: list[Delta]) -> tuple[int, Extra | None]:
        """:meth:`see` for the deltas of reads handed over together, in order: (where in them, the ``extra`` event to
        send before that one), or (0, None). Reads are paced (and counted) only by the event loop's own looks,
        between two hand-overs, never while one hand-over's reads are turned into events: once pacing was allowed,
        whether reads were paced is the same for every delta of the list, so it is looked at once."""
        for at, delta in enumerate(deltas):
            allowed = self.allowed
            paced = self.see(delta)
            if paced is not None:
                return at, paced
            if allowed:
                break
        return 0, None


class _TurnLimits:
    """What ends a turn that will not end by itself: its deadline (``turn_timeout_s``), and text far past
    ``max_tokens`` (more text chunks than :data:`RUNAWAY_FACTOR` × ``max_tokens`` + :data:`RUNAWAY_SLACK`)."""

    __slots__ = ("deadline", "max_chunks", "max_tokens")

    def __init__(self, deadline: float, max_tokens: int) -> None:
        self.deadline = deadline
        self.max_tokens = max_tokens
        self.max_chunks = RUNAWAY_FACTOR * max_tokens + RUNAWAY_SLACK

    def late(self, provider: HTTPProvider, t: float, now: float, deltas: int) -> Error | None:
        """The error for a turn past its deadline at ``now`` (checked as each chunk of bytes arrives)."""
        if now <= self.deadline:
            return None
        return Error(t=t, error="timeout", message=(
            f"the turn was still streaming after {provider.turn_timeout:g} s ({deltas} text chunks); ended "
            "it there: raise turn_timeout_s for longer answers"))

    def runaway(self, t: float, deltas: int) -> Error:
        """The error for a turn past :attr:`max_chunks`."""
        return Error(t=t, error="runaway", message=(
            f"the server kept streaming far past max_tokens ({deltas} text chunks for max_tokens "
            f"{self.max_tokens}); ended the lane there: the server ignores the limit, check the model and "
            "its max_tokens_field"))


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return float(raw_ms) / 1000.0
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - (time.time() if now is None else now)


def backoff_s(retries: int, rng: Callable[[], float] = random.random) -> float:
    """The SDKs' backoff: 0.5 s doubling per retry already made, at most 8 s, minus up to 25 % jitter."""
    return min(0.5 * 2.0**retries, 8.0) * (1.0 - 0.25 * rng())


def retry_delay_s(headers: Mapping[str, str], retries: int,
                  backoff: Callable[[int], float] = backoff_s) -> float:
    """How long to wait before the next attempt: ``retry-after`` when it is in (0, 60] s, else the backoff."""
    asked = retry_after_s(headers)
    if asked is not None and 0 < asked <= MAX_RETRY_AFTER_S:
        return asked
    return backoff(retries)


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an HTTP error is worth another attempt (``x-should-retry`` overrides the status rule)."""
    forced = headers.get("x-should-retry")
    if forced == "true":
        return True
    if forced == "false":
        return False
    return status in RETRY_STATUSES or status >= 500


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


def _sse_like(opening: bytes) -> bool:
    """Whether a body's first bytes could be an event stream (or are nothing at all)."""
    start = opening.removeprefix(b"\xef\xbb\xbf").lstrip()
    return not start or start.startswith((b"data", b"event", b":", b"id", b"retry"))


def check_base_url(tier: str, url: str) -> None:
    """Refuse a base URL that is not http(s), or that carries a key as ``user:password@`` (httpx would send it as
    Basic auth, and the URL is shown and recorded): the key belongs in the variable ``api_key_env`` names."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"tier {tier!r}: base_url must start with http:// or https:// (got {mask_url(url)!r})",
                          key="base_url")
    if url_has_userinfo(url):
        raise ConfigError(f"tier {tier!r}: base_url carries a user name or key before the host "
                          f"({mask_url(url)}); keys never go in the URL: put the key in an environment variable "
                          "and name it with api_key_env", key="base_url")


class HTTPProvider(Provider):
    """An adapter that streams from an HTTP API; subclasses give the protocol: request shape, stream decoder.

    ``transport`` replaces the network (tests pass ``httpx.MockTransport``); ``backoff`` replaces the SDKs'
    retry backoff (tests make it instant).
    """

    default_base_url: str = ""
    default_key_env: str | None = None
    warm_path: str = "/models"
    options: dict[str, tuple[type, ...]] = HTTP_OPTIONS

    def __init__(self, tier: TierSpec, *, transport: httpx.AsyncBaseTransport | None = None,
                 backoff: Callable[[int], float] = backoff_s) -> None:
        super().__init__(tier)
        opts = tier.options
        self.base_url = (tier.base_url or self.default_base_url).rstrip("/")
        check_base_url(tier.name, self.base_url)
        self.key_env = tier.api_key_env or (self.default_key_env if tier.base_url is None else None)
        headers = dict(opts.get("headers", {}))
        self.extra_headers: dict[str, str] = {str(k): str(v) for k, v in headers.items()}
        for name in self.extra_headers:
            if name.lower() in _SECRET_HEADERS:
                raise ConfigError(f"tier {tier.name!r}: headers.{name} would put a secret in the config; "
                                  "name the key's environment variable with api_key_env instead",
                                  key="headers")
        self.extra_body: dict[str, Any] = dict(opts.get("extra_body", {}))
        self.max_retries = int(opts.get("max_retries", DEFAULT_MAX_RETRIES))
        self.connect_timeout = float(opts.get("connect_timeout_s", CONNECT_TIMEOUT_S))
        self.read_timeout = float(opts.get("read_timeout_s", READ_TIMEOUT_S))
        self.turn_timeout = float(opts.get("turn_timeout_s", TURN_TIMEOUT_S))
        self.exact_reads = bool(opts.get("exact_reads", False))
        """Every packet read (and stamped) on its own, however fast they come: inter-token gaps always measured."""
        for key, value, most in (("max_retries", self.max_retries, MAX_RETRIES),
                                 ("connect_timeout_s", self.connect_timeout, MAX_TIMEOUT_S),
                                 ("read_timeout_s", self.read_timeout, MAX_TIMEOUT_S),
                                 ("turn_timeout_s", self.turn_timeout, MAX_TIMEOUT_S)):
            if value < 0 or (value == 0 and key != "max_retries") or value > most:
                raise ConfigError(f"tier {tier.name!r}: {key} must be above 0 and at most {most:g}", key=key)
        self._transport = transport
        self._backoff = backoff
        self._client: httpx.AsyncClient | None = None
        self._stamped = False
        self._backend: StampedBackend | None = None
        self._lean: LeanTransport | None = None
        self._url: httpx.URL | None = None
        """Whether the client writes through the socket-time transport (each write one blocking ``sendall``)."""
        self._key = ""
        self._drains: set[asyncio.Task[None]] = set()

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc

    # -- what a protocol supplies --------------------------------------------------------------------------

    @abstractmethod
    def endpoint(self) -> str:
        """The URL a turn is POSTed to."""

    @abstractmethod
    def body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body of a turn (``extra_body`` is merged over it)."""

    def auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry the key (and any the protocol always needs): a Bearer token, as OpenAI and
        every OpenAI-compatible server take it."""
        return {"authorization": f"Bearer {key}"} if key else {}

    @abstractmethod
    def decoder(self) -> StreamDecoder:
        """A fresh decoder for one response."""

    def max_tokens(self, request: TurnRequest) -> int:
        return min(request.max_tokens, self.tier.max_tokens) if self.tier.max_tokens else request.max_tokens

    # -- life cycle -----------------------------------------------------------------------------------------

    async def prepare(self, warm: bool = False) -> None:
        """Read the key, make the client, and with ``warm`` open the connection the race will reuse."""
        if self.key_env:
            self._key = os.environ.get(self.key_env, "")
            if not self._key:
                raise ConfigError(f"tier {self.tier.name!r}: the environment variable {self.key_env} is not "
                                  f"set; export it with the key for {self.host}", key="api_key_env")
        if self._client is None:
            backend = self._backend = StampedBackend(pace=not self.exact_reads) if self._transport is None else None
            transport = self._transport or stamped_transport(backend)
            self._stamped = transport is not None and backend is not None
            self._lean = transport if self._stamped and isinstance(transport, LeanTransport) else None
            self._client = httpx.AsyncClient(
                transport=transport,
                timeout=httpx.Timeout(self.read_timeout, connect=self.connect_timeout),
                headers={"user-agent": "tokrace", "accept": "text/event-stream"},
            )
            await first_use(self.base_url, backend if self._stamped else None)
        self._url = httpx.URL(self.endpoint())  # parsed once, not on every request's way out
        if warm:
            await self._warm()

    async def _warm(self) -> None:
        assert self._client is not None
        try:
            response = await self._client.get(self.base_url + self.warm_path, headers=self._headers())
            await response.aclose()
        except httpx.HTTPError:
            pass  # warming is a courtesy: the race itself reports any connection problem

    async def aclose(self) -> None:
        for task in list(self._drains):
            task.cancel()
        await asyncio.gather(*self._drains, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
            self._lean = None
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def _headers(self) -> dict[str, str]:
        headers = self.auth_headers(self._key)
        headers.update(self.extra_headers)
        return headers

    def clean(self, text: str) -> str:
        """A message safe to show: one line, short, and never the key (masked before the cut, which could
        otherwise leave part of it)."""
        if len(self._key) >= 4:
            text = text.replace(self._key, "[redacted]")
        return excerpt(text)

    # -- one turn ----------------------------------------------------------------------------------------

    def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        return cast("AsyncIterator[Event]", self._turn(request, clock, False))

    def stream_batched(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event | list[Delta]]:
        """:meth:`stream`'s events, with the text deltas of the reads handed over together (see
        :meth:`.lean._Body.stamped`) given as one list: the same events, in the same order, each stamped with its own
        read's arrival, for one pass of the readers above per hand-over instead of one per read (the race hands such
        a list to its listeners in one go: ``Race.emit_many``). A subclass with its own :meth:`stream` is streamed as
        it says, an event at a time."""
        if type(self).stream is not HTTPProvider.stream:
            return self.stream(request, clock)
        return self._turn(request, clock, True)

    async def _turn(self, request: TurnRequest, clock: Clock, batched: bool) -> AsyncIterator[Event | list[Delta]]:
        url = self.endpoint()
        try:
            if self._client is None:
                await self.prepare()
            payload = self.body(request)
        except TokraceError as exc:
            now = clock.now()
            yield Request(t=now, turn=request.turn, model=self.tier.model, endpoint=url)
            yield Error(t=now, error="config", message=self.clean(str(exc)))
            return
        payload.update(self.extra_body)
        client = self._client
        assert client is not None
        headers = self._headers()
        headers["accept-encoding"] = "identity"  # compressing would hold events back in buffers
        # The body is encoded and the request built before the turn starts: the clock starts where the request is
        # handed to the HTTP client (docs/design.md §2: ``request``), as a peer benchmark client's does, not before
        # our own
        # JSON encoding. Each attempt gets a request of its own (its own trace), built before its own start.
        req = client.build_request("POST", self._url or url, json=payload, headers=headers)
        retries = 0
        marks = _Marks(clock, len(req.content), exact_writes=self._stamped)
        req.extensions["trace"] = marks.trace
        start = attempt = clock.now()
        sending = self._send(client, req)
        # Request first in order, stamped before the send; it goes out once the request is on its way, so that
        # what the lane's consumer does with it (record it, draw it) is not inside connect_s.
        try:
            yield Request(t=start, turn=request.turn, model=self.tier.model, endpoint=url)
        except BaseException:  # the consumer stopped at once: the send is nobody's now
            _settle(sending)
            raise
        pending: asyncio.Future[httpx.Response] | None = sending
        while True:
            if pending is None:
                req = client.build_request("POST", self._url or url, json=payload, headers=headers)
                marks = _Marks(clock, len(req.content), exact_writes=self._stamped)
                req.extensions["trace"] = marks.trace
                attempt = clock.now()
                pending = self._send(client, req)
            sending, pending = pending, None
            connected = False
            try:
                if not (sending.done() or marks.wire.done()):  # (a wait costs a pass of the loop even when done)
                    await asyncio.wait((sending, marks.wire), return_when=asyncio.FIRST_COMPLETED)
                if not sending.done():  # on the wire, the head still to come: say so now (the lane is waiting)
                    connected = True
                    yield marks.connect_segment(attempt)
                response = await sending
            except httpx.TransportError as exc:
                if retries < self.max_retries:
                    retries += 1
                    yield await self._wait_retry(clock, marks.after_connect(attempt, connected), _short(exc), {},
                                                 retries)
                    continue
                yield self._transport_error(exc, clock.now(), retries)
                return
            finally:
                _settle(sending)
            stream = response.extensions.get("network_stream")
            head = at_socket(clock, getattr(stream, "read_at", None), marks.head)
            if response.status_code >= 400:
                raw = await _read_error_body(response)
                if retries < self.max_retries and should_retry(response.status_code, response.headers):
                    retries += 1
                    _, said = error_body(raw)
                    what = f"HTTP {response.status_code}" + (f": {said}" if said else "")
                    yield await self._wait_retry(clock, marks.after_connect(attempt, connected), what,
                                                 response.headers, retries)
                    continue
                if not connected:
                    yield marks.connect_segment(attempt)
                yield self._headers_event(response, head)
                yield self._http_error(response, raw, head, retries)
                return
            if not connected:
                yield marks.connect_segment(attempt)
            yield self._headers_event(response, head)
            unread = await self._not_a_stream(response, head)
            if unread is not None:
                yield unread
                return
            pacing = _Pacing(stream) if hasattr(stream, "paced_reads") and not clock.virtual else None
            async for item in self._read(response, clock, stream, head,
                                         _TurnLimits(start + self.turn_timeout, self.max_tokens(request)), batched):
                if pacing is not None:
                    if type(item) is list:
                        at, paced = pacing.see_many(item)
                        if paced is not None:  # before the delta it goes with: those ahead of it go first
                            if at:
                                yield _alone_or_list(item[:at])
                                item = _alone_or_list(item[at:])
                            yield paced
                            pacing = None
                    elif (paced := pacing.see(item)) is not None:  # type: ignore[arg-type]
                        yield paced  # reads are paced from here on: the turn's inter-token gaps are not measured
                        pacing = None
                yield item
            return

    def _send(self, client: httpx.AsyncClient, req: httpx.Request) -> asyncio.Future[httpx.Response]:
        """The request under way. On the socket-time transport its first step runs now, in this task, up to
        its first real wait (the response head): connecting (a loopback handshake completes inside ``connect``)
        and writing the request cost no pass of the event loop, where a task of its own would start only on the
        loop's next pass, behind whatever else is ready (a screen's frame). Its waits are timers on futures, bound
        to no task, so the rest can go on in a task of its own. On any other transport (anyio's cancel scopes
        belong to the task they start in) the whole send is a task."""
        if self._lean is None:
            return asyncio.ensure_future(client.send(req, stream=True))
        return eager(self._send_direct(client, self._lean, req))

    @staticmethod
    async def _send_direct(client: httpx.AsyncClient, transport: LeanTransport, req: httpx.Request
                           ) -> httpx.Response:
        """``client.send`` for the socket-time transport, straight to it: a request built by the client (its
        headers, cookies and timeouts merged in) and sent without httpx's auth and redirect machinery (tokrace uses
        neither: keys are headers, redirects are never followed), ~35 µs before the connect that was part of every
        first request's TTFT. The client's cookie jar still learns what the response sets."""
        response = await transport.handle_async_request(req)
        client.cookies.extract_cookies(response)
        return response

    async def _wait_retry(self, clock: Clock, attempt: float, what: str, headers: Mapping[str, str],
                          retries: int) -> Segment:
        """Wait before the next attempt; the failed attempt and the wait become one ``retry`` segment."""
        delay = retry_delay_s(headers, retries - 1, self._backoff)
        end = await clock.sleep_until(clock.now() + delay)
        label = self.clean(f"{what}; retry {retries} of {self.max_retries} after {delay:.2f} s")
        return Segment(t=end, seg="retry", start=attempt, end=end, label=label)

    def _headers_event(self, response: httpx.Response, t: float) -> Headers:
        rid = response.headers.get("x-request-id") or response.headers.get("request-id") or ""
        return Headers(t=t, status=response.status_code, request_id=rid)

    async def _not_a_stream(self, response: httpx.Response, t: float) -> Error | None:
        """The error for a response that is not an event stream (a redirect, which is never followed; an HTML page
        or a JSON body under status 200), saying what came instead; ``None`` for an event stream."""
        status = response.status_code
        if 300 <= status < 400:
            await response.aclose()
            target = response.headers.get("location")
            where = f" to {mask_url(target)}" if target else ""
            return Error(t=t, error="http", status=status, message=self.clean(
                f"HTTP {status} from {self.host}: redirected{where}, and tokrace does not follow redirects (a "
                "redirect would drop the request body or the key); set base_url to the address it names"))
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if not kind or "event-stream" in kind or not any(word in kind for word in _NOT_STREAMS):
            return None
        raw = await _read_error_body(response)
        _, said = error_body(raw) if "json" in kind else ("", "")
        what = f": {said}" if said else ""
        return Error(t=t, error="protocol", status=status, message=self.clean(
            f"HTTP {status} from {self.host} sent {kind} instead of an event stream{what}; check base_url (is it "
            "the API's address, not a web page?) and that the server streams"))

    async def _read(self, response: httpx.Response, clock: Clock, stream: Any, head: float,
                    limits: _TurnLimits | None = None, batched: bool = False) -> AsyncIterator[Event | list[Delta]]:
        """Decode the stream, stamping every event with the moment its bytes reached the socket (never before
        the event ahead of it: two conversions of the same moment may differ by a few nanoseconds). ``batched``:
        on a stamped connection, the reads handed over together are decoded in one step, and their text deltas
        given as one list (a lone delta as itself); the events are the same, in the same order."""
        decoder = self.decoder()
        parser = SSEParser()
        frames = TextFrames(decoder.text_keys)
        encoded = response.headers.get("content-encoding", "identity").lower() not in ("", "identity")
        stamped = stream is not None and hasattr(stream, "read_at") and not clock.virtual
        reads = stamped_reads(response) if batched and stamped and not encoded else None
        chunks: AsyncIterator[Any] = reads if reads is not None else (
            response.aiter_bytes() if encoded else response.aiter_raw())
        t = head
        final: list[Event] = []
        opening, seen = b"", False  # the first bytes (to say what came if it was no event stream); any event?
        deadline = limits.deadline if limits is not None else math.inf
        max_chunks = limits.max_chunks if limits is not None else sys.maxsize
        joining = False  # whether text deltas are joined: after the turn's first (its count is not in the decode rate)
        out: list[Event] = []  # the events of the reads taken in one step
        add = out.append
        try:
            while True:
                try:
                    got = await anext(chunks)
                except StopAsyncIteration:
                    final = decoder.end(t) if seen or _sse_like(opening) else [self._no_events(response, opening, t)]
                    break
                # each read with its stamp: a hand-over's reads together, else the one read (and the stream's stamp)
                batch = got if reads is not None else ((got, stream.read_at if stamped else None),)
                at = 0
                while at < len(batch):
                    chunk, read_at = batch[at]
                    at += 1
                    now = clock.now()
                    # as at_socket(), on the one reading of the clock
                    arrived = now if read_at is None else now - max(time.perf_counter() - read_at, 0.0)
                    if arrived > t:
                        t = arrived
                    if now > deadline and limits is not None and (late := limits.late(self, t, now, decoder.deltas)):
                        final = [late]
                        break
                    if not seen and len(opening) < _OPENING:  # only a body without events needs its opening
                        opening += chunk[: _OPENING - len(opening)]
                    if joining and not parser.clean:  # a read that ends an event the one before cut (a read takes
                        end = chunk.find(b"\n\n") + 2  # 64 KB): that part alone to the parser, and what follows
                        if 1 < end < len(chunk):        # as a read of its own (same stamp), from an event's start
                            batch = [*batch[:at], (chunk[end:], read_at), *batch[at:]]
                            chunk = chunk[:end]
                    # A read of text events in the kept frame (up to the start of an event the next read completes):
                    # parsed in one pass, one delta; what follows the last whole event goes to the parser.
                    cut = chunk.rfind(b"\n\n") + 2 if joining and parser.clean else 0
                    if cut > 1 and (texts := frames.whole(chunk if cut == len(chunk) else chunk[:cut])) is not None:
                        seen = True
                        room = max_chunks - decoder.deltas
                        if len(texts) > room and limits is not None:  # as event by event: the one past the limit
                            texts = texts[:room]                     # ends the turn instead
                            final = [limits.runaway(t, max_chunks + 1)]
                        decoder.deltas += len(texts)
                        if texts:
                            add(Delta(t, "".join(texts), frames.channel, None, len(texts)))  # type: ignore[arg-type]
                        if final:
                            decoder.deltas += 1
                            break
                        chunk = chunk[cut:]
                        if not chunk:
                            continue
                    try:
                        sses = parser.feed(chunk)
                        if sses:
                            seen = True
                    except EventTooLarge:
                        final = [Error(t=t, error="protocol", message=(
                            f"the server sent one event larger than {MAX_EVENT_BYTES // (1024 * 1024)} MB after "
                            f"{decoder.deltas} text chunks (a line that never ends?); the stream is garbled, try "
                            "again"))]
                        break
                    # The text deltas of one read (one stamp) that follow each other in one channel are joined into
                    # one delta (``Delta.chunks``); the turn's first stays alone.
                    parts: list[str] = []
                    channel = ""
                    for sse in sses:
                        if not sse.valid_utf8:
                            final = [Error(t=t, error="encoding", message=self.clean(
                                f"the server sent bytes that are not UTF-8 after {decoder.deltas} text chunks; "
                                "the stream is garbled, try again"))]
                            break
                        text = frames.text(sse)
                        events: list[Event]
                        if text is not None:
                            if joining and decoder.deltas < max_chunks:  # its delta would join: only its text is kept
                                if parts and channel != frames.channel:
                                    add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                                    parts = []
                                decoder.deltas += 1
                                parts.append(text)
                                channel = frames.channel
                                continue
                            events = [decoder.delta(t, text, frames.channel)]
                        else:
                            try:
                                events = decode(decoder, sse, t)
                            except StreamProblem as problem:
                                events = [Error(t=t, error=problem.kind, message=problem.message)]
                            frames.learn(sse, events)
                        if decoder.deltas > max_chunks and limits is not None:
                            events = [limits.runaway(t, decoder.deltas)]
                        if events and isinstance(events[-1], _FINAL):
                            final = events
                            break
                        for event in events:
                            if type(event) is Delta and event.text:
                                if joining and event.tokens is None:
                                    if parts and channel != event.channel:
                                        add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                                        parts = []
                                    parts.append(event.text)
                                    channel = event.channel
                                    continue
                                joining = True
                            if parts:
                                add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                                parts = []
                            add(event)
                    if parts:
                        add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                    if final:
                        break
                if out:
                    if reads is None:
                        for event in out:
                            yield event
                    else:
                        for item in _grouped(out):
                            yield item
                    out.clear()
                if final:
                    break
        except httpx.TransportError as exc:
            final = [self._stream_error(exc, clock.now(), decoder.deltas)]
        finally:
            if final and isinstance(final[-1], Done):
                self._drain(response, chunks)
            else:
                await response.aclose()
        for event in final:
            if isinstance(event, Error):
                event = Error(t=event.t, error=event.error, message=self.clean(event.message),
                              status=event.status, retry_after=event.retry_after)
            yield event

    def _no_events(self, response: httpx.Response, opening: bytes, t: float) -> Error:
        """A body that ended without one event: what it began with (and a JSON error's message) instead of "the
        stream ended without its final event"."""
        _, said = error_body(opening)
        kind = response.headers.get("content-type") or "no content type"
        return Error(t=t, error="protocol", status=response.status_code, message=self.clean(
            f"HTTP {response.status_code} from {self.host} ({kind}) was not an event stream: {said}; check "
            "base_url and that the server streams"))

    def _drain(self, response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
        """Read what follows the final event (the chunked-encoding end) in the background, so the connection
        goes back to the pool for the next turn instead of being closed; the ``Done`` goes out at once."""
        async def drain() -> None:
            try:
                async with asyncio.timeout(5.0):
                    async for _ in chunks:
                        pass
            except (httpx.HTTPError, TimeoutError):
                pass
            finally:
                await response.aclose()

        task = asyncio.get_running_loop().create_task(drain())
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    # -- failures ----------------------------------------------------------------------------------------

    def _http_error(self, response: httpx.Response, raw: bytes, t: float, retries: int) -> Error:
        status = response.status_code
        kind, message = error_body(raw)
        said = f"HTTP {status} from {self.host}" + (f": {message}" if message else "")
        after = f" (gave up after {retries} retries)" if retries else ""
        wait = retry_after_s(response.headers)
        if status in (401, 403):
            advice = (f"check the key in ${self.key_env}" if self.key_env else
                      "this server wants a key: set api_key_env for this tier")
            if status == 403:
                advice += f" and that it may use {self.tier.model or 'this model'}"
            error = "auth"
        elif status == 429:
            advice = ("rate limited: wait" + (f" {wait:.3g} s" if wait and wait > 0 else "")
                      + " or race fewer lanes and runs")
            error = "rate_limit"
        elif status == 529 or kind == "overloaded_error":
            advice, error = "the API is overloaded for everyone; try again later", "overloaded"
        elif status == 404:
            advice, error = f"check base_url ({self.base_url}) and the model name", "http"
        elif status in (400, 422):
            advice, error = "check this tier's model and options", "http"
        elif status == 402:
            advice, error = "check the account's credits", "http"
        elif status == 413:
            advice, error = "shorten the prompt", "http"
        elif status >= 500:
            advice, error = "the server failed; try again later", "http"
        else:
            advice, error = "try again", "http"
        return Error(t=t, error=error, message=self.clean(f"{said}{after}; {advice}"), status=status,
                     retry_after=wait if wait is not None and wait > 0 else None)

    def _transport_error(self, exc: httpx.TransportError, t: float, retries: int) -> Error:
        """A failure before the response head: cannot connect, timed out, connection dropped."""
        after = f" (gave up after {retries} retries)" if retries else ""
        text = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.ConnectTimeout):
            message = (f"connecting to {self.host} timed out after {self.connect_timeout:g} s{after}; "
                       "check the network and base_url, or raise connect_timeout_s")
            kind = "connect"
        elif isinstance(exc, httpx.ConnectError):
            if _refused(exc):
                why = "connection refused"
                hint = f"is the server running at {self.base_url}? check base_url"
            elif "name" in text.lower() and ("resolution" in text.lower() or "known" in text.lower()):
                why = "the host name does not resolve"
                hint = "check base_url and the network"
            else:
                why = text
                hint = "check the network and base_url"
            message, kind = f"cannot connect to {self.host} ({why}){after}; {hint}", "connect"
        elif isinstance(exc, httpx.TimeoutException):
            message = (f"no response from {self.host} within {self.read_timeout:g} s{after}; the server is "
                       "stuck or overloaded: try again, or raise read_timeout_s")
            kind = "timeout"
        else:
            message = (f"the connection to {self.host} failed before a response ({text}){after}; "
                       "try again")
            kind = "connect"
        return Error(t=t, error=kind, message=self.clean(message))

    def _stream_error(self, exc: httpx.TransportError, t: float, deltas: int) -> Error:
        """A failure while the stream was being read: what came before stays."""
        if isinstance(exc, httpx.TimeoutException):
            return Error(t=t, error="stall", message=self.clean(
                f"the stream stalled: no data for {self.read_timeout:g} s after {deltas} text chunks; "
                "try again, or raise read_timeout_s"))
        text = str(exc).lower()
        if isinstance(exc, httpx.ReadError) and ("reset" in text or "errno 104" in text or not text):
            return Error(t=t, error="reset", message=self.clean(
                f"the connection was reset mid-stream after {deltas} text chunks; try again"))
        return Error(t=t, error="closed", message=self.clean(
            f"the server closed the connection mid-stream after {deltas} text chunks "
            f"({str(exc) or type(exc).__name__}); try again"))


def _short(exc: httpx.TransportError) -> str:
    """A few words for a failed attempt, as a retry segment's label."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if _refused(exc) else "cannot connect"
    if isinstance(exc, httpx.TimeoutException):
        return "no response in time"
    return "connection failed"


def _refused(exc: BaseException) -> bool:
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


async def _read_error_body(response: httpx.Response, limit: int = 64_000) -> bytes:
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


SMALL_BODY: Final[int] = 64 * 1024
"""Up to this size a request body goes to the socket in one write that never waits (asyncio's write buffer
limit), so the moment before that write is the moment the request is on the wire."""


class _Marks:
    """Collects the moments httpx's ``trace`` extension reports for one attempt, on the lane's clock.

    On the socket-time transport every write is one blocking ``sendall`` on the event loop's thread, so the request
    is on the wire when the transport says (``on_wire`` in ``send_request_body.complete``: as the one call that
    sends a small request began), or else when its body's write returned. On httpx's own transport
    (a proxy, a test's mock) ``.complete`` fires only after the I/O library has yielded to the event loop, i.e. as
    late as the other lanes make it: there the end is taken when the body is handed to the socket
    (``.started``), the write that follows being one non-blocking syscall for a small body. A big body may have to
    wait for the network, so there the end of the write counts. ``wire`` resolves once the request is on the wire,
    so that the connect segment goes out then, not when the response head arrives."""

    __slots__ = ("big", "clock", "exact", "head", "new_connection", "on_wire", "wire")

    def __init__(self, clock: Clock, body_size: int = 0, exact_writes: bool = False) -> None:
        self.clock = clock
        self.big = body_size > SMALL_BODY
        self.exact = exact_writes or self.big
        self.on_wire: float | None = None
        self.head: float | None = None
        self.new_connection = False
        self.wire: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        if name.endswith(".send_request_body.started"):
            if not self.exact:
                self.on_wire = self.clock.now()
        elif name.endswith(".send_request_body.complete"):
            if self.exact or self.on_wire is None:
                sent = info.get("on_wire")
                self.on_wire = at_socket(self.clock, sent) if isinstance(sent, float) else self.clock.now()
            if not self.wire.done():
                self.wire.set_result(None)
        elif name.endswith(".receive_response_headers.complete"):
            self.head = self.clock.now()
        elif name == "connection.connect_tcp.complete":
            self.new_connection = True

    def connect_segment(self, attempt: float) -> Segment:
        """Request start → request on the wire; labelled with whether a connection had to be opened."""
        end = self.on_wire if self.on_wire is not None else attempt
        label = "new connection" if self.new_connection else "reused connection"
        return Segment(t=end, seg="connect", start=attempt, end=end, label=label)

    def after_connect(self, attempt: float, connected: bool) -> float:
        """Where a failed attempt's retry segment starts: after its connect segment when that went out already."""
        return self.on_wire if connected and self.on_wire is not None else attempt


T = TypeVar("T")


def eager(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """Run ``coro`` up to its first wait now, in the calling task, and the rest in a task of its own (Python
    3.12's eager tasks, for one coroutine). Only for code that binds nothing to the current task (no
    ``asyncio.timeout``, no anyio cancel scope) across that wait."""
    loop = asyncio.get_running_loop()
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        done: asyncio.Future[T] = loop.create_future()
        done.set_result(stop.value)
        return done
    except Exception as exc:
        failed: asyncio.Future[T] = loop.create_future()
        failed.set_exception(exc)
        return failed
    return loop.create_task(_resumed(coro, waiting))


async def _resumed(coro: Coroutine[Any, Any, T], waiting: Any) -> T:
    return await _Resume(coro, waiting)


class _Resume(Generic[T]):
    """Awaits a coroutine already stepped once, which is waiting on ``waiting``: ``yield from`` by hand."""

    __slots__ = ("coro", "waiting")

    def __init__(self, coro: Coroutine[Any, Any, T], waiting: Any) -> None:
        self.coro = coro
        self.waiting = waiting

    def __await__(self) -> Generator[Any, Any, T]:
        coro, waiting = self.coro, self.waiting
        self.waiting = None
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation, or an exception thrown in: into the coroutine
                try:
                    waiting = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
            else:
                try:
                    waiting = coro.send(sent)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]


def _settle(task: asyncio.Future[Any]) -> None:
    """A send abandoned (the lane stopped, the generator closed) is cancelled; its outcome is taken so that it is
    never reported as an exception nobody retrieved."""
    if not task.done():
        task.cancel()
    task.add_done_callback(lambda t: None if t.cancelled() else t.exception())


def _grouped(events: list[Event]) -> list[Event | list[Delta]]:
    """The events of reads taken together, each run of text deltas as one list (a lone delta as itself)."""
    if len(events) == 1:
        return events  # type: ignore[return-value]
    out: list[Event | list[Delta]] = []
    run: list[Delta] = []
    for event in events:
        if type(event) is Delta:
            run.append(event)
            continue
        if run:
            out.append(_alone_or_list(run))
            run = []
        out.append(event)
    if run:
        out.append(_alone_or_list(run))
    return out


def _alone_or_list(deltas: list[Delta]) -> Delta | list[Delta]:
    """Deltas to hand over together: a lone one as itself."""
    return deltas[0] if len(deltas) == 1 else deltas


def at_socket(clock: Clock, perf: float | None, fallback: float | None = None) -> float:
    """A ``time.perf_counter()`` moment noted at the socket, on a lane's (real) clock; else ``fallback`` or now."""
    if perf is None or clock.virtual:
        return fallback if fallback is not None else clock.now()
    return clock.now() - max(time.perf_counter() - perf, 0.0)


async def first_use(base_url: str, backend: StampedBackend | None = None) -> None:
    """Pay before the race what the first request would otherwise pay inside its ``connect_s``: on httpx's own
    transport (``backend`` None: behind a proxy, or a test's) httpcore's lazy imports (its locks and events load
    anyio's asyncio backend on first use, h11 on the first HTTP/1.1 connection) and the event loop's resolver
    thread; on the socket-time transport a parked reader thread, and the name lookup (which also makes the first
    connection's socket). Measured on the first request of a process: 25–55 ms before, all of it set-up."""
    if backend is None:
        import anyio
        import h11  # noqa: F401 - imported for its side effect: loaded now, not on the first connection
        import httpcore._async.http11  # noqa: F401

        anyio.Event().set()
        with anyio.CancelScope(shield=True):
            pass
    else:
        backend.reserve_reader()
    parts = urlsplit(base_url)
    if parts.hostname:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with contextlib.suppress(OSError):
            if backend is not None:
                await backend.resolve(parts.hostname, port)
            else:
                await asyncio.get_running_loop().getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)


def stamped_transport(backend: StampedBackend | None = None) -> httpx.AsyncBaseTransport | None:
    """The socket-time transport (:mod:`.lean` over :mod:`.transport`); ``None`` (httpx's own) behind a proxy,
    which it does not speak through."""
    import urllib.request

    if urllib.request.getproxies():
        return None
    context = httpx.create_ssl_context(trust_env=True)
    return LeanTransport(backend or StampedBackend(), context)


def tool_parts(tool: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(name, description, JSON-Schema parameters) of a tool given in the neutral form ``{"name",
    "description", "parameters"}``, or in OpenAI's nested or Anthropic's ``input_schema`` form."""
    spec = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    assert isinstance(spec, Mapping)
    params = spec.get("parameters", spec.get("input_schema")) or {"type": "object", "properties": {}}
    return str(spec.get("name", "")), str(spec.get("description", "")), dict(params)


def usage_number(data: Mapping[str, Any], *path: str) -> int:
    """An integer deep in a usage object, 0 when any step is missing or null."""
    value: Any = data
    for key in path:
        if not isinstance(value, Mapping):
            return 0
        value = value.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

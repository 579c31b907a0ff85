"""The shared HTTP streaming provider: a protocol adapter gives the request and the stream decoder; this sends the
turn, retries like the official SDKs, measures ``connect``, and hands the response to the read loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final, cast
from urllib.parse import urlencode, urlsplit

import httpx

from ...model.errors import ConfigError, TokraceError
from ...model.events import Delta, Error, Event, Headers, Request, Segment
from ...model.masking import mask_url
from ...model.messages import TurnRequest
from ...model.tiers import TierSpec
from ...timing.clock import Clock
from ..base import Provider
from .backend import StampedBackend
from .clients import first_use, stamped_transport
from .decoder import StreamDecoder
from .eager import eager, settle
from .error_text import check_base_url, error_body, excerpt, read_error_body, refused, retry_reason
from .marks import AttemptMarks, at_socket
from .pacing import Pacing
from .read_loop import TurnLimits, alone_or_list, read_events
from .retry import DEFAULT_MAX_RETRIES, backoff_s, retry_after_s, retry_delay_s, should_retry
from .transport import LeanTransport

HTTP_OPTIONS: Final[dict[str, tuple[type, ...]]] = {
    "headers": (dict,),
    "extra_body": (dict,),
    "connect_timeout_s": (int, float),
    "read_timeout_s": (int, float),
    "max_retries": (int,),
    "turn_timeout_s": (int, float),
    "exact_reads": (bool,),
    "query": (dict,),
}
"""Config keys every HTTP tier accepts: extra request headers (never keys), extra JSON body fields, timeouts
(``read_timeout_s`` bounds the silence between two chunks, ``turn_timeout_s`` a whole turn), how many times
to retry, ``query`` (parameters added to every request's URL, such as Azure's ``api-version``: never in
``base_url``), and ``exact_reads`` (read every packet on its own even when packets come fast, see
:mod:`.stamped_stream`)."""

CONNECT_TIMEOUT_S: Final[float] = 5.0
READ_TIMEOUT_S: Final[float] = 600.0
"""The official SDKs' defaults: 5 s to connect, 600 s overall (here: of silence between two chunks)."""
TURN_TIMEOUT_S: Final[float] = 1800.0
"""The longest one turn may stream (request to final event) before the lane ends with a timeout: a server that
streams forever must not keep a bench running forever."""
MAX_TIMEOUT_S: Final[float] = 86_400.0
MAX_RETRIES: Final[int] = 10
"""Above these a setting is a typo (a day; ten retries)."""

_NOT_STREAMS: Final[tuple[str, ...]] = ("json", "html", "xml")
"""Content types of a response that cannot be an event stream (an error body, a web page)."""

_SECRET_HEADERS: Final[frozenset[str]] = frozenset(
    {"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})


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
        self.query: dict[str, str] = {}
        for name, value in dict(opts.get("query", {})).items():
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ConfigError(f"tier {tier.name!r}: query.{name} must be text or a number, got {value!r}",
                                  key="query")
            self.query[str(name)] = str(value)
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

    def request_url(self) -> str:
        """The URL a turn is POSTed to, with the tier's ``query`` parameters."""
        url = self.endpoint()
        return f"{url}?{urlencode(self.query)}" if self.query else url

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
        self._url = httpx.URL(self.request_url())  # parsed once, not on every request's way out
        if warm:
            await self._warm()

    async def _warm(self) -> None:
        assert self._client is not None
        try:
            response = await self._client.get(self.base_url + self.warm_path, headers=self._headers())
            await response.aclose()
        except httpx.HTTPError:
            pass  # warming is a courtesy: the race itself reports any connection problem

    async def ready(self) -> None:
        """Connection reuse, by choice (docs/performance.md): the last turn's connection goes back to the pool
        before the next run's clock starts (its drain awaited, at most 5 s), so a run never opens a second
        connection because the first was still being read to its end; and a socket is made ready again for a
        run that must connect anew (the server closed the connection), as for the first."""
        if self._drains:
            await asyncio.gather(*self._drains, return_exceptions=True)
        if self._backend is not None:
            self._backend.rearm()

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
        :meth:`.transport._Body.stamped`) given as one list: the same events, in the same order, each stamped with its
        own read's arrival, for one pass of the readers above per hand-over instead of one per read (the race hands
        such a list to its listeners in one go: ``Race.emit_many``). A subclass with its own :meth:`stream` is streamed
        as it says, an event at a time."""
        if type(self).stream is not HTTPProvider.stream:
            return self.stream(request, clock)
        return self._turn(request, clock, True)

    async def _turn(self, request: TurnRequest, clock: Clock, batched: bool) -> AsyncIterator[Event | list[Delta]]:
        url = self.request_url()
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
        marks = AttemptMarks(clock, len(req.content), exact_writes=self._stamped)
        req.extensions["trace"] = marks.trace
        start = attempt = clock.now()
        sending = self._send(client, req)
        # Request first in order, stamped before the send; it goes out once the request is on its way, so that
        # what the lane's consumer does with it (record it, draw it) is not inside connect_s.
        try:
            yield Request(t=start, turn=request.turn, model=self.tier.model, endpoint=url)
        except BaseException:  # the consumer stopped at once: the send is nobody's now
            settle(sending)
            raise
        pending: asyncio.Future[httpx.Response] | None = sending
        while True:
            if pending is None:
                req = client.build_request("POST", self._url or url, json=payload, headers=headers)
                marks = AttemptMarks(clock, len(req.content), exact_writes=self._stamped)
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
                    yield await self._wait_retry(clock, marks.after_connect(attempt, connected), retry_reason(exc), {},
                                                 retries)
                    continue
                yield self._transport_error(exc, clock.now(), retries)
                return
            finally:
                settle(sending)
            stream = response.extensions.get("network_stream")
            head = at_socket(clock, getattr(stream, "read_at", None), marks.head)
            if response.status_code >= 400:
                raw = await read_error_body(response)
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
            pacing = Pacing(stream) if hasattr(stream, "paced_reads") and not clock.virtual else None
            # closed with this turn, not left to the loop's finalizer: its last events (a huge one) go with it
            async with contextlib.aclosing(read_events(
                    self, response, clock, stream, head, TurnLimits(start + self.turn_timeout,
                                                                    self.max_tokens(request)), batched)) as events:
                async for item in events:
                    if pacing is not None:
                        if type(item) is list:
                            at, paced = pacing.see_many(item)
                            if paced is not None:  # before the delta it goes with: those ahead of it go first
                                if at:
                                    yield alone_or_list(item[:at])
                                    item = alone_or_list(item[at:])
                                yield paced
                                pacing = None
                        elif (paced := pacing.see(item)) is not None:  # type: ignore[arg-type]
                            yield paced  # reads are paced from here on: the turn's inter-token gaps are not measured
                            pacing = None
                    yield item
                    del item  # not held while the next one is read (a huge one beside the next)
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
        raw = await read_error_body(response)
        _, said = error_body(raw) if "json" in kind else ("", "")
        what = f": {said}" if said else ""
        return Error(t=t, error="protocol", status=status, message=self.clean(
            f"HTTP {status} from {self.host} sent {kind} instead of an event stream{what}; check base_url (is it "
            "the API's address, not a web page?) and that the server streams"))

    def drain(self, response: httpx.Response, chunks: AsyncIterator[Any]) -> None:
        """Read what follows the final event (the chunked-encoding end) in the background, so the connection
        goes back to the pool for the next turn instead of being closed; the ``Done`` goes out at once (the read loop
        calls it once the final event is read)."""
        async def read_to_end() -> None:
            try:
                async with asyncio.timeout(5.0):
                    async for _ in chunks:
                        pass
            except (httpx.HTTPError, TimeoutError):
                pass
            finally:
                await response.aclose()

        task = asyncio.get_running_loop().create_task(read_to_end())
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
            if refused(exc):
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

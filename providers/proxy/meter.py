"""One model call measured at the wire: what the relay saw (stamped by the kernel), read from a copy of its bytes after
they were forwarded, turned into tokrace events (docs/design.md §2) on the session's shared clock."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Final

from ..adapters.http.decoder import StreamDecoder, StreamProblem, decode
from ..adapters.http.error_text import excerpt
from ..adapters.http.sse import EventTooLarge, SSEParser
from ..model.events import Delta, Done, Error, Event, Extra, Headers, Request, ToolCall, Usage
from .decoding import COPY_CAP, BodyDecoder, Unreadable, decode_whole
from .http1 import Head
from .members import PIECE, RUN, WHOLE_BYTES, members
from .routes import Upstream, protocol_of

NOTE_SOURCE: Final[str] = "proxy.note"
"""The ``extra`` event source of what the proxy could not read of a call (a body in a coding it cannot decode)."""

SLICE_S: Final[float] = 50e-6
"""The longest the measuring runs at once before the loop looks at its sockets again: a chunk that arrives meanwhile
waits at most this long to be forwarded."""

SLICE_BYTES: Final[int] = 512
"""The measuring reads an answer a chunk at a time and a big chunk in slices this long: a slice is a step the loop
cannot leave, and an SSE event takes about 20 µs to read into events and recording lines (a 4 KB step was some
thirty events, over half a millisecond, and a read that brought that much after a late wake held the next chunks
that long)."""

BACKLOG_BYTES: Final[int] = 16 * 1024 * 1024
"""While more request bodies than this wait to be read, the measuring reads on without letting the loop look at its
sockets: an agent that sends big calls faster than they are read (50 of 4 MB a second) is held back by the loop, as
it was when each body was one ``json.loads``, instead of its bodies piling up in memory."""

ERROR_BODY_KEPT: Final[int] = 64 * 1024
"""How much of an error answer's body is kept to quote."""


PROTOCOLS: Final[tuple[str, ...]] = ("anthropic", "openai-responses", "openai")
"""The protocols a call is read in (see :func:`stream_decoder`)."""


def stream_decoder(protocol: str) -> StreamDecoder:
    """The adapters' decoder for a protocol's stream: the proxy reads the same SSE the providers read."""
    if protocol == "anthropic":
        from ..adapters.http.anthropic import AnthropicDecoder

        return AnthropicDecoder(None)
    if protocol == "openai-responses":
        from ..adapters.http.openai_responses import ResponsesDecoder

        return ResponsesDecoder(None)
    from ..adapters.http.openai_chat import ChatDecoder

    return ChatDecoder(None)


@dataclass(slots=True)
class CallFacts:
    """What the request said, read from its decoded copy (off the relay's path)."""

    model: str = ""
    stream: bool = False
    session: str = ""
    digest: str = ""
    retry_header: bool = False
    agent: str = ""
    notes: list[str] = field(default_factory=list)


SESSION_HEADERS: Final[tuple[str, ...]] = ("x-claude-code-session-id", "session_id", "session-id", "x-session-id",
                                           "conversation_id", "x-conversation-id")
"""Headers agents name their session in (Claude Code's own, Codex's ``session_id`` / ``conversation_id``)."""


REQUEST_MEMBERS: Final[frozenset[str]] = frozenset({"model", "stream", "metadata", "prompt_cache_key"})
"""What the measuring reads of a request's body."""


def request_facts(head: Head, body: bytes, capped: bool) -> CallFacts:
    """The model, streaming, session and identity of a request (its body already decoded)."""
    reading = reading_facts(head, body, capped)
    while True:
        try:
            next(reading)
        except StopIteration as done:
            facts: CallFacts = done.value
            return facts


def reading_facts(head: Head, body: bytes | list[bytes], capped: bool) -> Generator[int, None, CallFacts]:
    """:func:`request_facts` a piece at a time: a big body (whole, or the pieces it came in) is hashed and read in
    pieces (:mod:`.members`), each piece a step of the measuring's queue."""
    facts = CallFacts()
    pieces = [body] if isinstance(body, bytes) else body
    size = sum(map(len, pieces))
    if size <= WHOLE_BYTES:
        body = pieces = [b"".join(pieces)]
    if not capped:
        hashed = hashlib.blake2b(digest_size=16)
        for piece in pieces:  # (6 ms for 4 MB at once)
            with memoryview(piece) as view:
                for at in range(0, len(piece), RUN):
                    hashed.update(view[at:at + RUN])
                    if size > WHOLE_BYTES:
                        yield PIECE
        facts.digest = hashed.hexdigest()
    facts.agent = head.get("user-agent")[:120]
    retry = head.get("x-stainless-retry-count") or head.get("x-retry-count")
    facts.retry_header = retry.isdigit() and int(retry) > 0
    payload = (yield from members(pieces, REQUEST_MEMBERS)) if size and not capped else {}
    if payload is None:
        facts.notes.append("the request body is not JSON")
    else:
        model = payload.get("model")
        facts.model = model if isinstance(model, str) else ""
        facts.stream = payload.get("stream") is True
        facts.session = _body_session(payload)
    for name in SESSION_HEADERS:
        value = head.get(name)
        if value:
            facts.session = value[:120]
            break
    return facts


def _body_session(payload: dict[str, Any]) -> str:
    """The session a body names: Claude Code's ``metadata.user_id`` ends in ``session_<id>``; Codex sends its
    conversation as ``prompt_cache_key``."""
    meta = payload.get("metadata")
    user = meta.get("user_id") if isinstance(meta, dict) else None
    if isinstance(user, str) and "session_" in user:
        return user[user.rindex("session_"):][:120]
    key = payload.get("prompt_cache_key")
    return key[:120] if isinstance(key, str) else ""


class MeterQueue:
    """What the relay handed on, read in the order it came (every call of a session alike, so a call's end is read
    before the next call opens), off the relay's path: at most ``SLICE_S`` at a time, each slice on a turn of the
    loop after it looked at its sockets and ran what they brought (a chunk that came meanwhile is forwarded first).

    A slice is a timer due at once, not a ``call_soon``: asyncio runs a turn's ready callbacks before the sockets'
    callbacks of that turn and its due timers after them, so a chunk that came in a burst right behind the last
    one would otherwise wait for that one's measuring."""

    def __init__(self) -> None:
        self._queue: deque[tuple[CallMeter, str, float, Any]] = deque()
        self._scheduled = False
        self.waiting = 0
        """The bytes of request bodies queued and not yet read (see ``BACKLOG_BYTES``)."""
        self.caught_up: Callable[[], None] | None = None
        """Called when everything queued was read: the moment for work that must not hold a chunk back."""

    def push(self, meter: CallMeter, kind: str, t: float, *values: Any) -> None:
        """Queue one thing (or several of a kind, read in slices) and read what is queued, unless that is already
        under way."""
        self._queue.extend((meter, kind, t, value) for value in values)
        if not self._scheduled:
            self._scheduled = True
            loop = asyncio.get_running_loop()
            loop.call_at(loop.time(), self._work)

    def drain(self) -> None:
        """Read everything still queued now, whole (a session closing: a call's end must reach the recording)."""
        queue = self._queue
        while queue:
            meter, kind, t, value = queue[0]
            if meter.step(kind, t, value):
                queue.popleft()

    def _work(self) -> None:
        queue = self._queue
        stop = time.perf_counter() + SLICE_S
        while queue:
            meter, kind, t, value = queue[0]
            if meter.step(kind, t, value):  # (else a big request's next piece: the same step again, in turn)
                queue.popleft()
            if queue and time.perf_counter() > stop and self.waiting <= BACKLOG_BYTES:
                loop = asyncio.get_running_loop()
                loop.call_at(loop.time(), self._work)
                return
        self._scheduled = False
        if self.caught_up is not None:
            self.caught_up()


class CallMeter:
    """Measures one exchange: the relay hands it stamped copies (the :class:`~.relay.Observer` calls), it queues
    them and reads them on the next turn of the loop, after the bytes went on; ``emit`` gets each event."""

    def __init__(self, method: str, clock_zero: Callable[[], float],
                 begin: Callable[[CallMeter], Callable[[Event], None] | None],
                 end: Callable[[CallMeter], None], seen: Callable[[Head], None] | None = None,
                 work: MeterQueue | None = None) -> None:
        self.method = method
        self._seen = seen
        self._zero = clock_zero
        self._begin = begin
        self._end = end
        self.emit: Callable[[Event], None] | None = None
        self.lane: int | None = None
        """The lane the call went on, and its turn there (set when it opens)."""
        self.turn = 0
        self.head: Head | None = None
        self.protocol: str | None = None
        self.path = ""
        self.upstream = ""
        self.arrived = 0.0
        self.facts = CallFacts()
        self.status = 0
        self.finish: str | None = None
        """``stop``, ``tool_calls``, ``length``...; ``error`` or ``cancelled`` when it failed."""
        self.first_byte: float | None = None
        self.ended_at: float | None = None
        self._body: list[bytes] = []
        self._body_size = 0
        self._work = work if work is not None else MeterQueue()
        self.shadow = ""
        """``shadow TIER`` when this call is a shadow's copy of an agent's call (its session is named so)."""
        self._copy: list[bytes] = []
        self._decoder: StreamDecoder | None = None
        self._sse = SSEParser()
        self._coded: BodyDecoder | None = None
        self._kept: list[bytes] = []
        self._kept_size = 0
        self._problem = ""
        """Why the answer's stream could not be read (it is garbled): the call is recorded as failed."""
        self._unreadable = ""
        """Why the answer's content could not be read (its coding): the call is recorded with a note, not failed."""
        self._resp_head: Head | None = None
        self._sent: float | None = None
        self._reading: Generator[int, None, CallFacts] | None = None
        """The request's facts being read, a piece at a time (a big body)."""
        self._read: tuple[list[bytes], bool, str] = ([], True, "")
        """The decoded body being read, whether it was capped, and what could not be read of it."""

    @property
    def request_copy(self) -> bytes:
        """The request's decoded body while the call opens (what a shadow sends), else empty."""
        return b"".join(self._copy)

    # -- the relay's side: quick, never raising ----------------------------------------------------------------

    def request(self, head: Head, arrived: float, upstream: Upstream) -> None:
        if self._seen is not None:
            self._seen(head)
        self.head, self.arrived, self.upstream = head, arrived, upstream.public()
        self.path = head.first[1].split("?", 1)[0]
        self.protocol = protocol_of(self.path)

    def request_body(self, piece: bytes) -> None:
        if self.protocol is not None and self._body_size <= COPY_CAP:
            self._body.append(piece)
            self._body_size += len(piece)
            self._work.waiting += len(piece)

    def sent(self, t: float, fresh_connection: bool, connected: float | None) -> None:
        self._sent = t
        self._push("sent", t, None)

    def response_head(self, t: float, head: Head) -> None:
        self.first_byte = t
        self._push("head", t, head)

    def response_body(self, t: float, pieces: list[bytes]) -> None:
        if len(pieces) == 1 and len(pieces[0]) <= SLICE_BYTES:
            self._push("body", t, pieces)
        elif self.protocol is not None:  # a step at a time: no read of many chunks or a big one holds the next back
            self._work.push(self, "body", t, *([piece[at:at + SLICE_BYTES]] for piece in pieces
                                               for at in range(0, len(piece), SLICE_BYTES)))

    def ended(self, t: float, outcome: str, detail: str = "") -> None:
        if self.ended_at is None:
            self.ended_at = t
            self._push("end", t, (outcome, detail))

    def _push(self, kind: str, t: float, value: Any) -> None:
        if self.protocol is not None:
            self._work.push(self, kind, t, value)

    # -- off the relay's path ------------------------------------------------------------------------------------

    def step(self, kind: str, t: float, value: Any) -> bool:
        """Read one thing the relay handed on (:class:`MeterQueue` calls it); never raises. False when it is not
        read through yet (a big request's body, read a piece a step): call again with the same."""
        try:
            return self._step(kind, t, value)
        except Exception as exc:  # measuring must never break the relay: the call keeps what it had
            self._reading = None
            self._problem = self._problem or f"tokrace could not read this call ({type(exc).__name__}: {exc})"
            return True

    def _t(self, t: float) -> float:
        return t - self._zero()

    def _out(self, event: Event) -> None:
        if self.emit is not None:
            self.emit(event)

    def _step(self, kind: str, t: float, value: Any) -> bool:
        if kind == "sent" or (self.emit is None and kind != "body"):
            if not self._start():
                return False
            if kind == "sent":
                return True
        if kind == "head":
            self._on_head(t, value)
        elif kind == "body":
            for piece in value:
                self._on_body(t, piece)
        else:
            self._on_end(t, *value)
        return True

    def _start(self) -> bool:
        """Read the request (its decoded copy) a piece at a time, False after each piece, and once it is read open
        the call on its session's lane."""
        assert self.head is not None
        if self._reading is None:
            body, self._body = self._body, []
            self._work.waiting -= sum(map(len, body))
            capped = self._body_size > COPY_CAP
            note = ""
            coding = self.head.get("content-encoding")
            if coding.strip().lower() not in ("", "identity"):  # (the pieces as they came, else: no 4 MB join)
                try:
                    body = [decode_whole(b"".join(body), coding)]
                except Unreadable as exc:
                    note = f"the request was {exc}"
                    body, capped = [], True
            self._reading = reading_facts(self.head, body, capped)
            self._read = (body, capped, note)
        try:
            next(self._reading)
            return False
        except StopIteration as done:
            self.facts = done.value
        body, capped, note = self._read
        self._reading, self._read = None, ([], True, "")
        if note:
            self.facts.notes.append(note)
        if self.shadow:
            self.facts.session = f"{self.facts.session or 'agent ' + (self.facts.agent or 'unknown')} · {self.shadow}"
        self._copy = [] if capped else body
        self.emit = self._begin(self)
        self._copy = []
        self._out(Request(t=self._t(self.arrived), turn=self.turn, model=self.facts.model, endpoint=self.path))
        if self.facts.notes:
            self._out(Extra(t=self._t(self.arrived), source=NOTE_SOURCE, data={"notes": list(self.facts.notes)}))
        return True

    def _on_head(self, t: float, head: Head) -> None:
        self._resp_head = head
        self.status = int(head.first[1]) if head.first[1].isdigit() else 0
        rid = head.get("request-id") or head.get("x-request-id")
        self._out(Headers(t=self._t(t), status=self.status, request_id=rid[:120],
                          service_tier=head.get("openai-service-tier") or head.get("x-service-tier")))
        try:
            self._coded = BodyDecoder(head.get("content-encoding"))
        except Unreadable as exc:
            self._unreadable = f"the answer was {exc}"
        if self.status < 400 and "text/event-stream" in head.get("content-type"):
            assert self.protocol is not None
            self._decoder = stream_decoder(self.protocol)

    def _on_body(self, t: float, piece: bytes) -> None:
        if self._coded is None or self._problem:
            return
        try:
            data = self._coded.feed(piece)
        except Unreadable as exc:
            self._unreadable = f"the answer was {exc}"
            self._coded = None
            return
        if self._decoder is None:
            if self._kept_size < COPY_CAP if self.status < 400 else self._kept_size < ERROR_BODY_KEPT:
                self._kept.append(data)
                self._kept_size += len(data)
            return
        try:
            for sse in self._sse.feed(data):
                for event in decode(self._decoder, sse, self._t(t)):
                    self._note(event)
                    self._out(event)
        except (StreamProblem, EventTooLarge) as exc:
            self._problem = f"tokrace could not read the stream: {exc}"

    def _note(self, event: Event) -> None:
        if isinstance(event, Done):
            self.finish = event.finish_reason
        elif isinstance(event, Error):
            self.finish = "error"

    def _on_end(self, t: float, outcome: str, detail: str) -> None:
        lt = self._t(t)
        if outcome == "cancelled":
            self.finish = "cancelled"
            self._out(Error(t=lt, error="cancelled", message=f"cancelled: {detail}"))
        elif outcome != "done":
            self.finish = "error"
            self._out(Error(t=lt, error="upstream", message=detail or "the upstream failed"))
        elif self.status >= 400:
            self.finish = "error"
            said = excerpt(b"".join(self._kept).decode("utf-8", "replace"), 200) if self._kept else ""
            retry = self._resp_head.get("retry-after") if self._resp_head is not None else ""
            self._out(Error(t=lt, error="http", message=f"HTTP {self.status}{': ' + said if said else ''}",
                            status=self.status, retry_after=float(retry) if _number(retry) else None))
        elif self._unreadable:
            self.finish = "unknown"
            self._out(Extra(t=lt, source=NOTE_SOURCE, data={"notes": [self._unreadable]}))
            self._out(Done(t=lt, finish_reason="unknown"))
        elif self._decoder is not None:
            if self._problem:
                self.finish = "error"
                self._out(Error(t=lt, error="protocol", message=self._problem))
            else:
                for event in self._decoder.end(lt):
                    self._note(event)
                    self._out(event)
        else:
            for event in whole_answer(self.protocol or "", b"".join(self._kept), lt):
                self._note(event)
                self._out(event)
        self._kept = []
        self._end(self)


def _number(text: str) -> bool:
    try:
        return float(text) >= 0
    except ValueError:
        return False


def whole_answer(protocol: str, body: bytes, t: float) -> list[Event]:
    """A non-streamed answer's events, all at its end: its text, tool calls, usage and stop."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return [Error(t=t, error="protocol", message="the answer was not JSON")]
    if not isinstance(data, dict):
        return [Error(t=t, error="protocol", message="the answer was not a JSON object")]
    out: list[Event] = []
    found = data.get("usage")
    usage: dict[str, Any] = found if isinstance(found, dict) else {}
    if protocol == "anthropic":
        for block in data.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
                out.append(Delta(t=t, text=str(block["text"])))
            elif isinstance(block, dict) and block.get("type") == "tool_use":
                out.append(ToolCall(t=t, id=str(block.get("id", "")), name=str(block.get("name", "")),
                                    arguments=json.dumps(block.get("input") or {})))
        out.append(Usage(t=t, input=_int(usage, "input_tokens"), output=_int(usage, "output_tokens"),
                         cached=_int(usage, "cache_read_input_tokens")))
        reason = str(data.get("stop_reason") or "end_turn")
        finish = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}.get(reason, reason)
    elif protocol == "openai":
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {} if isinstance(choice, dict) else {}
        if message.get("content"):
            out.append(Delta(t=t, text=str(message["content"])))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            out.append(ToolCall(t=t, id=str(call.get("id", "")), name=str(fn.get("name", "")),
                                arguments=str(fn.get("arguments", ""))))
        out.append(Usage(t=t, input=_int(usage, "prompt_tokens"), output=_int(usage, "completion_tokens")))
        finish = str(choice.get("finish_reason") or "stop") if isinstance(choice, dict) else "stop"
    else:
        calls = 0
        for item in data.get("output") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                calls += 1
                out.append(ToolCall(t=t, id=str(item.get("call_id", "")), name=str(item.get("name", "")),
                                    arguments=str(item.get("arguments", ""))))
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text" and part.get("text"):
                    out.append(Delta(t=t, text=str(part["text"])))
        out.append(Usage(t=t, input=_int(usage, "input_tokens"), output=_int(usage, "output_tokens")))
        finish = "tool_calls" if calls else "stop"
    out.append(Done(t=t, finish_reason=finish))
    return out


def _int(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and value >= 0 else 0

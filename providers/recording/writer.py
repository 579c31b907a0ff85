"""Writes a recording as the session happens (docs/design.md §7): one JSON line per event, handed to the OS as it
comes (a lane's deltas due at once in one write) or, when buffered, per tick of its owner; secrets never reach the
file."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import itertools
import json
import os
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, BinaryIO, Final
from urllib.parse import urlencode

from ..model.events import Delta, DeltaRun, Event, event_to_dict, finite_json
from ..model.masking import (
    MIN_HEADER_SECRET_LEN,
    MIN_SECRET_LEN,
    base64_forms,
    redact,
    shapes_free,
    url_secrets,
    with_more_secrets,
)
from ..model.tiers import TierSpec
from .format import FORMAT, VERSION, RecordingError


def secret_values(tiers: Iterable[TierSpec]) -> list[str]:
    """The secret values tiers could send: each key (from its key variable), every header value, and the secret
    query parameters of its ``base_url`` and its ``query`` table, each also in its base64 forms (Basic auth);
    longest first, so a longer secret is masked before a part of it."""
    from ..model.presets import DEFAULT_KEY_ENV

    values: set[str] = set()
    for tier in tiers:
        env = tier.api_key_env or DEFAULT_KEY_ENV.get(tier.provider)
        if env:
            value = os.environ.get(env, "")
            if len(value) >= MIN_SECRET_LEN:
                values.add(value)
        headers = tier.options.get("headers")
        if isinstance(headers, dict):
            values.update(str(v) for v in headers.values() if len(str(v)) >= MIN_HEADER_SECRET_LEN)
        values.update(url_secrets(tier.base_url))
        query = tier.options.get("query")
        if isinstance(query, dict) and query:  # what the request's URL will carry (docs/configuration.md)
            values.update(url_secrets("http://host/?" + urlencode({str(k): str(v) for k, v in query.items()})))
    values.update([form for value in list(values) for form in base64_forms(value)])
    return sorted(values, key=len, reverse=True)


def event_line(lane: int, run: int, event: Event) -> str:
    """One recorded event as its line (without the newline): the JSON of ``{"lane", "run", **event_to_dict}``.
    Deltas, nearly every line of a recording, are written by a fast path that gives the same text."""
    if type(event) is Delta:
        return _delta_line(lane, run, event, encode_basestring(event.text))
    data = {"lane": lane, "run": run, **event_to_dict(event)}
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a provider's own figure that is not finite: written as null, never NaN or Infinity
        return json.dumps(finite_json(data), ensure_ascii=False, separators=(",", ":"))


def _delta_head(lane: int, run: int) -> str:
    """The start of a delta's line, up to its time (the same for every delta of a lane in a run)."""
    return f'{{"lane":{lane:d},"run":{run:d},"kind":"delta","t":'


def _counted_end(channel: str, tokens: int) -> str:
    """The end of a delta's line of one chunk with the provider's count, after its text: ``channel`` in JSON."""
    return f',"channel":{channel},"tokens":{tokens:d}}}'


def _delta_line(lane: int, run: int, event: Delta, text: str) -> str:
    """A delta's line, its text already in JSON (``text``): what ``json.dumps`` gives, without its cost."""
    channel = _CHANNEL_JSON.get(event.channel) or encode_basestring(event.channel)
    head = _delta_head(lane, run)
    if event.chunks != 1:  # written only when it is not 1: older lines (and readers) stay as they were
        tokens = "" if event.tokens is None else f',"tokens":{event.tokens:d}'
        return f'{head}{event.t!r},"text":{text},"channel":{channel}{tokens},"chunks":{event.chunks:d}}}'
    if event.tokens is None:
        return f'{head}{event.t!r},"text":{text},"channel":{channel}}}'
    return f'{head}{event.t!r},"text":{text}{_counted_end(channel, event.tokens)}'


_CHANNEL_JSON: Final[dict[str, str]] = {c: encode_basestring(c) for c in ("content", "reasoning", "tool_args")}


_PLAIN_CHANNELS: Final[frozenset[str]] = frozenset({"content", "reasoning", "tool_args"})
"""Delta channels whose line, apart from its text, holds nothing :func:`redact` looks for (see
:meth:`Recorder._line`)."""

PLAIN_TEXTS_KEPT: Final[int] = 16_384
PLAIN_TEXT_CHARS: Final[int] = 64
"""How many distinct delta texts, each of at most how many characters, a recorder remembers as holding nothing to
mask (then it starts over): a stream's words repeat (a synthetic lane's few hundred); a longer text (an HTTP read's
joined chunks) hardly ever does, and a kilobyte each, with its JSON, over a long fast race, was 130 MB (now ~5 MB at
most)."""


HUGE_TEXT_CHARS: Final[int] = 1 << 20
"""A delta whose text is at least this long (a misbehaving server's one huge event) is escaped, checked and written
a slice at a time, never whole as one more line, one more string with its newline and its bytes (each as large as
the text): see :meth:`Recorder._huge`."""

SLICE_CHARS: Final[int] = 1 << 18
"""The slice of a huge text escaped, checked and written at a time."""


def _escaped_slices(text: str) -> Iterable[str]:
    """``encode_basestring(text)`` without its quotes, a slice at a time: each character escapes on its own."""
    for at in range(0, len(text), SLICE_CHARS):
        yield encode_basestring(text[at:at + SLICE_CHARS])[1:-1]


class Recorder:
    """Writes a session as it happens: a race listener that hands each event's line to the OS as it comes (the
    deltas a lane has due at once in one write), or, when ``buffered``, keeps each event's line until :meth:`flush`
    writes them in one go."""

    def __init__(self, path: Path, prompt: str, tiers: Sequence[TierSpec], scenario: str | None = None,
                 extra: dict[str, Any] | None = None, *, buffered: bool = False) -> None:
        from .. import __version__

        self.path = path
        self.buffered = buffered
        """Keep events for :meth:`flush` (called by the owner every tick) instead of writing each one at once."""
        self._pending: list[str] = []
        """The lines kept since the last :meth:`flush` (buffered), each made as its event came: the events were just
        made then (a line made 50 ms later costs a synthetic lane's every token a third more, its event gone cold)."""
        self._secrets = secret_values(tiers)
        self._plain: dict[str, str] = {}
        """Delta texts found to hold nothing :func:`redact` looks for, each with its JSON: see :meth:`_line`."""
        self.problem: str | None = None
        """Why the recording stopped early (a write failed), or ``None``."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: BinaryIO | None = path.open("wb", buffering=0)  # unbuffered: each write is one syscall
        except OSError as exc:
            raise RecordingError(f"{path}: cannot write the recording ({exc.strerror or exc})") from None
        self.run = 0
        """The run index stamped on each event (``--runs N`` writes N runs into one file)."""
        header: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "tool_version": __version__,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "prompt": prompt, "scenario": scenario, "tiers": [t.public() for t in tiers],
        }
        header.update(extra or {})
        self._put(redact(json.dumps(header, ensure_ascii=False, separators=(",", ":")), self._secrets))

    def _put(self, lines: str) -> None:
        """Write whole lines (redacted, without the last newline) and hand them to the OS at once: one ``write``
        of their UTF-8 bytes, no buffer in between, so a crash loses at most the line being written. A write that
        fails (a full disk, a file-size limit) closes the file (what it holds stays readable), keeps the reason
        in :attr:`problem` and raises :class:`RecordingError`; later events are dropped."""
        if self._fh is not None:
            self._write((lines + "\n").encode("utf-8"), 0)

    def _write(self, data: bytes, written: int) -> None:
        """Write ``data`` from byte ``written`` on (see :meth:`_put`)."""
        assert self._fh is not None
        try:
            while written < len(data):
                took = self._fh.write(data[written:] if written else data)
                if not took:  # a regular file takes some bytes or fails; never spin on one that does neither
                    raise OSError(errno.EIO, "the file took none of the bytes written to it")
                written += took
        except OSError as exc:
            fh, self._fh = self._fh, None
            self._pending = []
            with contextlib.suppress(OSError):
                fh.close()
            self.problem = f"{self.path}: cannot write the recording ({exc.strerror or exc})"
            raise RecordingError(self.problem) from None

    def also_mask(self, values: Iterable[str]) -> None:
        """Mask these values too from now on (each at least :data:`MIN_SECRET_LEN` long, and its base64 forms):
        secrets seen only as the session runs, such as the keys a proxied client sends."""
        secrets = with_more_secrets(self._secrets, values)
        if secrets is not None:
            self._secrets = secrets
            self._plain.clear()  # a text found plain before may hold one of them

    @property
    def closed(self) -> bool:
        """Whether the file is closed: by :meth:`close`, or by a write that failed."""
        return self._fh is None

    def __call__(self, lane: int, event: Event) -> None:
        """Keep (buffered) or write one event. As a race listener it never raises: a failed write stops the
        recording, :attr:`problem` says why, and the race goes on."""
        if type(event) is Delta and len(event.text) >= HUGE_TEXT_CHARS:
            self._huge(lane, event, self.run)
        elif self.buffered:
            if self._fh is not None:
                self._pending.append(self._line(lane, event))
        elif self._fh is not None:
            self._write_line((self._line(lane, event) + "\n").encode("utf-8"))

    def _huge(self, lane: int, event: Delta, run: int) -> None:
        """Write a delta with a huge text now (after the lines kept so far, when buffered), its text a slice at a
        time: the same bytes as its one line, at most a slice's size held besides the text. A text holding anything
        to mask is masked as a whole line, as any other."""
        if self._fh is None:
            return
        with contextlib.suppress(RecordingError):  # kept in self.problem
            if self._pending:
                self.flush()
            head, end = _delta_line(lane, run, event, '"\0"').split("\0")  # (\0 in a channel is escaped)
            if event.channel not in _PLAIN_CHANNELS or not self._clean(head + end, event.text):
                self._put(self._line(lane, event, run))
                return
            self._write(head.encode("utf-8"), 0)
            for piece in _escaped_slices(event.text):
                if self._fh is None:
                    return
                self._write(piece.encode("utf-8"), 0)
            if self._fh is not None:
                self._write((end + "\n").encode("utf-8"), 0)

    def _clean(self, rest: str, text: str) -> bool:
        """Whether a delta's line, of ``rest`` around the JSON of a huge ``text``, holds nothing :func:`redact`
        would change: looked for slice by slice, each with the end of the one before (as long as the longest
        secret or trigger), so that nothing is missed across a slice's end."""
        secrets = self._secrets
        if any(secret in rest for secret in secrets):
            return False
        reach = max(map(len, secrets), default=0) + 16
        carried = ""
        for piece in _escaped_slices(text):
            window = carried + piece
            if not shapes_free(window) or any(secret in window for secret in secrets):
                return False
            carried = window[-reach:]
        return True

    def _write_line(self, data: bytes) -> None:
        """Write one whole line (a hot path: one write when the file takes the whole line, as it does)."""
        assert self._fh is not None
        try:
            written = self._fh.write(data)
        except OSError:
            written = 0  # _write tries again and reports it
        if written != len(data):
            with contextlib.suppress(RecordingError):  # kept in self.problem
                self._write(data, written or 0)

    def on_deltas(self, lane: int, deltas: Sequence[Delta]) -> None:
        """Several deltas of a lane at once (see ``Race.emit_many``): their lines kept together when buffered, else
        handed to the OS in one write before the next event comes (a crash loses at most the lines being written).
        One write per line was a third of ``bench --fast-forward``'s time: a synthetic lane hands over a wake-up's
        tokens at once, an HTTP lane a hand-over's reads."""
        texts = deltas.texts if type(deltas) is DeltaRun else [delta.text for delta in deltas]
        if max(map(len, texts), default=0) >= HUGE_TEXT_CHARS:
            for delta in deltas:
                self(lane, delta)
            return
        if self._fh is None:
            return
        lines = self._run_lines(lane, self.run, deltas) if type(deltas) is DeltaRun else None
        if lines is None:
            lines = "\n".join(self._delta_lines(lane, self.run, deltas))
        if self.buffered:
            self._pending.append(lines)
        else:
            self._write_line((lines + "\n").encode("utf-8"))

    def _line(self, lane: int, event: Event, run: int | None = None) -> str:
        """``redact(event_line(lane, run, event), secrets)`` (``run``: this run by default), for a delta without
        looking for shapes in the whole line when its text was already found to hold none.

        Sound because the rest of a delta's line (its keys, numbers and a plain channel name) holds nothing redact
        looks for, and the text sits between quotes, which no such thing contains: a line shows a trigger only if
        its text does, in the JSON form checked here. Secret values are still looked for in the whole line."""
        run = self.run if run is None else run
        if type(event) is not Delta or event.channel not in _PLAIN_CHANNELS:
            return redact(event_line(lane, run, event), self._secrets)
        text = self._plain.get(event.text)
        if text is None:
            text = encode_basestring(event.text)
            if not shapes_free(text):
                return redact(_delta_line(lane, run, event, text), self._secrets)
            if len(event.text) <= PLAIN_TEXT_CHARS:
                if len(self._plain) >= PLAIN_TEXTS_KEPT:
                    self._plain.clear()
                self._plain[event.text] = text
        line = _delta_line(lane, run, event, text)
        for secret in self._secrets:
            if secret in line:
                return redact(line, self._secrets)
        return line

    def flush(self) -> None:
        """Write the events kept since the last flush as whole lines in one write (see :meth:`_put`)."""
        pending, self._pending = self._pending, []
        if pending and self._fh is not None:
            # Each line masked on its own, as the unbuffered recorder writes it (a delta whose text holds nothing
            # to mask skips the search): the same bytes as masking the joined lines, since no secret or shape can
            # reach across a line's end ("}" then a newline then "{"), and far cheaper than searching 50 ms of
            # lines at once.
            self._put("\n".join(pending))

    def _run_lines(self, lane: int, run: int, deltas: DeltaRun) -> str | None:
        """A synthetic lane's run of deltas as its lines (joined by newlines, without the last one), made column by
        column (no ``Delta`` made, no step of Python per line): the same text as :meth:`_delta_lines`. ``None``
        when a text was not yet found to hold nothing to mask, the channel is not a plain one, or a secret shows."""
        channel = _CHANNEL_JSON.get(deltas.channel)
        texts = list(map(self._plain.get, deltas.texts))
        if channel is None or not texts or None in texts:
            return None
        head = _delta_head(lane, run)
        tokens = deltas.tokens
        then = f"\n{head}"  # each line's end, and the next line's head
        ends: Iterable[str]
        if tokens.count(tokens[0]) == len(tokens):  # one count for all (a synthetic lane's 1 token each)
            ends = itertools.repeat(_counted_end(channel, tokens[0]) + then)
        else:
            ends = [_counted_end(channel, count) + then for count in tokens]
        body = "".join(itertools.chain.from_iterable(
            zip(map(repr, deltas.times), itertools.repeat(',"text":'), texts, ends)))  # type: ignore[arg-type]
        lines = head + body[:-len(then)]
        if self._secrets and any(secret in lines for secret in self._secrets):
            return None
        return lines

    def _delta_lines(self, lane: int, run: int, deltas: Sequence[Delta]) -> list[str]:
        """Each delta's line, as :meth:`_line` makes it. A delta of one chunk and a token count, in a plain channel,
        whose text was already found to hold nothing to mask (nearly every line: a synthetic lane at 12,000 tok/s
        keeps 12,000 a second) is made from the lane's head: one format of its time, text and count, the same text
        at about three quarters of the cost; any other through :meth:`_line`."""
        plain, secrets, line_of = self._plain, self._secrets, self._line
        head = _delta_head(lane, run)
        out: list[str] = []
        append = out.append
        for delta in deltas:
            if (delta.chunks == 1 and type(delta.tokens) is int and (text := plain.get(delta.text)) is not None
                    and (channel := _CHANNEL_JSON.get(delta.channel)) is not None):
                line = f'{head}{delta.t!r},"text":{text}{_counted_end(channel, delta.tokens)}'
                if secrets and any(secret in line for secret in secrets):
                    line = redact(line, secrets)
                append(line)
            else:
                append(line_of(lane, delta, run))
        return out

    def close(self) -> None:
        """Write what is kept (see :meth:`flush`), then close the file; raises :class:`RecordingError` when that
        last write fails."""
        try:
            self.flush()
        finally:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError as exc:
                    self.problem = f"{self.path}: cannot write the recording ({exc.strerror or exc})"
                    raise RecordingError(self.problem) from None
                finally:
                    self._fh = None

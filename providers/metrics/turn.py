"""Metrics as pure functions of a turn's events (docs/design.md §6), so live runs, replays and recordings agree.

Every time is measured from the turn's start (its ``Request`` event). A run without any generated token has
no TTFT at all (``None``), never a zero.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..model import tokens as tokenizer
from ..model.eventlog import CHANNELS, NO_COUNT, Plain, as_sequence, pieces
from ..model.events import Channel, Delta, Done, Error, Event, Headers, Request, Segment, ToolCall, Usage
from ..model.tiers import Price
from .gaps import Gaps, percentiles_ms
from .text_count import count_text, delta_texts

STALL_THRESHOLD_S: Final[float] = 0.25
"""A gap between token-bearing events longer than this (after the first token) is a stall."""

SENTENCE_END: Final[re.Pattern[str]] = re.compile(r"[.!?…][\"'”’)\]]*(?=\s)")
"""An end mark (with any closing quotes or brackets) followed by whitespace: where a sentence is complete
(``ttfs_s`` and the voice lens share this one rule)."""

SENTENCE_TAIL: Final[frozenset[str]] = frozenset(".!?…\"'”’)]")
"""The characters of :data:`SENTENCE_END` before its whitespace: a text's trailing run of them is the only place
an end mark can still be completed by text that comes later."""

DEFINITIONS: Final[dict[str, str]] = {
    "connect_s": "request start → request on the wire (DNS, TCP, TLS, sending); on a reused connection, the sending",
    "ttfb_s": "request start → response head received",
    "ttft_s": "request start → first generated token of any channel (content, reasoning, tool arguments)",
    "ttfa_s": "request start → first visible answer content",
    "ttfs_s": "request start → end of the answer's first sentence (when a voice could start speaking)",
    "e2e_s": "request start → end of the turn (or of the whole loop)",
    "output_tokens": "the provider's usage when sent; else the tokenizer's count of the streamed text; else chunks",
    "decode_tok_s": "tokens after the first event ÷ (last token time − first token time): the speed the eye sees",
    "e2e_tok_s": "output tokens ÷ e2e",
    "itl_ms": "mean: (last token time − first token time) ÷ (output tokens − 1); p50, p90, p99, max: the gaps "
              "between consecutive token-bearing events, when each was read on its own",
    "tokens_per_event": "output tokens ÷ token-bearing events",
    "stalls": f"gaps between token events longer than {STALL_THRESHOLD_S * 1000:.0f} ms after the first token",
    "cost_usd": "usage × the tier's price per million tokens (cached input priced apart)",
    "turns": "a loop's model requests, each with its own metrics (a loop's TTFT is its first turn's)",
    "breakdown": "a loop's seconds per segment kind, overlapping parallel tool calls counted once; sums to e2e",
    "model_share": "time waiting on the model API (pending, think, model of its requests) ÷ the loop's e2e",
    "amdahl_max_speedup": "e2e ÷ (e2e − model time): the most any faster model could speed this loop up",
    "what_if": "a model N× faster: e2e − model time + model time ÷ N (tools, people and waits unchanged)",
}
"""One line per metric: what it means. Shown beside every number in the details view."""

WIRE_DEFINITIONS: Final[dict[str, str]] = {
    "started_at": "the wall clock when the request started, ISO 8601 in UTC to the microsecond (a replay's: when it "
                  "was replayed; on virtual time, the run's start plus its virtual offset), to line a run up with a "
                  "server's log",
    "retries": "attempts that failed and were retried before the stream began (HTTP 429, 5xx, connection failures)",
    "service_tier": "the service tier the request asked for (the tier's service_tier) and the one the server said "
                    "it used",
    "provider_timing": "the provider's own timing as it came (Groq x_groq.usage, Cerebras time_info, llama.cpp "
                       "timings), with the decode rate each implies",
    "reads_paced_ms": "tokens came faster than 500 packets a second, so tokrace read them every this many ms "
                      "(each read stamped with its newest packet): itl_ms holds only its mean; TTFT, e2e and "
                      "the rates stay exact. null: every packet was read on its own",
}
"""One line per thing a response said about itself (in ``--json`` and the details view's wire section)."""


PACED_SOURCE: Final[str] = "reads"
"""The ``extra`` event a provider sends when a turn's reads were paced: ``{"paced_ms": 32.0}``."""

OWN_EXTRAS: Final[frozenset[str]] = frozenset({"service_tier", PACED_SOURCE})
"""Sources of ``extra`` events that are tokrace's own facts about a turn, not a provider's timing."""


def paced_ms(extras: dict[str, Any]) -> float | None:
    """How often a turn's reads were paced (from its ``reads`` extra), ``None`` when every packet was read alone."""
    data = extras.get(PACED_SOURCE)
    value = data.get("paced_ms") if isinstance(data, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of nothing")
    return _percentile_sorted(sorted(values), q)


def _percentile_sorted(ordered: Sequence[float], q: float) -> float:
    """:func:`percentile` of values already in order."""
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(slots=True)
class SegmentSpan:
    """A span of a lane's timeline, in seconds from the lane's start."""

    kind: str
    start: float
    end: float
    label: str = ""
    chain: str | None = None
    """The sub-agent it belongs to (drawn on a row of its own), ``None`` for the lane's own work."""

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "label": self.label, "start_s": _r(self.start), "end_s": _r(self.end)}
        if self.chain is not None:
            out["chain"] = self.chain
        return out


@dataclass(slots=True)
class TurnMetrics:
    """Everything measured about one turn (or, folded by ``loop_metrics``, a whole loop)."""

    ok: bool
    error: str | None = None
    start: float = 0.0
    connect_s: float = 0.0
    ttfb_s: float | None = None
    ttft_s: float | None = None
    ttfa_s: float | None = None
    ttfs_s: float | None = None
    e2e_s: float | None = None
    output_tokens: int = 0
    tokens_source: str = "chunks"
    encoding: str | None = None
    """The tiktoken encoding that counted, when ``tokens_source`` is ``tokenizer``."""
    input_tokens: int | None = None
    reasoning_tokens: int | None = None
    decode_tok_s: float | None = None
    e2e_tok_s: float | None = None
    itl_ms: dict[str, float] | None = None
    """``mean`` whenever two tokens came at different times; ``p50``, ``p90``, ``p99``, ``max`` beside it when
    every packet was read on its own."""
    reads_paced_ms: float | None = None
    """Why ``itl_ms`` holds only its mean: the turn's tokens came faster than 500 packets a second and were read every
    this many milliseconds (stamped with each read's newest packet), so the gaps between them are not the server's
    (``None``: every packet was read on its own)."""
    tokens_per_event: float | None = None
    token_events: int = 0
    stalls: int = 0
    retries: int = 0
    """Attempts that failed and were retried before the stream began (HTTP 429, 5xx, connection failures)."""
    cost_usd: float | None = None
    finish_reason: str | None = None
    service_tier: str | None = None
    segments: list[SegmentSpan] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    service_tier_asked: str | None = None
    """The service tier the lane's tier asks for (set by whoever knows the tier: the events may not say)."""
    wall_start: float | None = None
    """The wall clock (Unix seconds) when the request started (set by whoever knows the lane's wall origin: the
    events' times are the lane's own)."""

    def to_json(self) -> dict[str, Any]:
        """The run object of the ``--json`` contract (docs/design.md §8)."""
        return {
            "ok": self.ok,
            "error": self.error,
            "started_at": utc_iso(self.wall_start),
            "connect_s": _r(self.connect_s),
            "ttfb_s": _r(self.ttfb_s),
            "ttft_s": _r(self.ttft_s),
            "ttfa_s": _r(self.ttfa_s),
            "ttfs_s": _r(self.ttfs_s),
            "e2e_s": _r(self.e2e_s),
            "output_tokens": self.output_tokens,
            "tokens_source": self.tokens_source,
            "decode_tok_s": _r(self.decode_tok_s, 3),
            "e2e_tok_s": _r(self.e2e_tok_s, 3),
            "itl_ms": None if self.itl_ms is None else {k: _r(v, 3) for k, v in self.itl_ms.items()},
            "reads_paced_ms": self.reads_paced_ms,
            "stalls": self.stalls,
            "cost_usd": _r(self.cost_usd, 8),
            "segments": [s.to_json() for s in self.segments],
            # Beyond docs/design.md §8 (new keys; README documents them): what the details view shows.
            "retries": self.retries,
            "service_tier": {"asked": self.tier_asked(), "got": self.tier_got()},
            "provider_timing": {source: dict(data) for source, data in self.extras.items()
                                if source not in OWN_EXTRAS and isinstance(data, dict)},
        }

    def tier_asked(self) -> str | None:
        """The service tier the request asked for: the tier's, else as the provider recorded it (``None``: none)."""
        if self.service_tier_asked:
            return self.service_tier_asked
        reported = self.extras.get("service_tier")
        asked = reported.get("asked") if isinstance(reported, dict) else None
        return asked if isinstance(asked, str) and asked else None

    def tier_got(self) -> str | None:
        """The service tier the server said it used: in the body (an ``extra`` event), else in a header."""
        reported = self.extras.get("service_tier")
        got = reported.get("got") if isinstance(reported, dict) else None
        return got if isinstance(got, str) and got else self.service_tier


def utc_iso(unix_s: float | None) -> str | None:
    """Unix seconds as ISO 8601 in UTC to the microsecond (``2026-12-02T03:30:47.123456Z``)."""
    if unix_s is None:
        return None
    return dt.datetime.fromtimestamp(unix_s, dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


class FirstSentence:
    """When the answer's first sentence was complete, fed the answer's pieces in order: the delta that brings the
    whitespace after its end mark, or the end of the turn when the whole answer is one sentence."""

    __slots__ = ("at", "tail", "words")

    def __init__(self) -> None:
        self.at: float | None = None
        """When the first sentence ended, once one did."""
        self.tail = ""
        """The end of the text so far that a later piece can still complete an end mark with."""
        self.words = False

    def feed(self, t: float, piece: str) -> None:
        window = self.tail + piece  # searching only what can still match keeps this linear in the answer
        if SENTENCE_END.search(window):
            self.at = t
            return
        self.words = self.words or not (piece.isspace() or not piece)
        i = len(window)
        while i > 0 and window[i - 1] in SENTENCE_TAIL:
            i -= 1
        self.tail = window[i:]

    def end(self, end_t: float | None, finished: bool) -> float | None:
        if self.at is not None:
            return self.at
        return end_t if finished and self.words else None


def usage_counts(usage: Usage | None, last_token_t: float | None) -> bool:
    """Whether a turn's usage is the count of its output: it came with or after the last token (Anthropic's
    ``message_start`` says 1 before any token; a stream cut off after it streamed more than that), and it counts
    something, or nothing streamed."""
    if usage is None:
        return False
    if last_token_t is None:
        return True
    return usage.t >= last_token_t and usage.output > 0


STALL_LABEL: Final[str] = "stall"
"""The label of a wait inside a stream: no token for longer than the stall threshold."""


STALL_PACE: Final[float] = 4.0
"""A gap is drawn as a wait only when it is this many times the stream's own pace so far: a slow model's every gap
is it working, not waiting."""


def is_stall_gap(gap: float, gaps_before: int, sum_before: float, threshold_s: float = STALL_THRESHOLD_S) -> bool:
    """Whether a gap between two token events is the stream stalling (drawn as a wait): longer than the threshold
    and than :data:`STALL_PACE` times the mean of the turn's gaps before it (a first gap has nothing to compare
    with, and is the model's)."""
    return gaps_before > 0 and gap > threshold_s and gap > STALL_PACE * sum_before / gaps_before


def stream_gaps(times: Sequence[float], threshold_s: float = STALL_THRESHOLD_S) -> list[tuple[float, float]]:
    """The stalls of a stream, as (last token, next token): see :func:`is_stall_gap`."""
    out: list[tuple[float, float]] = []
    count, total = 0, 0.0
    for a, b in itertools.pairwise(times):
        if is_stall_gap(b - a, count, total, threshold_s):
            out.append((a, b))
        count, total = count + 1, total + (b - a)
    return out


def cut_gaps(spans: Sequence[SegmentSpan], gaps: Sequence[tuple[float, float]]) -> list[SegmentSpan]:
    """The think and model spans with each stall cut out as ``pending`` (labelled stall): the model sent
    nothing then, so it is drawn, and counted, as waiting for the model."""
    if not gaps:
        return list(spans)
    out: list[SegmentSpan] = []
    for span in spans:
        if span.kind not in ("think", "model"):
            out.append(span)
            continue
        at = span.start
        for a, b in gaps:
            if a >= at and b <= span.end and b > a:
                if a > at:
                    out.append(SegmentSpan(span.kind, at, a, span.label))
                out.append(SegmentSpan("pending", a, b, STALL_LABEL))
                at = b
        if span.end > at or at == span.start:
            out.append(SegmentSpan(span.kind, at, span.end, span.label))
    return out


def turn_segments(events: Iterable[Event]) -> list[SegmentSpan]:
    """The timeline of one turn: connect, pending, think, model; plus any explicit segments (retry, tool...)."""
    evs = as_sequence(events)
    req = next((e for e in evs if isinstance(e, Request)), None)
    return [] if req is None else _scan(evs, req.t).segments()


@dataclass(slots=True)
class _Scan:
    """What one pass over a turn's events finds: everything :func:`turn_metrics` and :func:`turn_segments` need,
    with one number per token event at most (the gaps between them), never the events."""

    t0: float
    ttfb_s: float | None = None
    service_tier: str | None = None
    connect_s: float = 0.0
    first: Delta | None = None
    last_t: float = 0.0
    """The last token event's time."""
    count: int = 0
    gaps: Gaps = field(default_factory=Gaps)
    first_answer: float | None = None
    """The first visible answer content (not just whitespace)."""
    answer: float | None = None
    """The first token event not of reasoning: where the timeline's ``model`` span starts."""
    streamed_reasoning: bool = False
    called: bool = False
    all_uncounted: bool = True
    """Every token-bearing delta said it carried no token."""
    usage: Usage | None = None
    end: Done | Error | None = None
    last_event_t: float | None = None
    latest: float = 0.0
    """The latest time of any event (the request is one of them)."""
    extras: dict[str, Any] = field(default_factory=dict)
    spans: list[SegmentSpan] = field(default_factory=list)
    """The segments the events named."""
    wait_from: float = 0.0
    stall_gaps: list[tuple[float, float]] = field(default_factory=list)
    """The stalls as :func:`stream_gaps` finds them (drawn as waits)."""
    sentence: FirstSentence = field(default_factory=FirstSentence)

    def segments(self) -> list[SegmentSpan]:
        """The turn's timeline (see :func:`turn_segments`)."""
        spans = list(self.spans)
        end = self.end.t if self.end is not None else self.latest
        first = self.first
        if first is None:
            spans.append(SegmentSpan("pending", self.wait_from, end))
            return sorted(spans, key=lambda s: (s.start, s.end))
        spans.append(SegmentSpan("pending", self.wait_from, first.t))
        streamed: list[SegmentSpan] = []
        if first.channel == "reasoning":
            streamed.append(SegmentSpan("think", first.t, self.answer if self.answer is not None else end))
        if self.answer is not None:
            streamed.append(SegmentSpan("model", self.answer, end))
        spans += cut_gaps(streamed, self.stall_gaps)
        return sorted(spans, key=lambda s: (s.start, s.end))


_ZEROS: Final[array[float]] = array("d", bytes(8 * 256))
"""Zero gaps, to extend the gaps of a joined delta with (see ``Delta.chunks``)."""


def _scan(events: Iterable[Event], t0: float) -> _Scan:
    """One pass over a turn's events (its request at ``t0``)."""
    out = _Scan(t0=t0, latest=t0, wait_from=t0)
    gaps, sentence = out.gaps, out.sentence
    first: Delta | None = None
    last_t = latest = t0
    count, total = 0, 0.0
    last_event_t: float | None = None
    for e in pieces(events):
        # The deltas: a log's run of one-chunk deltas as its columns (never made into deltas again), or one delta.
        run: Iterable[tuple[float, str, Channel, int | None, int]]
        if isinstance(e, Plain):
            run = zip(e[0], e[1], map(CHANNELS.__getitem__, e[2]), e[3], itertools.repeat(1))
        elif isinstance(e, Delta):
            run = ((e.t, e.text, e.channel, e.tokens, e.chunks),)
        else:
            run = ()
        for t, text, channel, tokens, chunks in run:
            last_event_t = t
            if t > latest:
                latest = t
            if not text:
                continue
            if first is None:  # a huge one (a misbehaving server's) is read again if its count is needed
                counted = None if tokens == NO_COUNT else tokens
                if len(text) > FIRST_KEPT_CHARS:
                    first = Delta(t, "", channel, counted, chunks)
                else:
                    first = e if isinstance(e, Delta) else Delta(t, text, channel, counted)
            else:
                gap = t - last_t
                gaps.append(gap)
                if is_stall_gap(gap, count - 1, total):
                    out.stall_gaps.append((last_t, t))
                total += gap
            last_t = t
            count += chunks
            if chunks != 1:  # k chunks read together: k token events at t, the k - 1 gaps between them zero
                gaps.extend(_ZEROS[: chunks - 1] if chunks <= len(_ZEROS) else array("d", bytes(8 * (chunks - 1))))
            if tokens != 0:  # (a count the columns do not have is NO_COUNT: not 0, as None)
                out.all_uncounted = False
            if channel == "reasoning":
                out.streamed_reasoning = True
            elif out.answer is None:
                out.answer = t
            if channel == "content":
                if out.first_answer is None and not text.isspace():  # (text.strip() copies a huge text)
                    out.first_answer = t
                if sentence.at is None:
                    sentence.feed(t, text)
        if isinstance(e, Plain | Delta):
            del e, run  # not held while the next event is read (a huge one, read back from a lane's log)
            text = ""
            continue
        t = e.t
        last_event_t = t
        if t > latest:
            latest = t
        if isinstance(e, Headers):
            if out.ttfb_s is None:
                out.ttfb_s = t - t0
                out.service_tier = e.service_tier or None
        elif isinstance(e, Segment):
            out.spans.append(SegmentSpan(e.seg, e.start, e.end, e.label, e.chain))
            if e.seg in ("connect", "retry"):
                out.wait_from = max(out.wait_from, e.end)
            if e.seg == "connect":
                out.connect_s = e.end - t0
        elif isinstance(e, Usage):
            out.usage = e  # cumulative: the last one replaces the earlier ones
        elif isinstance(e, Done | Error):
            if out.end is None:
                out.end = e
        elif isinstance(e, ToolCall):
            out.called = True
        elif e.kind == "extra":
            out.extras[e.source] = e.data
    out.first, out.last_t, out.count, out.latest, out.last_event_t = first, last_t, count, latest, last_event_t
    return out


def turn_metrics(events: Iterable[Event], price: Price | None = None, model: str = "",
                 stall_threshold_s: float = STALL_THRESHOLD_S) -> TurnMetrics:
    """All metrics of one turn from its events alone, in one pass over them that keeps one number per token event
    at most (the gaps between them, for the percentiles), never the events (a second pass reads the text when
    no usage counts the tokens)."""
    evs = as_sequence(events)
    req = next((e for e in evs if isinstance(e, Request)), None)
    t0 = req.t if req is not None else 0.0
    m = TurnMetrics(ok=False, start=t0)
    scan = _scan(evs, t0)
    m.ttfb_s, m.service_tier, m.connect_s, m.extras = scan.ttfb_s, scan.service_tier, scan.connect_s, scan.extras
    usage, end, first, last_t, count, gaps = scan.usage, scan.end, scan.first, scan.last_t, scan.count, scan.gaps
    m.ok = isinstance(end, Done)
    if isinstance(end, Error):
        m.error = end.message
    elif end is None:
        m.error = "the turn never ended (no done or error event)"
    elif first is None and not scan.called:
        # An empty answer would otherwise look like the fastest run of the race.
        m.ok, m.error = False, "the turn ended without generating any token"
    m.finish_reason = end.finish_reason if isinstance(end, Done) else None
    end_t = end.t if end is not None else scan.last_event_t
    # A turn that failed before any answer (a missing key, a closed port) has no end-to-end time: it never ran.
    never_ran = isinstance(end, Error) and scan.ttfb_s is None and first is None and not scan.called
    m.e2e_s = None if end_t is None or never_ran else end_t - t0
    if first is not None:
        m.ttft_s = first.t - t0
    m.ttfa_s = None if scan.first_answer is None else scan.first_answer - t0
    ttfs = scan.sentence.end(end_t, m.ok)
    m.ttfs_s = None if ttfs is None else ttfs - t0

    # Output tokens and their source.
    if usage is not None:
        m.input_tokens, m.reasoning_tokens = usage.input, usage.reasoning
    # a zero in usage is believed when every piece said it carried no token (an imported trace's call without
    # usage draws a line of text that is not model output)
    if usage_counts(usage, last_t if first is not None else None) or (
            usage is not None and first is not None and scan.all_uncounted):
        assert usage is not None
        m.output_tokens, m.tokens_source = usage.output, "usage"
    elif first is not None:
        counted = count_text(delta_texts(evs), model)
        if counted is not None:
            m.output_tokens, m.encoding = counted
            m.tokens_source = "tokenizer"
        else:
            m.output_tokens, m.tokens_source = count, "chunks"
    m.token_events = count

    if first is not None:
        # Hidden reasoning (counted in usage but never streamed) was not decoded while the eye watched.
        hidden = (usage.reasoning if usage is not None and m.tokens_source == "usage"
                  and not scan.streamed_reasoning else 0)
        visible = max(m.output_tokens - hidden, count)
        span = last_t - first.t
        if count > 1 and span > 0:  # (counted only here: a huge first event would be counted twice)
            m.decode_tok_s = max(visible - _event_tokens(_first_delta(evs, first), m, model), 0) / span
        m.reads_paced_ms = paced_ms(scan.extras)
        if visible > 1 and count > 1 and span > 0:  # the first and last token's stamps are exact even when paced
            m.itl_ms = {"mean": span * 1000.0 / (visible - 1)}
        if gaps and m.reads_paced_ms is None:  # paced reads: the gaps are the read pace's, not the server's
            m.itl_ms = {**(m.itl_ms or {}), **percentiles_ms(gaps)}
        m.stalls = sum(1 for g in gaps if g > stall_threshold_s)
        gaps.close()
        m.tokens_per_event = m.output_tokens / count
    if m.e2e_s and m.output_tokens:
        m.e2e_tok_s = m.output_tokens / m.e2e_s
    m.cost_usd = cost(price, usage, m.output_tokens)
    m.segments = scan.segments() if req is not None else []
    m.retries = sum(1 for s in m.segments if s.kind == "retry")
    return m


FIRST_KEPT_CHARS: Final[int] = 1 << 16
"""A turn's first delta is kept through its metrics without its text when that is longer than this: it is read
again from the events when its count is needed (a 4 MB first event was held beside every later one)."""


def _first_delta(events: Sequence[Event], first: Delta) -> Delta:
    """The turn's first delta with its text (``first``, as :func:`_scan` kept it, may have left it out)."""
    if first.text:
        return first
    return next(e for e in events if isinstance(e, Delta) and e.text) if first.tokens is None else first


def _event_tokens(delta: Delta, m: TurnMetrics, model: str) -> int:
    if delta.tokens is not None:
        return delta.tokens
    if m.tokens_source == "chunks":
        return 1
    counted = tokenizer.count(delta.text, model)
    return counted[0] if counted is not None else 1


def cost(price: Price | None, usage: Usage | None, output_tokens: int) -> float | None:
    """USD for a turn: usage priced per million tokens, cached input at its own price; ``None`` without a price."""
    if price is None or price.output is None:
        return None
    total = output_tokens * price.output
    if usage is not None and price.input is not None:
        cached = min(usage.cached, usage.input)
        cached_price = price.cached_input if price.cached_input is not None else price.input
        total += (usage.input - cached) * price.input + cached * cached_price
    return total / 1_000_000


def split_turns(events: Iterable[Event]) -> list[list[Event]]:
    """A lane's events cut into turns at each ``Request``; segments between turns (tools, people) go with the
    turn before them."""
    turns: list[list[Event]] = []
    for e in events:
        if isinstance(e, Request) or not turns:
            turns.append([])
        turns[-1].append(e)
    return turns


def summarize(runs: Sequence[TurnMetrics]) -> dict[str, dict[str, float]]:
    """Percentiles across runs of a tier: the ``summary`` object of the JSON contract."""
    def pct(values: list[float], qs: tuple[int, ...]) -> dict[str, float]:
        return {f"p{q}": round(percentile(values, q), 6) for q in qs} if values else {}

    ok = [r for r in runs if r.ok]
    out: dict[str, dict[str, float]] = {
        "ttft_s": pct([r.ttft_s for r in ok if r.ttft_s is not None], (50, 90)),
        "decode_tok_s": pct([r.decode_tok_s for r in ok if r.decode_tok_s is not None], (50,)),
        "e2e_s": pct([r.e2e_s for r in ok if r.e2e_s is not None], (50,)),
    }
    return out

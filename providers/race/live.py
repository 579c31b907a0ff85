"""Live lane state for the screen: a race listener folds each event into a small per-lane model in constant
time, and the screen samples that model at frame rate (text tail, tokens, tok/s window and history, state,
TTFT, elapsed, cost, timeline segments). Nothing here knows about widgets; the numbers agree with ``metrics``.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final, Literal, TypeAlias, cast

from ..metrics.loop import LoopMetrics, breakdown, model_time
from ..metrics.turn import STALL_THRESHOLD_S, SegmentSpan, cost, cut_gaps, is_stall_gap, usage_counts
from ..model.events import (
    Delta,
    DeltaRun,
    Done,
    Error,
    Event,
    Extra,
    Headers,
    Request,
    Segment,
    ToolCall,
    Usage,
    is_loop_end,
)
from ..model.tiers import TierSpec

LaneState: TypeAlias = Literal["idle", "connecting", "waiting", "thinking", "streaming", "tool", "human",
                               "retry", "done", "error", "stopped"]
"""What a lane is doing, as its badge says."""

TokenSource: TypeAlias = Literal["usage", "provider", "tokenizer", "chunks"]
"""Where a live count comes from: the provider's usage, its per-piece counts, tiktoken, or counted chunks."""

SOURCE_MARK: Final[dict[str, str]] = {"usage": "", "provider": "", "tokenizer": "≈", "chunks": "~"}
"""How a count is marked on screen: exact counts plain, ≈ counted by the tokenizer, ~ counted in chunks."""

WINDOW_S: Final[float] = 1.0
"""The sliding window of the live tok/s gauge."""

DELIVERY_LAG_S: Final[float] = 0.05
"""How long after its moment an event may reach the live model: lanes that stamp their own times wake on a grid,
and a connection's reads are handed to the loop, or paced, every few milliseconds. The gauge's window ends at the
newest token while it is this recent (else this long before now), so that lag never reads as a slower stream."""

RAMP_S: Final[float] = 0.1
"""A stream younger than the window has its rate averaged over at least this long (no spike at its start)."""

BUCKET_S: Final[float] = 0.25
"""The width of one sparkline bar of the rate history."""

SPAN_STATES: Final[dict[str, LaneState]] = {"tool": "tool", "human": "human", "retry": "retry", "wait": "waiting"}
"""The badge while a span announced ahead of time (a scenario's tool, person or wait step) lasts."""

STEP_KINDS: Final[frozenset[str]] = frozenset({"tool", "human", "wait"})
"""Segment kinds a scenario's steps (and the tools a model called) take between model turns."""

_MAX_WINDOW_SAMPLES: Final[int] = 4096

_FIRST: Final[Callable[[tuple[float, int]], float]] = itemgetter(0)

TAIL_KEEP: Final[int] = 64 * 1024
"""Characters of a lane's latest text kept for its visible tail (a screen shows a few thousand at most)."""

ANSWER_KEEP: Final[int] = 256 * 1024
"""Characters of a lane's answer kept for its final Markdown; the recording has all of it."""


@dataclass(slots=True)
class _Turn:
    """What the live model keeps of one turn: enough for its segments, its count and its decode rate."""

    start: float
    wait_from: float
    first: float | None = None
    first_reasoning: bool = False
    first_tokens: int = 0
    answer: float | None = None
    last_token: float | None = None
    end: float | None = None
    token_events: int = 0
    streamed: int = 0
    streamed_reasoning: bool = False
    usage: Usage | None = None
    tool_called: bool = False
    gaps: list[tuple[float, float]] = field(default_factory=list)
    """Stalls in the stream (``metrics.stream_gaps``): drawn as waits, not as the model streaming."""

    def tokens(self) -> int:
        """The turn's count: the provider's usage when it sent one for the whole turn (``metrics.usage_counts``),
        else what was counted while streaming. Before any token, only an ended turn's usage counts."""
        if self.last_token is None and self.end is None:
            return self.streamed
        return self.usage.output if usage_counts(self.usage, self.last_token) and self.usage else self.streamed

    def text_in(self, channel: str, t: float) -> LaneState:
        """Note text of ``channel`` arriving at ``t`` (reasoning streamed, or the answer's first moment); the state
        the lane streams in."""
        if channel == "reasoning":
            self.streamed_reasoning = True
            return "thinking"
        if self.answer is None:
            self.answer = t
        return "streaming"

    def decode_parts(self) -> tuple[float, float] | None:
        """(tokens after the first event, seconds from first to last token), as ``metrics.decode_tok_s``."""
        if self.first is None or self.last_token is None or self.token_events < 2:
            return None
        span = self.last_token - self.first
        if span <= 0:
            return None
        hidden = 0
        if usage_counts(self.usage, self.last_token) and self.usage is not None and not self.streamed_reasoning:
            hidden = self.usage.reasoning
        visible = max(self.tokens() - hidden, self.token_events)
        return max(visible - self.first_tokens, 0), span


class LiveLane:
    """One lane as the screen sees it. ``on_event`` is the only writer and costs a few microseconds."""

    def __init__(self, tier: TierSpec, expected_turns: int | None = 1,
                 on_needs_encoding: Callable[[LiveLane], None] | None = None, loop: bool = False) -> None:
        self.tier = tier
        self.expected_turns = expected_turns
        """Turns after which the lane is finished; ``None`` when only the end of the race (or of a loop) says so."""
        self.loop = loop
        """The lane plays a scenario's loop: it is done only when the loop's end event comes, not at a turn's end."""
        self.on_needs_encoding = on_needs_encoding
        """Called once when a delta comes without a token count and no tokenizer is loaded yet."""
        self.state: LaneState = "idle"
        self.detail = ""
        """A word on the state: the tool's name, the error's message."""
        self.error: str | None = None
        self.finished = False
        """No more events will come: render the final answer."""
        self.version = 0
        """Bumped on every change, so the screen redraws only what moved."""
        self.pieces: deque[tuple[str, str]] = deque()
        """The lane's latest text, in order, as (channel, text); ``meta`` marks tool calls and turns. Only the last
        ``TAIL_KEEP`` characters or so are kept: the screen draws the tail, and the recording has the rest."""
        self._piece_chars = 0
        self._answer: deque[str] = deque()
        """The visible answer of every turn (content, and turn breaks), its last ``ANSWER_KEEP`` characters."""
        self._answer_chars = 0
        self.answer_cut = 0
        """Characters of the answer that are no longer kept (the recording has them)."""
        self.ttft: float | None = None
        self.turns: list[_Turn] = []
        self.explicit: list[SegmentSpan] = []
        """Segments the events named (connect, tool, human, retry, stall)."""
        self.last_t = 0.0
        self.first_t: float | None = None
        """When the lane's first event came: its start (a loop may start with a tool or a person)."""
        self.end_t: float | None = None
        """When the lane ended: its last turn, its loop's end, its error, or when it was stopped."""
        self.loop_end: float | None = None
        """When a scenario's loop ended (after its last tool or person, not just its last model turn)."""
        self.encoding: str | None = None
        """The tiktoken encoding counting deltas that came without a count, once loaded."""
        self.tier_got: str | None = None
        """The service tier the server says it used (the tier asked for is ``tier.service_tier``)."""
        self._counter: Any = None
        self._counter_total = 0
        self._pending: list[str] = []
        self._pending_chunks = 0
        """Chunks counted while no tokenizer was loaded (``_pending`` holds their text)."""
        self._asked_encoding = False
        self._sources: set[str] = set()
        self._stream_total = 0
        self._window: deque[tuple[float, int]] = deque()
        self.history: list[int] = []
        """Tokens streamed per ``BUCKET_S`` of lane time, from the lane's start."""
        self._span_state: LaneState | None = None
        self._span_until = 0.0

    # -- the writer ------------------------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """Fold one event into the lane."""
        t = event.t
        if t > self.last_t:
            self.last_t = t
        if self.first_t is None:
            self.first_t = t
        self.version += 1
        if isinstance(event, Delta):
            if event.text:
                self._on_delta(event, t)
            return
        turn = self.turns[-1] if self.turns else None
        if isinstance(event, Request):
            if self.turns:
                self._add_piece("meta", "\n\n")
            self.turns.append(_Turn(start=t, wait_from=t))
            self._set_state("connecting")
        elif isinstance(event, Headers):
            if event.service_tier:
                self.tier_got = event.service_tier
            if self.state == "connecting":
                self._set_state("waiting")
        elif isinstance(event, Extra) and event.source == "service_tier":
            got = event.data.get("got")
            if isinstance(got, str) and got:
                self.tier_got = got
        elif isinstance(event, Usage):
            if turn is not None:
                turn.usage = event
        elif isinstance(event, Segment):
            self.explicit.append(SegmentSpan(event.seg, event.start, event.end, event.label, event.chain))
            if turn is not None and event.seg in ("connect", "retry"):
                turn.wait_from = max(turn.wait_from, event.end)
            if event.seg == "connect" and self.state == "connecting":
                self._set_state("waiting")
            if event.seg in SPAN_STATES and event.end > t:
                self._on_span(event)
            if event.seg in ("tool", "human"):
                label = f" {event.label}" if event.label else ""
                self._add_piece("meta", f"\n[{event.seg}{label}: {event.end - event.start:.2f} s]\n")
        elif isinstance(event, ToolCall):
            if turn is not None:
                turn.tool_called = True
            while self.pieces and self.pieces[-1][0] == "tool_args":  # the call says them once, whole
                self._piece_chars -= len(self.pieces.pop()[1])
            self._add_piece("meta", f"\n→ {event.name}({event.arguments})\n")
            self._set_state("tool", event.name)
        elif isinstance(event, Done):
            if turn is not None and turn.end is None:
                turn.end = t
            self._check_finished(t)
            if event.finish_reason == "tool_calls" or (turn is not None and turn.tool_called):
                self._set_state("tool", self.detail)
            elif self.loop and not self.finished:
                self._set_state("waiting")  # for the loop's next step, which comes at once
            else:
                self._set_state("done")
        elif isinstance(event, Error):
            if turn is not None and turn.end is None:
                turn.end = t
            self.error = event.message
            self._set_state("stopped" if event.error == "stopped" else "error", event.message)
            self._end(t)
        elif is_loop_end(event):  # a scenario's loop is over
            self.loop_end = t
            self._set_state("done")
            self._end(t)

    def on_deltas(self, deltas: Sequence[Delta]) -> None:
        """Fold several deltas into the lane, in order: :meth:`on_event` for each, without its dispatch."""
        if not deltas:
            return
        if self.first_t is None:
            self.first_t = deltas[0].t
        self.version += len(deltas)
        if len(deltas) > 1 and self._fold_run(deltas):
            return
        on_delta = self._on_delta
        last_t = self.last_t
        run: list[str] = []  # the texts of the current run of one channel: one piece of the tail for them all
        channel = ""
        for delta in deltas:
            t = delta.t
            if t > last_t:
                last_t = t
            if delta.text:
                if delta.channel != channel and run:
                    self._add_piece(channel, "".join(run))
                    run.clear()
                channel = delta.channel
                run.append(delta.text)
                on_delta(delta, t, False)
        if run:
            self._add_piece(channel, "".join(run))
        self.last_t = last_t

    def _fold_run(self, deltas: Sequence[Delta]) -> bool:
        """Fold a run of deltas into the lane as :meth:`_on_delta` folds them one by one, in a few passes over the
        run instead of a step of Python per delta (a synthetic lane at 12,000 tok/s hands over hundreds at a time):
        when they all carry text and the provider's count, in one channel, in time order, after the turn's first
        token, with no gap long enough to be a stall. False, having changed nothing, for any other run."""
        turn = self.turns[-1] if self.turns else None
        if turn is None or turn.first is None or turn.last_token is None:
            return False
        if type(deltas) is DeltaRun:  # a synthetic lane's: its columns as they are (one channel, counts given)
            channel, texts, counts, times = deltas.channel, deltas.texts, deltas.tokens, deltas.times
            chunks = len(times)
            if "" in texts:
                return False
        else:
            channels = {delta.channel for delta in deltas}
            texts = [delta.text for delta in deltas]
            given = [delta.tokens for delta in deltas]
            if len(channels) != 1 or "" in texts or None in given:
                return False
            channel = channels.pop()
            counts = cast("list[int]", given)
            times = [delta.t for delta in deltas]
            chunks = sum([delta.chunks for delta in deltas])
        first, last = times[0], times[-1]
        if not turn.last_token <= first or last - turn.last_token > STALL_THRESHOLD_S or times != sorted(times):
            return False  # (in time order, no gap is longer than the run's whole span since the last token)
        self._add_piece(channel, "".join(texts))
        self._sources.add("provider")
        state = turn.text_in(channel, first)
        turn.last_token = last
        turn.token_events += chunks
        added = sum(counts)
        turn.streamed += added
        totals = list(itertools.accumulate(counts, initial=self._stream_total))
        del totals[0]
        self._stream_total = totals[-1]
        self._extend_window(times, totals)
        history = self.history
        top = int(last / BUCKET_S)
        if top >= len(history):
            history.extend([0] * (top + 1 - len(history)))
        if int(first / BUCKET_S) == top:  # in time order: every delta of the run in one bucket
            history[top] += added
        else:
            for t, count in zip(times, counts, strict=True):
                history[int(t / BUCKET_S)] += count
        if last > self.last_t:
            self.last_t = last
        if self.state != state:
            self._set_state(state)
        return True

    def _extend_window(self, times: list[float], totals: list[int]) -> None:
        """Add a run's samples to the rate window, pruned as :meth:`_on_delta` prunes it sample by sample (once it
        holds more than ``_MAX_WINDOW_SAMPLES``, what fell out of the window at each sample's time)."""
        window = self._window
        window.extend(zip(times, totals, strict=True))
        size = len(window)
        if size <= _MAX_WINDOW_SAMPLES:
            return
        # Pruned at the last sample's time, what is left is the same as sample by sample whenever it still holds
        # more than the limit (at the last sample the window then held more than that too, and its cut is the
        # latest): where that cut falls is found by bisection near the front, then checked (older samples may be
        # out of order).
        cutoff = times[-1] - WINDOW_S
        front = max(bisect_right(window, (cutoff, math.inf), 0, min(size - 1, 2 * len(times) + 2)) - 1, 0)
        stamps = list(map(_FIRST, itertools.islice(window, 1, front + 2)))
        if size - front > _MAX_WINDOW_SAMPLES and stamps[-1] > cutoff and (not front or max(stamps[:-1]) <= cutoff):
            popleft = window.popleft
            for _ in range(front):
                popleft()
            return
        size -= len(times)  # replayed sample by sample: the samples after one are never out of its window
        for t in times:
            size += 1
            if size > _MAX_WINDOW_SAMPLES:
                cutoff = t - WINDOW_S
                while size > 1 and window[1][0] <= cutoff:
                    window.popleft()
                    size -= 1

    def _on_span(self, span: Segment) -> None:
        """A span announced ahead (a scenario's tool, person or wait; a retry's back-off) shows on the badge until
        it ends; tool calls running side by side show together."""
        state = SPAN_STATES[span.seg]
        label = span.label or span.seg
        if state == self._span_state and span.start < self._span_until:  # in parallel with the one running
            self._span_until = max(self._span_until, span.end)
            detail = f"{self.detail}, {label}" if self.detail else label
        else:
            self._span_state, self._span_until = state, span.end
            detail = label
        if span.seg in STEP_KINDS:
            self._set_state(state, detail)

    def _on_delta(self, delta: Delta, t: float, piece: bool = True) -> None:
        """Fold one delta with text into the lane (nearly every event: kept lean); its text goes to the tail unless
        ``piece`` is false (:meth:`on_deltas` keeps a run of one channel's texts as one piece)."""
        turns = self.turns
        if turns:
            turn = turns[-1]
        else:  # a provider that skipped its Request: the race adds one, but stay safe
            turn = _Turn(start=0.0, wait_from=0.0)
            turns.append(turn)
        channel = delta.channel
        if piece:
            self._add_piece(channel, delta.text)
        if delta.tokens is not None:
            inc = own = delta.tokens
            self._sources.add("provider")
        elif self._counter is not None:
            total = self._counter.feed(delta.text)
            inc = own = total - self._counter_total
            self._counter_total = total
            self._sources.add("tokenizer")
        else:
            inc, own = delta.chunks, 1  # k chunks at one time (``Delta.chunks``): the first is the first event
            self._pending.append(delta.text)
            self._pending_chunks += inc
            self._sources.add("chunks")
            if not self._asked_encoding and self.on_needs_encoding is not None:
                self._asked_encoding = True
                self.on_needs_encoding(self)
        if turn.first is None:
            turn.first = t
            turn.first_tokens = own
            turn.first_reasoning = channel == "reasoning"
            if self.ttft is None:
                self.ttft = t - self.turns[0].start
        state = turn.text_in(channel, t)
        last = turn.last_token
        if last is not None:
            gap = t - last
            if gap > STALL_THRESHOLD_S and is_stall_gap(gap, turn.token_events - 1, last - (turn.first or t)):
                turn.gaps.append((last, t))
        turn.last_token = t
        turn.token_events += delta.chunks
        turn.streamed += inc
        total = self._stream_total = self._stream_total + inc
        window = self._window
        window.append((t, total))
        if len(window) > _MAX_WINDOW_SAMPLES:  # as _prune(t), inline: at high rates, once per event
            cutoff = t - WINDOW_S
            while len(window) > 1 and window[1][0] <= cutoff:
                window.popleft()
        bucket = int(t / BUCKET_S)
        history = self.history
        if bucket >= len(history):
            history.extend([0] * (bucket + 1 - len(history)))
        history[bucket] += inc
        if self.state != state:
            self._set_state(state)

    def _add_piece(self, channel: str, text: str) -> None:
        """Keep a piece of the lane's text: in the tail, and in the answer when it is answer text (or a turn's
        break); the oldest pieces go once more than the limit is kept. Constant time per piece."""
        pieces = self.pieces
        pieces.append((channel, text))
        size = len(text)
        chars = self._piece_chars = self._piece_chars + size
        if chars > TAIL_KEEP:
            while self._piece_chars > TAIL_KEEP and len(pieces) > 1:
                self._piece_chars -= len(pieces.popleft()[1])
        if channel == "content" or (channel == "meta" and text == "\n\n"):
            answer = self._answer
            answer.append(text)
            self._answer_chars += size
            while self._answer_chars > ANSWER_KEEP and len(answer) > 1:
                gone = len(answer.popleft())
                self._answer_chars -= gone
                self.answer_cut += gone

    def _set_state(self, state: LaneState, detail: str = "") -> None:
        self.state = state
        self.detail = detail

    def _check_finished(self, t: float) -> None:
        ended = sum(1 for turn in self.turns if turn.end is not None)
        if self.expected_turns is not None and ended >= self.expected_turns:
            self._end(t)

    def _end(self, t: float) -> None:
        self.finished = True
        if self.end_t is None:
            self.end_t = t

    def finish(self) -> None:
        """The race is over: nothing more will come."""
        if not self.finished:
            if self.first_t is not None:
                ends = [turn.end for turn in self.turns if turn.end is not None]
                self._end(max([self.last_t, *ends]))
            self.finished = True
            self.version += 1

    def set_encoding(self, name: str, encoding: Any) -> None:
        """Count with a tokenizer from now on; the text that came before it is counted at once."""
        from ..model.tokens import IncrementalCounter

        self.encoding = name
        self._counter = IncrementalCounter(encoding)
        if self._pending:
            counted = self._counter.feed("".join(self._pending))
            adjust = counted - self._pending_chunks
            self._counter_total = counted
            self._pending.clear()
            self._pending_chunks = 0
            self._stream_total += adjust
            if self.turns:
                self.turns[-1].streamed += adjust
            self._window.clear()  # the re-count is not a burst of speed: the rate starts again from the last token
            last = self.turns[-1].last_token if self.turns else None
            if last is not None:
                self._window.append((last, self._stream_total))
            self._sources.discard("chunks")
            self._sources.add("tokenizer")
        self.version += 1

    # -- what the screen samples -----------------------------------------------------------------------------

    @property
    def tokens(self) -> int:
        """Output tokens so far, all turns."""
        return sum(turn.tokens() for turn in self.turns)

    @property
    def tokens_source(self) -> TokenSource:
        """Where the count comes from; the least exact source of any turn wins."""
        counted = [turn for turn in self.turns if turn.token_events]
        if counted and all(usage_counts(turn.usage, turn.last_token) for turn in counted):
            return "usage"
        for source in ("chunks", "tokenizer", "provider"):
            if source in self._sources:
                return source
        return "usage" if any(turn.usage is not None for turn in self.turns) else "chunks"

    @property
    def ended_at(self) -> float | None:
        """When the lane ended, once it is finished: its last turn, its loop's end (a loop goes on after each
        turn), or its error (a lane stopped during a person's wait ends when it was stopped)."""
        return self.end_t if self.finished else None

    @property
    def started_at(self) -> float | None:
        return self.first_t

    @property
    def e2e(self) -> float | None:
        """Lane start → its end (of the last turn, of the loop, or the error), once ended."""
        end, start = self.ended_at, self.started_at
        return None if end is None or start is None else end - start

    @property
    def ok(self) -> bool:
        return self.state == "done" and self.error is None

    def state_at(self, now: float) -> LaneState:
        """The badge at ``now``: a tool, human or retry span announced ahead of time shows until it ends."""
        if self._span_state is not None and now < self._span_until and self.state not in ("error", "stopped"):
            return self._span_state
        return self.state

    def elapsed(self, now: float) -> float:
        """Seconds since the race started, frozen when the lane ended."""
        end = self.ended_at
        if end is not None:
            return end
        return max(now, self.last_t) if self.first_t is not None else 0.0

    def decode_rate(self) -> float | None:
        """Tokens after the first event ÷ first-to-last token time, all turns, as ``metrics.decode_tok_s``."""
        parts = [p for p in (turn.decode_parts() for turn in self.turns) if p is not None]
        span = sum(s for _, s in parts)
        return sum(n for n, _ in parts) / span if span > 0 else None

    def _prune(self, now: float) -> None:
        window, cutoff = self._window, now - WINDOW_S
        while len(window) > 1 and window[1][0] <= cutoff:
            window.popleft()

    def rate(self, now: float) -> float:
        """Tokens per second over the ``WINDOW_S`` up to the newest token, or up to ``DELIVERY_LAG_S`` before
        ``now`` when no token came since (over the stream's age, at least ``RAMP_S``, if less).

        The first sample of a young stream is its base: its own tokens came before any time had passed."""
        window = self._window
        if not window:
            return 0.0
        now = max(now - DELIVERY_LAG_S, min(window[-1][0], now))  # the window's end: see DELIVERY_LAG_S
        self._prune(now)
        cutoff = now - WINDOW_S
        base_t, base_total = window[0]
        last_total = window[-1][1]
        if base_t <= cutoff:
            return max(last_total - base_total, 0) / WINDOW_S
        return max(last_total - base_total, 0) / max(now - base_t, RAMP_S)

    def history_rates(self, now: float, count: int) -> list[float]:
        """The last ``count`` complete history buckets before ``now``, in tok/s, oldest first."""
        complete = min(int(now / BUCKET_S), len(self.history)) if not self.finished else len(self.history)
        rates = [n / BUCKET_S for n in self.history[max(complete - count, 0):complete]]
        return rates

    def cost_so_far(self) -> float | None:
        """USD so far from the usage that came and the tokens counted, at the tier's price."""
        input_tokens = sum(turn.usage.input for turn in self.turns if turn.usage is not None)
        cached = sum(turn.usage.cached for turn in self.turns if turn.usage is not None)
        usage = Usage(t=self.last_t, input=input_tokens, cached=cached) if input_tokens else None
        return cost(self.tier.price, usage, self.tokens)

    def segments(self, now: float) -> list[SegmentSpan]:
        """The lane's timeline so far, as ``metrics.turn_segments`` cuts it; an open turn grows to ``now``, and a
        span announced ahead (a scenario's tool or person) shows only as far as ``now``, or as the lane's end
        when it was stopped before the span was over."""
        cut = self.ended_at
        if cut is None:
            cut = now
        spans = [s if s.end <= cut else SegmentSpan(s.kind, s.start, cut, s.label, s.chain)
                 for s in self.explicit if s.start <= cut]
        spans += self._turn_spans(now)
        return sorted(spans, key=lambda s: (s.start, s.end))

    def _turn_spans(self, now: float) -> list[SegmentSpan]:
        """The model's own spans (wait, think, model) of every turn; an open turn grows to ``now``."""
        spans: list[SegmentSpan] = []
        open_end = self.ended_at
        if open_end is None:
            open_end = max(now, self.last_t)
        for turn in self.turns:
            end = turn.end if turn.end is not None else open_end
            if turn.first is None:
                spans.append(SegmentSpan("wait", turn.wait_from, end))
                continue
            spans.append(SegmentSpan("wait", turn.wait_from, turn.first))
            streamed: list[SegmentSpan] = []
            if turn.first_reasoning:
                think_end = turn.answer if turn.answer is not None else end
                streamed.append(SegmentSpan("think", turn.first, think_end))
            if turn.answer is not None:
                streamed.append(SegmentSpan("model", turn.answer, end))
            spans += cut_gaps(streamed, turn.gaps)
        return spans

    def loop_so_far(self, now: float) -> LoopMetrics:
        """The lane as a loop (a single prompt is a loop of one turn) up to ``now``, or to its end once ended:
        where the time went, the model's share and the Amdahl bound, as ``loop.loop_metrics`` computes them
        from the events, from the live state (cheap enough for every frame)."""
        start = self.first_t if self.first_t is not None else 0.0
        end = self.ended_at
        if end is None:
            end = max(now, self.last_t) if self.first_t is not None else start
        m = LoopMetrics(ok=self.ok, start=start, error=self.error, ttft_s=self.ttft,
                        output_tokens=self.tokens, decode_tok_s=self.decode_rate(), e2e_s=end - start)
        m.segments = self.segments(now)
        m.breakdown = breakdown(m.segments, start, end)
        m.model_parts = model_time([*self._turn_spans(now), *(s for s in m.segments if s.chain is not None)])
        m.model_s = sum(m.model_parts.values())
        e2e = end - start
        if e2e > 0:
            m.model_share = m.model_s / e2e
            rest = e2e - m.model_s
            m.amdahl_max_speedup = e2e / rest if rest > 1e-9 else None
        return m

    def tail(self, chars: int) -> list[tuple[str, str]]:
        """The last pieces holding at least ``chars`` characters (the first one cut), for the visible tail."""
        out: list[tuple[str, str]] = []
        need = chars
        for channel, text in reversed(self.pieces):
            if need <= 0:
                break
            if len(text) > need:
                text = text[-need:]
            out.append((channel, text))
            need -= len(text)
        out.reverse()
        return out

    def answer_text(self) -> str:
        """The visible answer of every turn (content only), for the final Markdown: its last ``ANSWER_KEEP``
        characters, after a line that says so when it is longer."""
        text = "".join(self._answer).strip()
        if self.answer_cut:
            return f"*… the first {self.answer_cut:,} characters are in the recording*\n\n{text}"
        return text


@dataclass(frozen=True, slots=True)
class LaneResult:
    """One lane's place in the race summary."""

    name: str
    e2e: float
    decode: float | None
    tokens_speedup: float | None
    """This lane's decode rate ÷ the slowest lane's."""
    turn_speedup: float
    """The slowest lane's e2e ÷ this lane's (of the whole loop, in a scenario)."""


@dataclass(frozen=True, slots=True)
class RaceSummary:
    """Who finished first, by how much, and every lane's speed-up against the slowest."""

    first: str | None = None
    first_e2e: float | None = None
    runner_up: str | None = None
    lead_s: float | None = None
    slowest: str | None = None
    results: list[LaneResult] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    """Lanes stopped before their end (by the user): not failures, but not finishers either."""
    loop: bool = False
    """The lanes played a scenario's loop: end to end is the whole loop, not one turn."""


def race_summary(lanes: Sequence[LiveLane]) -> RaceSummary:
    """The summary of a finished race; lanes that failed are named apart and left out of the comparison."""
    ok = [(lane, lane.e2e) for lane in lanes if lane.ok and lane.e2e is not None]
    out = [lane for lane in lanes if not (lane.ok and lane.e2e is not None)]
    failed = [lane.tier.name for lane in out if lane.state != "stopped"]
    stopped = [lane.tier.name for lane in out if lane.state == "stopped"]
    loop = any(lane.loop for lane in lanes)
    if not ok:
        return RaceSummary(failed=failed, stopped=stopped, loop=loop)
    ordered = sorted(ok, key=lambda pair: pair[1] or 0.0)
    first, first_e2e = ordered[0]
    slow_lane, slow_e2e = ordered[-1]
    slow_decode = slow_lane.decode_rate()
    results = []
    for lane, e2e in ordered:
        assert e2e is not None
        decode = lane.decode_rate()
        tokens_x = decode / slow_decode if decode is not None and slow_decode else None
        results.append(LaneResult(lane.tier.name, e2e, decode, tokens_x,
                                  (slow_e2e or 0.0) / e2e if e2e > 0 else 1.0))
    runner_up = ordered[1] if len(ordered) > 1 else None
    return RaceSummary(first=first.tier.name, first_e2e=first_e2e,
                       runner_up=runner_up[0].tier.name if runner_up else None,
                       lead_s=(runner_up[1] or 0.0) - (first_e2e or 0.0) if runner_up else None,
                       slowest=slow_lane.tier.name if len(ordered) > 1 else None, results=results,
                       failed=failed, stopped=stopped, loop=loop)


class LiveRace:
    """The race listener the screen reads: one :class:`LiveLane` per tier."""

    def __init__(self, tiers: Sequence[TierSpec], expected_turns: Sequence[int | None] | None = None,
                 on_needs_encoding: Callable[[LiveLane], None] | None = None,
                 loops: Sequence[bool] | None = None) -> None:
        expected = list(expected_turns) if expected_turns is not None else [1] * len(tiers)
        looped = list(loops) if loops is not None else [False] * len(tiers)
        self.lanes = [LiveLane(tier, expected[i], on_needs_encoding, looped[i]) for i, tier in enumerate(tiers)]

    def __call__(self, lane: int, event: Event) -> None:
        self.lanes[lane].on_event(event)

    def on_deltas(self, lane: int, deltas: Sequence[Delta]) -> None:
        """Several deltas of a lane at once (see ``Race.emit_many``)."""
        self.lanes[lane].on_deltas(deltas)

    def finish(self) -> None:
        """The race ended: every lane is final."""
        for lane in self.lanes:
            lane.finish()

    @property
    def finished(self) -> bool:
        return all(lane.finished for lane in self.lanes)

    def summary(self) -> RaceSummary:
        return race_summary(self.lanes)

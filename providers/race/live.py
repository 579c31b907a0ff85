"""Live lane state for the screen: a race listener folds each event into a small per-lane model in constant
time, and the screen samples that model at frame rate; nothing here knows about widgets (docs/design.md §9)."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from ..metrics.turn import STALL_THRESHOLD_S, SegmentSpan, cost, is_stall_gap, usage_counts
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
    path_span,
)
from ..model.tiers import TierSpec
from . import rate as gauge
from .rate import BUCKET_S, MAX_WINDOW_SAMPLES, WINDOW_S, Window
from .text import LaneText
from .turns import LiveTurn

if TYPE_CHECKING:
    from ..metrics.loop import LoopMetrics

LaneState: TypeAlias = Literal["idle", "connecting", "waiting", "thinking", "streaming", "tool", "human",
                               "retry", "done", "error", "stopped"]
"""What a lane is doing, as its badge says."""

TokenSource: TypeAlias = Literal["usage", "provider", "tokenizer", "chunks"]
"""Where a live count comes from: the provider's usage, its per-piece counts, tiktoken, or counted chunks."""

SOURCE_MARK: Final[dict[str, str]] = {"usage": "", "provider": "", "tokenizer": "≈", "chunks": "~"}
"""How a count is marked on screen: exact counts plain, ≈ counted by the tokenizer, ~ counted in chunks."""

SPAN_STATES: Final[dict[str, LaneState]] = {"tool": "tool", "human": "human", "retry": "retry", "wait": "waiting"}
"""The badge while a span announced ahead of time (a scenario's tool, person or wait step) lasts."""

STEP_KINDS: Final[frozenset[str]] = frozenset({"tool", "human", "wait"})
"""Segment kinds a scenario's steps (and the tools a model called) take between model turns."""


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
        self.answered = False
        """Anything but the request came back (headers, a step of a loop); tokens say so on their own."""
        self.finished = False
        """No more events will come: render the final answer."""
        self.version = 0
        """Bumped on every change, so the screen redraws only what moved."""
        self.text = LaneText()
        """The lane's latest text for its tail, and its answer for the final Markdown."""
        self.ttft: float | None = None
        self.turns: list[LiveTurn] = []
        self.explicit: list[SegmentSpan] = []
        """Segments the events named (connect, tool, human, retry, stall)."""
        self.path: list[tuple[str, float, float]] = []
        """A trace lane's critical path (its ``critical path`` events): where its breakdown goes."""
        self.amdahl: object = ()
        """A trace lane's measured Amdahl bound, once its loop's end said it (``()`` until then)."""
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
        self._window: Window = deque()
        """The tok/s gauge's samples (:mod:`.rate`)."""
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
                self.text.add("meta", "\n\n")
            self.turns.append(LiveTurn(start=t, wait_from=t))
            self._set_state("connecting")
        elif isinstance(event, Headers):
            self.answered = True
            if event.service_tier:
                self.tier_got = event.service_tier
            if self.state == "connecting":
                self._set_state("waiting")
        elif (piece := path_span(event)) is not None:
            self.path.append(piece)
        elif isinstance(event, Extra) and event.source == "service_tier":
            got = event.data.get("got")
            if isinstance(got, str) and got:
                self.tier_got = got
        elif isinstance(event, Usage):
            if turn is not None:
                turn.usage = event
        elif isinstance(event, Segment):
            if event.seg not in ("connect", "retry"):
                self.answered = True
            self.explicit.append(SegmentSpan(event.seg, event.start, event.end, event.label, event.chain))
            if turn is not None and event.seg in ("connect", "retry"):
                turn.wait_from = max(turn.wait_from, event.end)
            if event.seg == "connect" and self.state == "connecting":
                self._set_state("waiting")
            if event.seg in SPAN_STATES and event.end > t:
                self._on_span(event)
            if event.seg in ("tool", "human"):
                label = f" {event.label}" if event.label else ""
                self.text.add("meta", f"\n[{event.seg}{label}: {event.end - event.start:.2f} s]\n")
        elif isinstance(event, ToolCall):
            if turn is not None:
                turn.tool_called = True
            self.text.drop_tool_args()  # the call says them once, whole
            self.text.add("meta", f"\n→ {event.name}({event.arguments})\n")
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
            self.amdahl = event.data.get("amdahl_max_speedup", ()) if isinstance(event, Extra) else ()
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
                    self.text.add(channel, "".join(run))
                    run.clear()
                channel = delta.channel
                run.append(delta.text)
                on_delta(delta, t, False)
        if run:
            self.text.add(channel, "".join(run))
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
        self.text.add(channel, "".join(texts))
        self._sources.add("provider")
        state = turn.text_in(channel, first)
        turn.last_token = last
        turn.token_events += chunks
        added = sum(counts)
        turn.streamed += added
        totals = list(itertools.accumulate(counts, initial=self._stream_total))
        del totals[0]
        self._stream_total = totals[-1]
        gauge.extend_window(self._window, times, totals)
        gauge.add_to_history(self.history, times, counts, added)
        if last > self.last_t:
            self.last_t = last
        if self.state != state:
            self._set_state(state)
        return True

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
            turn = LiveTurn(start=0.0, wait_from=0.0)
            turns.append(turn)
        channel = delta.channel
        if piece:
            self.text.add(channel, delta.text)
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
        if len(window) > MAX_WINDOW_SAMPLES:  # as gauge.prune(window, t), inline: at high rates, once per event
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

    def hold(self, state: LaneState) -> None:
        """Show ``state`` until the next event: what a proxied agent does between its calls (its person, or
        nothing), known for sure only when its next call comes."""
        self._set_state(state)
        self.version += 1

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
        if not self.answered and not self.tokens:
            return None  # it failed before any answer (a missing key, a closed port): it has no end-to-end time
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

    def rate(self, now: float) -> float:
        """Tokens per second over the window up to the newest token, as :func:`.rate.rate` reads it."""
        return gauge.rate(self._window, now)

    def history_rates(self, now: float, count: int) -> list[float]:
        """The last ``count`` complete history buckets before ``now``, in tok/s, oldest first."""
        return gauge.history_rates(self.history, now, count, self.finished)

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
        open_end = self.ended_at
        if open_end is None:
            open_end = max(now, self.last_t)
        return [span for turn in self.turns for span in turn.spans(open_end)]

    def loop_so_far(self, now: float) -> LoopMetrics:
        """The lane as a loop (a single prompt is a loop of one turn) up to ``now``, or to its end once ended:
        where the time went, the model's share and the Amdahl bound, as ``loop.loop_metrics`` computes them
        from the events, from the live state (cheap enough for every frame)."""
        from ..metrics.loop import LoopMetrics, apply_path, breakdown, model_time  # (the bottleneck view's alone)

        start = self.first_t if self.first_t is not None else 0.0
        end = self.ended_at
        if end is None:
            end = max(now, self.last_t) if self.first_t is not None else start
        m = LoopMetrics(ok=self.ok, start=start, error=self.error, ttft_s=self.ttft,
                        output_tokens=self.tokens, decode_tok_s=self.decode_rate(), e2e_s=end - start)
        m.segments = self.segments(now)
        if self.path:  # a trace's lane: along its critical path, as ``tokrace traces`` counts it
            apply_path(m, self.path, start, end, self.amdahl)
            return m
        m.breakdown = breakdown(m.segments, start, end)
        m.model_parts = model_time([*self._turn_spans(now), *(s for s in m.segments if s.chain is not None)])
        m.model_s = sum(m.model_parts.values())
        e2e = end - start
        if e2e > 0:
            m.model_share = m.model_s / e2e
            rest = e2e - m.model_s
            m.amdahl_max_speedup = e2e / rest if rest > 1e-9 else None
        return m

    @property
    def pieces(self) -> deque[tuple[str, str]]:
        """The lane's latest text as (channel, text) pieces: :attr:`.text.LaneText.pieces`."""
        return self.text.pieces

    @property
    def answer_cut(self) -> int:
        """Characters of the answer that are no longer kept (the recording has them)."""
        return self.text.answer_cut

    def tail(self, chars: int) -> list[tuple[str, str]]:
        """The last pieces holding at least ``chars`` characters (the first one cut), for the visible tail."""
        return self.text.tail(chars)

    def answer_text(self) -> str:
        """The visible answer of every turn, for the final Markdown: :meth:`.text.LaneText.answer`."""
        return self.text.answer()


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

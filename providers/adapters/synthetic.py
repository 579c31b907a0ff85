"""The synthetic provider: a deterministic stream from a profile (TTFT, tok/s, jitter, seed, text).

Same profile and seed give the same events, byte for byte; the offline demo and most tests run on it.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..model.errors import ConfigError
from ..model.events import Channel, Delta, DeltaRun, Done, Error, Event, Headers, Request, ToolCall, Usage
from ..model.messages import TurnRequest
from ..model.tiers import MAX_TOKENS_LIMIT, TierSpec
from ..timing.clock import Clock
from .base import Provider

PASSAGE: Final[str] = (
    "When a model streams fifty tokens a second, it is the slow part of almost every loop, and making it faster "
    "pays off at once. At seven hundred and fifty tokens a second the picture changes. A paragraph that took "
    "twenty seconds to arrive now lands in under two, and the eye stops waiting for the model. What remains is "
    "everything around it: the connection that has to be opened, the queue in front of the first token, the "
    "tool call that reads a log or runs the tests, the person who has to look at a diff and say yes. None of "
    "those get faster when the tokens do. This is Amdahl's law in a new costume. If the model accounts for "
    "half of a coding loop, an infinitely fast model can at best make the loop twice as fast. If it accounts "
    "for a tenth, the best case is eleven percent. So before moving work to a faster tier, measure the whole "
    "loop on the same traces: the time to the first token, the tool waits, the retries, the review burden and "
    "the cost. Speed is worth paying for where answers have a short shelf life, such as an incident at three "
    "in the morning, a live research question, or a voice that must not fall silent mid-sentence. Elsewhere "
    "the honest answer may be that the network and the people are now the bottleneck, and that is a finding "
    "too. "
)
"""The built-in answer text: real prose with sentence ends, about the point tokrace makes."""

THINKING: Final[str] = (
    "The question asks why the bottleneck moves. Start from the loop: request, wait, tokens, tools, review. "
    "Only the token part scales with the model's speed. Estimate each share, then apply Amdahl's law. "
)
"""The built-in reasoning text for the optional thinking phase."""

_PIECE: Final[re.Pattern[str]] = re.compile(r" ?[A-Za-z]+|'[a-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")
"""A rough BPE-like pre-tokenizer: words with their leading space, numbers, punctuation, whitespace."""


def pieces(text: str) -> list[str]:
    """Split text into token-sized pieces (close to what a BPE tokenizer counts for English prose)."""
    return _PIECE.findall(text)


def _cycle(text: str, n: int) -> Iterator[str]:
    """The first ``n`` pieces of ``text`` repeated as often as needed (``text`` is one of the built-in ones),
    generated as they are needed: a schedule of a million tokens never exists whole."""
    return itertools.islice(itertools.cycle(pieces(text)), n)


BATCH_MAX: Final[int] = 256
"""The most deltas a synthetic lane hands over at once: a lane far behind its schedule (a held event loop) catches
up a list at a time, letting the other lanes and the screen run between lists (see ``RealClock._due``)."""

MIN_RATE: Final[float] = 0.01
MAX_RATE: Final[float] = 10_000_000.0
"""The token rates a profile may have: slower than a token every 100 s or faster than ten million a second is a
typo, and would stall a clock or flood the screen."""
MAX_DELAY_MS: Final[float] = 3_600_000.0
"""The longest time to first byte or token a profile may have (an hour)."""


def _batched(items: Iterable[str], k: int) -> Iterator[tuple[str, ...]]:
    """``items`` in tuples of ``k`` (the last may be shorter), lazily (``itertools.batched`` is Python 3.12's)."""
    it = iter(items)
    while chunk := tuple(itertools.islice(it, k)):
        yield chunk


@dataclass(frozen=True, slots=True)
class Profile:
    """How a synthetic tier streams."""

    ttft_ms: float = 500.0
    tok_s: float = 50.0
    jitter: float = 0.0
    seed: int = 0
    tokens_per_event: int = 1
    ttfb_ms: float | None = None
    thinking_tokens: int = 0
    thinking_tok_s: float | None = None
    text: str | None = None
    fail_after_tokens: int | None = None
    """For demos and tests of failure: stop with an error after this many answer tokens."""

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Profile:
        profile = cls(**{k: v for k, v in options.items() if k in SYNTHETIC_OPTIONS})
        for key, ok, expected in (
            ("tok_s", MIN_RATE <= profile.tok_s <= MAX_RATE, f"from {MIN_RATE:g} to {MAX_RATE:g} tokens a second"),
            ("ttft_ms", 0 <= profile.ttft_ms <= MAX_DELAY_MS, f"from 0 to {MAX_DELAY_MS:g} ms (an hour)"),
            ("jitter", 0 <= profile.jitter < 1, "at least 0 and below 1 (it is relative: 0.15 means ±15 %)"),
            ("tokens_per_event", 1 <= profile.tokens_per_event <= MAX_TOKENS_LIMIT,
             f"from 1 to {MAX_TOKENS_LIMIT}"),
            ("ttfb_ms", profile.ttfb_ms is None or 0 <= profile.ttfb_ms <= MAX_DELAY_MS,
             f"from 0 to {MAX_DELAY_MS:g} ms (an hour)"),
            ("thinking_tokens", 0 <= profile.thinking_tokens <= MAX_TOKENS_LIMIT, f"from 0 to {MAX_TOKENS_LIMIT}"),
            ("thinking_tok_s", profile.thinking_tok_s is None or MIN_RATE <= profile.thinking_tok_s <= MAX_RATE,
             f"from {MIN_RATE:g} to {MAX_RATE:g} tokens a second"),
            ("fail_after_tokens", profile.fail_after_tokens is None or profile.fail_after_tokens >= 0,
             "0 or more"),
            ("text", profile.text is None or bool(profile.text.strip()), "some words to stream"),
        ):
            if not ok:
                raise ConfigError(f"{key} must be {expected}", key=key)
        return profile


SYNTHETIC_OPTIONS: Final[dict[str, tuple[type, ...]]] = {
    "ttft_ms": (int, float),
    "tok_s": (int, float),
    "jitter": (int, float),
    "seed": (int,),
    "tokens_per_event": (int,),
    "ttfb_ms": (int, float),
    "thinking_tokens": (int,),
    "thinking_tok_s": (int, float),
    "text": (str,),
    "fail_after_tokens": (int,),
}
"""The profile keys a synthetic tier accepts, with their TOML types."""


@dataclass(frozen=True, slots=True)
class Step:
    """One scheduled event of a synthetic stream, before it is stamped by a clock."""

    t: float
    text: str
    channel: str
    tokens: int
    call: int | None = None
    """For ``tool_args`` steps: which of the turn's tool calls these arguments belong to."""


def schedule(profile: Profile, max_tokens: int, turn: int = 0,
             tool_args: Sequence[str] = ()) -> Iterator[Step]:
    """The planned deltas: reasoning first (if any), then the answer (or, for a turn with scripted tool calls,
    each call's arguments in turn instead); deterministic for a profile and seed.

    Times are computed from token counts, not summed gap by gap, so a profile without jitter lands exactly on
    ``ttft + n / tok_s`` (jitter is a separate, seeded drift)."""
    return itertools.starmap(Step, _plan(profile, max_tokens, turn, tool_args))


PlannedStep = tuple[float, str, str, int, "int | None"]
"""A :class:`Step` as a plain tuple (t, text, channel, tokens, call): what the provider's own loop reads."""


def _plan(profile: Profile, max_tokens: int, turn: int, tool_args: Sequence[str]) -> Iterator[PlannedStep]:
    """:func:`schedule`'s steps as tuples, made as cheaply as they can be (a stream reads one per event)."""
    rng = random.Random(f"{profile.seed}:{turn}")
    jitter = profile.jitter
    uniform = rng.uniform
    random_ = rng.random
    base = profile.ttft_ms / 1000.0
    drift = base * jitter * uniform(-1.0, 1.0) if jitter else 0.0
    k = profile.tokens_per_event
    thinking = min(profile.thinking_tokens, max_tokens)
    answer: Iterable[str] = (_cycle(PASSAGE, max_tokens - thinking) if profile.text is None
                             else pieces(profile.text)[: max_tokens - thinking])
    reasoning: Iterable[str] = _cycle(THINKING, thinking)
    phases: list[tuple[str, Iterable[str], float, int | None]] = [
        ("reasoning", reasoning, profile.thinking_tok_s or profile.tok_s, None)]
    if tool_args:
        phases.extend(("tool_args", pieces(args), profile.tok_s, n) for n, args in enumerate(tool_args))
    else:
        phases.append(("content", answer, profile.tok_s, None))
    first = True
    for channel, toks, rate, call in phases:
        counted = 0
        t = base
        if k == 1:  # one piece per event: no batching, no joining (the same figures as below)
            step = 1 / rate * jitter  # ((1 / rate) * jitter) * u, the order of the operations below
            for piece in toks:
                if first:
                    first = False
                else:
                    counted += 1
                    if jitter:
                        drift += step * (-1.0 + 2.0 * random_())  # uniform(-1.0, 1.0), as it computes it
                t = base + counted / rate
                yield (t + drift, piece, channel, 1, call)
        else:
            for chunk in _batched(toks, k):
                n = len(chunk)
                if first:
                    first = False
                else:
                    counted += n
                    if jitter:
                        drift += n / rate * jitter * uniform(-1.0, 1.0)
                t = base + counted / rate
                yield (t + drift, "".join(chunk), channel, n, call)
        base = t


class SyntheticProvider(Provider):
    """Streams a built-in or given text at a profile's pace, with the provider-like usage at the end.

    When a scenario scripts tool calls for the turn, it streams each call's arguments (``tool_args`` deltas)
    instead of an answer, ends each call with a ``ToolCall`` event and the turn with
    ``finish_reason="tool_calls"``.
    """

    name = "synthetic"

    def __init__(self, tier: TierSpec) -> None:
        super().__init__(tier)
        self.profile = Profile.from_options(tier.options)

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        async for item in self._batches(request, clock):
            if type(item) is DeltaRun:
                for event in item:
                    yield event
            else:
                yield item  # type: ignore[misc]

    def stream_batched(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event | DeltaRun]:
        """:meth:`stream`'s events, with the deltas of one channel due at one wake-up handed over together, as a
        :class:`DeltaRun` (at most BATCH_MAX of them; a delta alone comes as itself): the same events, in the same
        order, at the same times, for a fraction of the calls and no ``Delta`` made (the race hands such a run to
        its listeners in one go: ``Race.emit_many``).
        A subclass that streams its own way (its own :meth:`stream`) is streamed as it says, an event at a time."""
        if type(self).stream is not SyntheticProvider.stream:
            return self.stream(request, clock)
        return self._batches(request, clock)

    async def _batches(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event | DeltaRun]:
        profile = self.profile
        start = clock.now()
        yield Request(t=start, turn=request.turn, model=self.tier.model or "synthetic", endpoint="synthetic")
        calls = request.scripted_tool_calls
        args = [str(c["arguments"]) for c in calls]
        steps = _plan(profile, request.max_tokens, request.turn, args)
        step = next(steps, None)
        ttfb = profile.ttfb_ms / 1000.0 if profile.ttfb_ms is not None else min(0.02, profile.ttft_ms / 1000.0)
        if step is not None:
            ttfb = min(ttfb, step[0])
        # Each event is stamped with the moment the profile produces it, not with when a busy loop got round to
        # waking this lane: the profile is this server's clock, as the socket is an HTTP server's, so a lane drawn
        # on the screen and the same lane in bench give the same figures (a late wake-up delays only the drawing).
        await clock.sleep_until(start + ttfb)
        yield Headers(t=start + ttfb, status=200, request_id=f"synthetic-{request.turn}")
        input_tokens = sum(len(pieces(m.content)) for m in request.conversation())
        produced = reasoning = answer = 0
        last = start + ttfb
        called = 0
        fail_after = profile.fail_after_tokens
        sleep_until = clock.sleep_until
        # On a virtual clock with a grid (bench's --fast-forward), the lane hands over each grid cell's steps
        # together at the moment of the cell's last one (see VirtualClock): one hand-over of time per cell, not per
        # event, and time stands exactly where it stood after that event. Elsewhere it hands over every step due
        # by the moment it woke (on the real clock, a few milliseconds' worth; on virtual time, that moment's).
        grid: float = getattr(clock, "grid", 0.0) if clock.virtual else 0.0
        while step is not None:  # once per wake-up (and per channel: a run of deltas is of one channel)
            if grid:
                horizon = math.ceil((start + step[0]) / grid) * grid
            else:
                horizon = await sleep_until(start + step[0])
            channel: Channel = step[2]  # type: ignore[assignment]
            times: list[float] = []
            texts: list[str] = []
            counts: list[int] = []
            failed = False
            call_end: int | None = None
            while True:  # once per event: kept lean (columns, no Delta made: see DeltaRun)
                t, text, _, tokens, call_no = step  # type: ignore[misc]  # never None here
                following = next(steps, None)
                last = start + t
                times.append(last)
                texts.append(text)
                counts.append(tokens)
                produced += tokens
                if channel == "reasoning":
                    reasoning += tokens
                else:
                    answer += tokens
                step = following
                if fail_after is not None and answer >= fail_after:
                    failed = True
                    break
                if call_no is not None and (following is None or following[4] != call_no):
                    call_end = call_no
                    break
                if (following is None or start + following[0] > horizon or len(times) >= BATCH_MAX
                        or following[2] != channel):
                    break
            if grid:
                await sleep_until(last)
            yield (Delta(last, text, channel, tokens) if len(times) == 1
                   else DeltaRun(times, texts, channel, counts))
            if failed:
                yield Error(t=last, error="synthetic", message="synthetic failure after "
                            f"{answer} tokens (fail_after_tokens in this tier's profile)")
                return
            if call_end is not None:
                while called <= call_end:
                    yield _tool_call(calls[called], last)  # a call's event comes as its last argument lands
                    called += 1
        for call in calls[called:]:
            yield _tool_call(call, last)
        yield Usage(t=last, input=input_tokens, output=produced, reasoning=reasoning)
        finish = "tool_calls" if calls else "length" if produced >= request.max_tokens else "stop"
        yield Done(t=last, finish_reason=finish)


def _tool_call(call: dict[str, Any], t: float) -> ToolCall:
    return ToolCall(t=t, id=str(call["id"]), name=str(call["name"]), arguments=str(call["arguments"]))

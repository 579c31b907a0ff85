"""The voice lens: when would a speech engine start talking on a lane, and would it ever run dry?

A pure model of a speaking voice over a lane's events, fed incrementally and queried at any time.

The model (one rule each, documented so the numbers can be argued with):

- The voice speaks the answer (``content`` deltas only; reasoning and tool arguments are never spoken)
  sentence by sentence, as a streaming text-to-speech engine does: a sentence can be spoken once it is
  complete, by the rule of ``ttfs_s`` (an end mark followed by whitespace), or once the turn ended normally
  (the rest is the last sentence; after an error the unfinished rest is never spoken).
- Each sentence needs the TTS delay to be synthesized after it is complete, so sentence k can start at
  ``max(end of sentence k-1, complete_k + tts_delay)``. The first audio is therefore ``ttfs + tts_delay``.
- The voice speaks at a steady rate in words (``\\S+`` runs) per minute; within a word the playhead moves
  evenly over its characters. The rate can change at any moment; only speech after that moment is affected.
- When the voice finishes a sentence before the next one can start, it falls silent: a stall.
- The margin is how long the voice could go on with what is ready before the next sentence becomes
  speakable (the lead of the ready text over the voice, in seconds of speech); its smallest value over the
  answer is ``min_margin_s``, 0 when the voice stalled.
- Each turn of a lane is voiced on its own (in a voice chat the next question comes after the answer).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from ..metrics.turn import SENTENCE_END, SENTENCE_TAIL, SegmentSpan
from ..model.events import Delta, Done, Error, Event, Request, Segment
from ..model.units import GLUE, duration

DEFAULT_WPM: Final[float] = 165.0
"""A typical conversational speaking rate, in words per minute."""

DEFAULT_TTS_DELAY_S: Final[float] = 0.2
"""How long a streaming text-to-speech engine takes from a complete sentence to its first audio."""

CONVERSATION_GAP_S: Final[float] = 1.0
"""A reply whose first audio comes later than this after the question is a gap in a conversation."""

_EPS: Final[float] = 1e-9

_WORD: Final[re.Pattern[str]] = re.compile(r"\S+")
"""A spoken word: a run of non-space characters (punctuation rides on its word)."""

VOICE_DEFINITIONS: Final[dict[str, str]] = {
    "ttfs_s": "request start → end of the answer's first sentence (the same as the run's ttfs_s)",
    "first_audio_s": "ttfs_s + the TTS delay: when the voice starts speaking (a loop: its first turn's; every "
                     "turn has its own under turns)",
    "first_audio_max_s": "the slowest first audio of any turn, each from its own request: what the conversation "
                         "verdict judges (one turn: first_audio_s)",
    "stalls": "times the voice finished a sentence before the next one could be spoken",
    "stall_s": "total silence after speech began, before the answer was fully spoken",
    "min_margin_s": "the smallest lead of speakable text over the voice, in speech seconds; 0 if it stalled",
    "falls_behind": "whether the tier ever fell behind the speaking voice (stalls > 0)",
    "speech_end_s": "request start → the voice has spoken the whole answer",
}
"""One line per voice number: what it means."""

VoiceState: TypeAlias = Literal["waiting", "speaking", "stalled", "done"]
"""Before the first audio; speaking; silent after speech began while more may come; everything spoken."""


@dataclass(frozen=True, slots=True)
class VoiceSettings:
    """How the voice speaks: its rate and its text-to-speech start delay."""

    wpm: float = DEFAULT_WPM
    tts_delay_s: float = DEFAULT_TTS_DELAY_S

    def __post_init__(self) -> None:
        if self.wpm <= 0:
            raise ValueError(f"the speaking rate must be above 0 words per minute, got {self.wpm}")
        if self.tts_delay_s < 0:
            raise ValueError(f"the TTS delay must be 0 or more, got {self.tts_delay_s}")


class SentenceSplitter:
    """Cuts streamed text into sentences as they complete, by the rule of ``ttfs_s``.

    Linear in the text however it arrives: the pieces are kept as they came and joined only when asked for
    (``text``), and only the unfinished sentence is joined when a sentence completes."""

    def __init__(self) -> None:
        self.cut = 0
        """Where the last complete sentence ended."""
        self.length = 0
        """Characters fed so far."""
        self._parts: list[str] = []
        self._joined = ""
        self._joined_parts = 0
        self._pending: list[str] = []
        """The text since the cut, in pieces."""
        self._trail = ""
        """The text's trailing run of marks and closers since the cut: the only place a mark can still gain the
        whitespace that completes its sentence (earlier marks either matched already or never will)."""

    @property
    def text(self) -> str:
        """All the text fed so far."""
        if self._joined_parts < len(self._parts):
            self._joined += "".join(self._parts[self._joined_parts:])
            self._joined_parts = len(self._parts)
        return self._joined

    def feed(self, piece: str) -> list[tuple[int, int]]:
        """Append a piece; the (start, end) character spans of the sentences it completed."""
        return [(start, end) for start, end, _ in self.feed_sentences(piece)]

    def feed_sentences(self, piece: str) -> list[tuple[int, int, str]]:
        """Append a piece; the sentences it completed, as (start, end, text)."""
        if not piece:
            return []
        self._parts.append(piece)
        self._pending.append(piece)
        window = self._trail + piece
        base = self.length - len(self._trail)
        self.length += len(piece)
        out: list[tuple[int, int, str]] = []
        pos = 0
        while (m := SENTENCE_END.search(window, pos)) is not None:
            end = base + m.end()
            pending = "".join(self._pending)
            out.append((self.cut, end, pending[: end - self.cut]))
            self._pending = [pending[end - self.cut:]]
            self.cut, pos = end, m.end()
        i = len(window)
        while i > pos and window[i - 1] in SENTENCE_TAIL:
            i -= 1
        self._trail = window[i:]
        return out

    def finish(self) -> tuple[int, int] | None:
        """The turn ended normally: the rest, when it has any words, is the last sentence."""
        last = self.finish_sentence()
        return None if last is None else (last[0], last[1])

    def finish_sentence(self) -> tuple[int, int, str] | None:
        """As :meth:`finish`, with the sentence's text."""
        rest = "".join(self._pending)
        if not rest.strip():
            return None
        sentence = (self.cut, self.length, rest)
        self.cut, self._pending, self._trail = self.length, [], ""
        return sentence


@dataclass(frozen=True, slots=True)
class Sentence:
    """A complete sentence of the answer: its characters, when it was complete, and its words' spans."""

    start: int
    end: int
    complete: float
    words: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Speech:
    """A stretch of speech at one rate: the playhead goes from word ``w0`` at ``t0`` to ``w1`` at ``t1``."""

    t0: float
    t1: float
    w0: float
    w1: float


@dataclass(frozen=True, slots=True)
class Playhead:
    """Where the voice is at a moment: characters of the answer spoken, words spoken, and its state."""

    chars: int
    words: float
    state: VoiceState


@dataclass(slots=True)
class VoiceMetrics:
    """The voice numbers of a turn or, folded over turns, of a lane's run. Times from the turn's start."""

    wpm: float
    tts_delay_s: float
    ttfs_s: float | None = None
    first_audio_s: float | None = None
    first_audio_max_s: float | None = None
    stalls: int = 0
    stall_s: float = 0.0
    min_margin_s: float | None = None
    """``None`` when no sentence was ever waited for (the whole answer was ready when the voice began)."""
    speech_end_s: float | None = None
    stall_spans: list[SegmentSpan] = field(default_factory=list)
    """The silences, in lane time, as ``stall`` segments of the timeline."""
    turns: list[VoiceMetrics] = field(default_factory=list)
    """Each turn's own numbers, when the run had more than one."""

    @property
    def falls_behind(self) -> bool:
        """Whether the tier ever fell behind the speaking voice."""
        return self.stalls > 0

    @property
    def spoke(self) -> bool:
        return self.first_audio_s is not None

    def to_json(self) -> dict[str, Any]:
        """The ``voice`` object of a run in the ``--json`` output."""
        out: dict[str, Any] = {
            "wpm": _r(self.wpm), "tts_delay_s": _r(self.tts_delay_s),
            "ttfs_s": _r(self.ttfs_s), "first_audio_s": _r(self.first_audio_s),
            "first_audio_max_s": _r(self.first_audio_max_s),
            "stalls": self.stalls, "stall_s": _r(self.stall_s), "min_margin_s": _r(self.min_margin_s),
            "falls_behind": self.falls_behind, "speech_end_s": _r(self.speech_end_s),
            "segments": [s.to_json() for s in self.stall_spans],
        }
        if self.turns:
            out["turns"] = [t.to_json() for t in self.turns]
        return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


class VoiceTrack:
    """The voice over one turn's answer: fed as text arrives (``feed`` or ``add``/``end``), asked at any time.

    Times are lane times, like the events'. Queries assume every event up to the asked time has been fed.
    """

    def __init__(self, settings: VoiceSettings | None = None, start: float = 0.0) -> None:
        self.settings = settings or VoiceSettings()
        self.start = start
        """The turn's start (its ``Request``)."""
        self.sentences: list[Sentence] = []
        self.ended = False
        """The turn is over: no more text will come."""
        self._splitter = SentenceSplitter()
        self._words: list[tuple[int, int]] = []
        self._rates: list[tuple[float, float]] = [(float("-inf"), self.settings.wpm)]
        self._spans: list[Speech] = []
        self._span_starts: list[float] = []
        self._stalls: list[tuple[float, float]] = []
        self._ends: list[float] = []
        """When the voice finishes each sentence."""
        self._planned = 0
        """Words of the sentences planned so far."""

    @property
    def text(self) -> str:
        """The answer text so far."""
        return self._splitter.text

    def feed(self, event: Event) -> None:
        """Take one of the turn's events (anything that is not its request, answer text or end is ignored)."""
        if isinstance(event, Request):
            self.start = event.t
        elif isinstance(event, Delta) and event.channel == "content" and event.text:
            self.add(event.t, event.text)
        elif isinstance(event, Done | Error):
            self.end(event.t, ok=isinstance(event, Done))

    def add(self, t: float, text: str) -> None:
        """Answer text arrived at ``t``."""
        if self.ended:
            return
        for start, end, sentence in self._splitter.feed_sentences(text):
            self._add_sentence(start, end, sentence, t)

    def end(self, t: float, ok: bool = True) -> None:
        """The turn ended at ``t``: normally (the rest is spoken as the last sentence) or with an error."""
        if self.ended:
            return
        self.ended = True
        last = self._splitter.finish_sentence() if ok else None
        if last is not None:
            self._add_sentence(*last, t)

    def set_wpm(self, wpm: float, at: float) -> None:
        """Speak at ``wpm`` from time ``at`` on (a live adjustment; speech before ``at`` stays as it was)."""
        if wpm <= 0:
            raise ValueError(f"the speaking rate must be above 0 words per minute, got {wpm}")
        self._rates = [r for r in self._rates if r[0] < at] + [(at, wpm)]
        self._replan()

    def _add_sentence(self, start: int, end: int, text: str, complete: float) -> None:
        words = tuple((start + a, start + b) for a, b in (m.span() for m in _WORD.finditer(text)))
        sentence = Sentence(start, end, complete, words)
        self.sentences.append(sentence)
        self._words.extend(words)
        self._plan(sentence)

    def _replan(self) -> None:
        self._spans, self._span_starts, self._stalls, self._ends, self._planned = [], [], [], [], 0
        for sentence in self.sentences:
            self._plan(sentence)

    def _plan(self, sentence: Sentence) -> None:
        ready = sentence.complete + self.settings.tts_delay_s
        if not self._ends:
            t = ready
        else:
            t = self._ends[-1]
            if ready > t + _EPS:
                self._stalls.append((t, ready))
                t = ready
        w = float(self._planned)
        self._planned += len(sentence.words)
        left = float(len(sentence.words))
        while left > _EPS:
            i = bisect.bisect_right(self._rates, t, key=lambda r: r[0]) - 1
            wpm = self._rates[i][1]
            change = self._rates[i + 1][0] if i + 1 < len(self._rates) else float("inf")
            need = left * 60.0 / wpm
            if t + need <= change:
                step, t1 = left, t + need
            else:
                step, t1 = (change - t) * wpm / 60.0, change
            if t1 > t:
                self._spans.append(Speech(t, t1, w, w + step))
                self._span_starts.append(t)
            t, w, left = t1, w + step, left - step
        self._ends.append(t)

    def at(self, t: float) -> Playhead:
        """Where the voice is at time ``t``."""
        if not self._spans or t < self._spans[0].t0:
            return Playhead(0, 0.0, "done" if self.ended and not self._spans else "waiting")
        i = bisect.bisect_right(self._span_starts, t) - 1
        span = self._spans[i]
        if t < span.t1:
            words = span.w0 + (span.w1 - span.w0) * (t - span.t0) / (span.t1 - span.t0)
            return Playhead(self._chars(words), words, "speaking")
        last = i == len(self._spans) - 1
        return Playhead(self._chars(span.w1), span.w1, "done" if last and self.ended else "stalled")

    def _chars(self, words: float) -> int:
        i = int(words + _EPS)
        frac = words - i
        if i >= len(self._words):
            return self._words[-1][1] if self._words else 0
        if frac <= _EPS:
            return self._words[i - 1][1] if i > 0 else 0
        a, b = self._words[i]
        return a + int(frac * (b - a))

    def stall_spans(self, until: float | None = None) -> list[tuple[float, float]]:
        """The silences after speech began. With ``until`` (live), those up to that moment, including one
        still going on; a silence at the end counts until the turn's end shows the voice simply finished."""
        if until is None:
            return list(self._stalls)
        spans = [(a, min(b, until)) for a, b in self._stalls if a < until]
        if self._ends and not self.ended and self._ends[-1] < until:
            spans.append((self._ends[-1], until))
        return spans

    def segments(self, until: float | None = None) -> list[Segment]:
        """The silences as ``stall`` segments for the timeline."""
        return [Segment(t=b, seg="stall", start=a, end=b, label="voice") for a, b in self.stall_spans(until)]

    def metrics(self) -> VoiceMetrics:
        """This turn's voice numbers (final once the turn has ended)."""
        s = self.settings
        m = VoiceMetrics(wpm=s.wpm, tts_delay_s=s.tts_delay_s)
        if not self.sentences:
            return m
        m.ttfs_s = self.sentences[0].complete - self.start
        m.first_audio_s = m.first_audio_max_s = m.ttfs_s + s.tts_delay_s
        m.stalls = len(self._stalls)
        m.stall_s = sum((b - a for a, b in self._stalls), 0.0)
        m.stall_spans = [SegmentSpan("stall", a, b, "voice") for a, b in self._stalls]
        margins = [self._ends[k - 1] - (cur.complete + s.tts_delay_s)
                   for k, (prev, cur) in enumerate(zip(self.sentences, self.sentences[1:], strict=False), 1)
                   if cur.complete > prev.complete]
        m.min_margin_s = max(0.0, min(margins)) if margins else None
        if self.ended:
            m.speech_end_s = self._ends[-1] - self.start
        return m


class LaneVoice:
    """The voice over a whole lane: a :class:`VoiceTrack` per turn, fed the lane's events as they happen."""

    def __init__(self, settings: VoiceSettings | None = None) -> None:
        self.settings = settings or VoiceSettings()
        self.tracks: list[VoiceTrack] = []
        self._wpm: tuple[float, float] | None = None

    def feed(self, event: Event) -> None:
        """Take one of the lane's events; a ``Request`` starts the next turn's track. What comes before the first
        request (a scenario's opening tool or person) has nothing to say."""
        if isinstance(event, Request):
            track = VoiceTrack(self.settings, start=event.t)
            if self._wpm is not None:
                track.set_wpm(self._wpm[0], self._wpm[1])
            self.tracks.append(track)
        if self.tracks:
            self.tracks[-1].feed(event)

    def set_wpm(self, wpm: float, at: float) -> None:
        """Speak at ``wpm`` from ``at`` on, in the current turn and every later one."""
        self._wpm = (wpm, at)
        for track in self.tracks:
            track.set_wpm(wpm, at)

    def at(self, t: float) -> tuple[int, Playhead] | None:
        """The turn voiced at ``t`` (the latest that had started) and its playhead; ``None`` before any."""
        for index in range(len(self.tracks) - 1, -1, -1):
            if self.tracks[index].start <= t:
                return index, self.tracks[index].at(t)
        return None

    def segments(self, until: float | None = None) -> list[Segment]:
        """Every turn's silences as ``stall`` segments."""
        return [seg for track in self.tracks for seg in track.segments(until)]

    def metrics(self) -> VoiceMetrics:
        """The run's voice numbers: one turn's own, or folded over the turns (see :func:`fold`)."""
        turns = [track.metrics() for track in self.tracks]
        if len(turns) == 1:
            return turns[0]
        return fold(turns, self.tracks[0].start if self.tracks else 0.0,
                    [track.start for track in self.tracks], self.settings)


def fold(turns: Sequence[VoiceMetrics], origin: float, starts: Sequence[float],
         settings: VoiceSettings) -> VoiceMetrics:
    """A run's voice numbers over its turns: TTFS and first audio of the first turn that spoke, the latest
    first audio of any turn, stalls and silence summed, the smallest margin, and when the last answer was
    spoken (from the first turn's start)."""
    m = VoiceMetrics(wpm=settings.wpm, tts_delay_s=settings.tts_delay_s, turns=list(turns))
    spoke = [(t, start) for t, start in zip(turns, starts, strict=True) if t.spoke]
    if spoke:
        m.ttfs_s, m.first_audio_s = spoke[0][0].ttfs_s, spoke[0][0].first_audio_s
        m.first_audio_max_s = max(t.first_audio_s or 0.0 for t, _ in spoke)
        last, last_start = spoke[-1]
        m.speech_end_s = None if last.speech_end_s is None else last_start + last.speech_end_s - origin
    m.stalls = sum(t.stalls for t in turns)
    m.stall_s = sum((t.stall_s for t in turns), 0.0)
    m.stall_spans = [s for t in turns for s in t.stall_spans]
    margins = [t.min_margin_s for t in turns if t.min_margin_s is not None]
    m.min_margin_s = min(margins) if margins else None
    return m


def lane_voice(events: Iterable[Event], settings: VoiceSettings | None = None) -> VoiceMetrics:
    """The voice numbers of a lane's run, from its events alone."""
    voice = LaneVoice(settings)
    for event in events:
        voice.feed(event)
    return voice.metrics()


def conversation_verdict(runs: Sequence[VoiceMetrics], gap_s: float = CONVERSATION_GAP_S) -> tuple[bool, str]:
    """Whether a tier could hold a conversation without a gap: in every run and turn the voice started within
    ``gap_s`` of the question and never fell silent mid-answer. Also the reason, in a few words."""
    if not runs or not all(r.spoke for r in runs):
        return False, "never spoke"
    worst = max(r.first_audio_max_s or 0.0 for r in runs)
    # Over several turns or runs the figure judged is the slowest first audio, and says so.
    label = "slowest first audio" if len(runs) > 1 or any(len(r.turns) > 1 for r in runs) else "first audio"
    stalls = max(runs, key=lambda r: (r.stalls, r.stall_s))
    problems = []
    # A number is never split from its unit when the sentence wraps (a no-break space between them).
    if worst > gap_s:
        problems.append(f"{label} {duration(worst, glue=GLUE)}")
    if stalls.stalls:
        plural = "s" if stalls.stalls != 1 else ""
        problems.append(f"{stalls.stalls} stall{plural}, {duration(stalls.stall_s, 1, glue=GLUE)} silent")
    if problems:
        return False, ", ".join(problems)
    return True, f"{label} {duration(worst, glue=GLUE)}, no stalls"

"""The voice lens on a running race: a :class:`LaneVoice` per lane, fed at frame rate from the race's own record
of each lane's events (nothing runs per token, and nothing at all until the lens is first turned on), and asked
where the voice is at the moment the screen draws.

Turning the lens on mid-race loses nothing: the lanes catch up on every event recorded so far. The speaking rate
can change at any moment; speech before that moment stays as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, TypeAlias

from ..metrics.turn import SegmentSpan
from ..model.events import Event
from .lens import LaneVoice, VoiceMetrics, VoiceSettings, VoiceTrack, conversation_verdict

WPM_STEP: Final[float] = 15.0
"""How much one key press changes the speaking rate."""

WPM_MIN: Final[float] = 60.0
WPM_MAX: Final[float] = 400.0

VoiceShown: TypeAlias = Literal["waiting", "speaking", "silent", "spoken", "mute"]
"""What a lane's voice is doing, as its badge says: before the first audio; speaking; fallen silent after
speech began while more may come; everything said; nothing to say (the turn ended without an answer)."""


@dataclass(frozen=True, slots=True)
class VoiceNow:
    """A lane's voice at one moment: the text of the turn being voiced and how far the voice is through it."""

    state: VoiceShown
    text: str
    """The voiced turn's answer so far (content only: that is what the voice speaks)."""
    spoken: int
    """Characters of ``text`` spoken."""
    ready: int
    """Characters of ``text`` that can be spoken (complete sentences); the rest is still arriving."""
    ahead_s: float
    """The ready text not yet spoken, in seconds of speech at the current rate."""
    turn: int
    """Which turn is voiced (0-based)."""
    ttfs_s: float | None
    """The voiced turn's time to first sentence, from its request."""
    first_audio_s: float | None
    """The voiced turn's own first audio, from its request (a per-turn figure when the lane has several turns)."""
    stalls: int
    """Silences so far, over the lane (one going on counts)."""
    silent_s: float
    margin_s: float | None
    """The smallest lead of the text over the voice so far, in speech seconds (0 once it stalled)."""
    turns: int = 1
    """Turns voiced so far: with more than one, ``first_audio_s`` is a turn's and ``slowest_audio_s`` the run's."""
    slowest_audio_s: float | None = None
    """The latest first audio of any turn so far: the run's figure, the one the verdict judges
    (``first_audio_max_s``)."""


_NOTHING = VoiceNow("waiting", "", 0, 0, 0.0, 0, None, None, 0, 0.0, None)


class VoiceLane:
    """The voice over one lane of one race, fed from the list the race appends the lane's events to."""

    def __init__(self, events: Sequence[Event], settings: VoiceSettings) -> None:
        self.events = events
        self.voice = LaneVoice(settings)
        self.fed = 0
        """Events fed so far."""
        self._words: tuple[VoiceTrack | None, int, int] = (None, 0, 0)
        self._figures: tuple[object, float | None, float | None, float | None, float | None] = (
            None, None, None, None, None)
        """(key, TTFS, first audio, margin, slowest first audio) of the last frame that asked: they change only
        with the sentences."""

    def catch_up(self) -> bool:
        """Feed the events recorded since the last call; whether there were any."""
        events, start = self.events, self.fed
        end = len(events)
        for i in range(start, end):
            self.voice.feed(events[i])
        self.fed = end
        return end > start

    def set_wpm(self, wpm: float, at: float) -> None:
        self.voice.set_wpm(wpm, at)

    def _ready_words(self, track: VoiceTrack) -> int:
        """Words of the complete sentences (cached: sentences only ever get added)."""
        cached, count, words = self._words
        if cached is not track or count != len(track.sentences):
            words = sum(len(s.words) for s in track.sentences)
            self._words = (track, len(track.sentences), words)
        return words

    def now(self, t: float, wpm: float, figures: bool = True) -> VoiceNow:
        """Where the voice is at ``t``; with ``figures``, also its numbers so far (a little dearer)."""
        at = self.voice.at(t)
        if at is None:
            return _NOTHING
        turn, playhead = at
        track = self.voice.tracks[turn]
        state: VoiceShown
        if playhead.state == "stalled":
            state = "silent"
        elif playhead.state == "done":
            state = "spoken" if track.sentences else "mute"
        else:
            state = playhead.state
        ready = track.sentences[-1].end if track.sentences else 0
        ahead = max(self._ready_words(track) - playhead.words, 0.0) * 60.0 / wpm
        if not figures:
            return VoiceNow(state, track.text, playhead.chars, ready, ahead, turn, None, None, 0, 0.0, None)
        silences = self.voice.segments(until=t)
        last = self.voice.tracks[-1]
        key = (turn, len(self.voice.tracks), len(last.sentences), last.ended, wpm)
        if self._figures[0] != key:
            m, run = track.metrics(), self.voice.metrics()
            self._figures = (key, m.ttfs_s, m.first_audio_s, run.min_margin_s, run.first_audio_max_s)
        _, ttfs, first_audio, margin, slowest = self._figures
        if silences:  # a silence going on is not in the numbers yet, and it leaves no margin
            margin = 0.0
        return VoiceNow(state, track.text, playhead.chars, ready, ahead, turn, ttfs, first_audio,
                        len(silences), sum(s.end - s.start for s in silences), margin, len(self.voice.tracks),
                        slowest)

    def stall_spans(self, t: float) -> list[SegmentSpan]:
        """The silences up to ``t`` (one going on included), as ``stall`` spans of the timeline."""
        return [SegmentSpan("stall", s.start, s.end, s.label) for s in self.voice.segments(until=t)]

    def metrics(self) -> VoiceMetrics:
        return self.voice.metrics()


class LiveVoice:
    """The voice lens of the screen: on or off, its settings and current rate, and a :class:`VoiceLane` per lane
    of the race it follows (built the first time the lens is on during that race)."""

    def __init__(self, settings: VoiceSettings | None = None, on: bool = False) -> None:
        self.settings = settings or VoiceSettings()
        self.on = on
        self.wpm = self.settings.wpm
        """The speaking rate now (the keys change it)."""
        self.lanes: list[VoiceLane] = []
        self._race: object = None
        self._changes: list[tuple[float, float]] = [(float("-inf"), self.wpm)]
        """The rate from each moment of the followed race on (its start: the rate it began at)."""

    def follow(self, race: object, lanes: Sequence[Sequence[Event]]) -> bool:
        """Voice ``lanes`` (each lane's event list) of ``race``; a new race gets new voices at the current rate.
        Whether the lanes changed."""
        if race is self._race and len(lanes) == len(self.lanes):
            return False
        self._race = race
        self._changes = [(float("-inf"), self.wpm)]
        settings = replace(self.settings, wpm=self.wpm)
        self.lanes = [VoiceLane(events, settings) for events in lanes]
        return True

    def catch_up(self) -> bool:
        """Feed every lane what its race recorded since the last frame; whether anything came."""
        fed = False
        for lane in self.lanes:
            fed = lane.catch_up() or fed
        return fed

    def toggle(self) -> bool:
        self.on = not self.on
        return self.on

    def change_wpm(self, step: float, at: float) -> float:
        """Speak ``step`` words per minute faster (or slower), within bounds, from ``at`` on; the new rate."""
        wpm = min(max(self.wpm + step, WPM_MIN), WPM_MAX)
        if wpm != self.wpm:
            self.wpm = wpm
            self._changes.append((at, wpm))
            for lane in self.lanes:
                lane.set_wpm(wpm, at)
        return self.wpm

    def rates_until(self, end: float) -> list[float]:
        """The rates the race's voices spoke at up to ``end`` (its last answer), in order: what a verdict judged."""
        rates: list[float] = []
        for at, wpm in self._changes:
            if at < end and (not rates or rates[-1] != wpm):
                rates.append(wpm)
        return rates

    def verdicts(self) -> list[tuple[bool, str]]:
        """Per lane: could it hold a conversation without a gap, and why (``voice.conversation_verdict``)."""
        return [conversation_verdict([lane.metrics()]) for lane in self.lanes]

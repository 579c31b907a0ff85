"""When a turn lets its stream pace reads, and the one ``extra`` event that says its reads were paced."""

from __future__ import annotations

from typing import Any

from ...metrics.turn import PACED_SOURCE, FirstSentence
from ...model.events import Delta, Event, Extra
from .stamped_stream import PACE_S


class Pacing:
    """A turn on a stream that may pace its reads (see :mod:`.stamped_stream`), watching the turn's events as they
    go out. Pacing is allowed only once every moment a figure takes from one token has passed, each read per packet:
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
        return Extra(t=event.t, source=PACED_SOURCE, data={"paced_ms": round(PACE_S * 1000.0, 3)})

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

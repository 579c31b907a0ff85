"""The line under the timeline: who leads while racing; who won, by how much and the speed-ups once over."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from tokrace.providers.export.tables import finishes as finishes  # the bottleneck view words comparisons the same
from tokrace.providers.export.tables import summary_pieces
from tokrace.providers.race.live import LiveRace
from tokrace.providers.race.summary import RaceSummary


def racing_line(live: LiveRace, now: float, doing: str = "racing") -> Text:
    """While racing: the time, and who leads: the first lane to finish once one has, else the most tokens so far."""
    text = Text(f"{doing} · {now:.2f} s", style="bold")
    done = [(lane, lane.e2e) for lane in live.lanes if lane.ok and lane.e2e is not None]
    if done:
        first, e2e = min(done, key=lambda pair: pair[1] or 0.0)
        text.append(f" · {first.tier.name} finished first in {e2e or 0.0:.2f} s")
        return text
    started = [lane for lane in live.lanes if lane.turns]
    if started:
        leader = max(started, key=lambda lane: lane.tokens)
        if leader.tokens:
            text.append(f" · most tokens: {leader.tier.name} ({leader.tokens:,})")
    return text


def summary_line(summary: RaceSummary) -> Text:
    """The race's result in one line."""
    return join_runs(summary_pieces(summary))


def with_pace(line: Text, pace: str, first: bool = False) -> Text:
    """The line, and how the replay departs from real time (``pace``, "" for none): the figures are the
    recording's, but what the eye saw was not real time. ``first`` puts it at the start (a line kept to one row)."""
    if not pace:
        return line
    badge = Text.assemble((f"replay {pace}", "bold reverse"), ": the screen's pace only, figures as recorded")
    if first:
        return Text.assemble(badge, " · ", line)
    return Text.assemble(line, " · ", badge)


def join_runs(pieces: Sequence[tuple[str, str]]) -> Text:
    """The pieces as one text, where a piece never starts with a space: the space joins the piece before it.

    A styled run is exported to SVG as its own element, and viewers drop an element's leading space, gluing words
    together ("Sol ultrafastfinished first"); a trailing space is kept."""
    runs: list[tuple[str, str]] = []
    for piece, style in pieces:
        body = piece.lstrip(" ") if runs else piece
        if runs:
            before, before_style = runs[-1]
            runs[-1] = (before + piece[: len(piece) - len(body)], before_style)
        runs.append((body, style))
    text = Text()
    for body, style in runs:
        text.append(body, style=style)
    return text

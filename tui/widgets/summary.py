"""The line under the timeline: who leads while racing; who won, by how much and the speed-ups once over."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from providers.live import LiveRace, RaceSummary
from providers.tables import summary_pieces


def racing_line(live: LiveRace, now: float, doing: str = "racing") -> Text:
    """While racing: the time, and the lane with the most tokens so far."""
    text = Text(f"{doing} · {now:.2f} s", style="bold")
    started = [lane for lane in live.lanes if lane.turns]
    if started:
        leader = max(started, key=lambda lane: lane.tokens)
        if leader.tokens:
            text.append(f" · most tokens: {leader.tier.name} ({leader.tokens:,})")
    return text


def summary_line(summary: RaceSummary) -> Text:
    """The race's result in one line."""
    return join_runs(summary_pieces(summary))


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

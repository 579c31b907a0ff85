"""The line under the timeline: who leads while racing; who won, by how much and the speed-ups once over."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text

from tokrace.providers.model.units import duration
from tokrace.providers.race.live import LiveRace

if TYPE_CHECKING:
    from tokrace.providers.race.summary import RaceSummary


def racing_line(live: LiveRace, now: float, doing: str = "racing") -> Text:
    """While racing: the time, and who leads: the first lane to finish once one has, else the most tokens so far.
    Lanes level with each other are named together as a tie, never one of them as the lead."""
    text = Text(f"{doing} · {duration(now)}", style="bold")
    done = [(lane, lane.e2e) for lane in live.lanes if lane.ok and lane.e2e is not None]
    if done:
        best = min(e2e or 0.0 for _, e2e in done)
        first = [lane.tier.name for lane, e2e in done if f"{e2e:.2f}" == f"{best:.2f}"]
        together = " together" if len(first) > 1 else ""
        text.append(f" · {names(first)} finished first{together} in {duration(best)}")
        return text
    started = [lane for lane in live.lanes if lane.turns]
    most = max((lane.tokens for lane in started), default=0)
    if most:
        leaders = [lane.tier.name for lane in started if lane.tokens == most]
        if len(leaders) > 1:
            text.append(f" · level on tokens: {names(leaders)} ({most:,} each)")
        else:
            text.append(f" · most tokens: {leaders[0]} ({most:,})")
    return text


def names(items: Sequence[str]) -> str:
    """"A", "A and B", "A, B and C"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def summary_line(summary: RaceSummary) -> Text:
    """The race's result in one line."""
    from tokrace.providers.export.tables import summary_pieces  # (bench's tables: not before the first frame)

    return join_runs(summary_pieces(summary))


def finishes(e2e_speedup: float) -> str:
    """How a lane finished against another, in bench's words (the bottleneck view words comparisons the same)."""
    from tokrace.providers.export.tables import finishes as words

    return words(e2e_speedup)


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

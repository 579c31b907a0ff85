"""The line under the timeline: who leads while racing; who won, by how much and the speed-ups once over."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rich.text import Text

from providers.live import LiveRace, RaceSummary

TIE_S: Final[float] = 0.005
"""Lanes that finished closer together than this are shown as a tie (their lead would print as 0.00 s)."""


def finishes(e2e_speedup: float) -> str:
    """How a lane finished against another, in words that are true: "1.25× sooner", "in the same time" (a speed-up
    that prints as 1.00×), or "later (1.06× the time)" (never "0.94× sooner")."""
    if round(e2e_speedup, 2) > 1.0:
        return f"{e2e_speedup:.2f}× sooner"
    if round(e2e_speedup, 2) == 1.0 or e2e_speedup <= 0:
        return "in the same time"
    return f"later ({1 / e2e_speedup:.2f}× the time)"


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
    pieces: list[tuple[str, str]] = []
    if summary.first is None:
        pieces.append(("no lane finished", "bold"))
    else:
        tied = summary.runner_up is not None and summary.lead_s is not None and summary.lead_s < TIE_S
        if tied:
            pieces += [(summary.first, "bold"), (" and ", ""), (summary.runner_up or "", "bold"),
                       (f" tied at {summary.first_e2e or 0.0:.2f} s", "")]
        else:
            pieces += [(summary.first, "bold"), (f" finished first in {summary.first_e2e or 0.0:.2f} s", "")]
        if summary.runner_up is not None and summary.lead_s is not None and not tied:
            pieces += [(f", {summary.lead_s:.2f} s ahead of ", ""), (summary.runner_up, "bold")]
        if summary.slowest is not None:
            whole = "loop" if summary.loop else "turn"
            results = [r for r in summary.results if r.name != summary.slowest]
            speedups = ", ".join(
                f"{r.name} {'—' if r.tokens_speedup is None else f'{r.tokens_speedup:.1f}×'} tokens "
                f"{r.turn_speedup:.1f}× {whole}" for r in results)
            pieces.append((f" · against {summary.slowest}: {speedups}", ""))
    if summary.failed:
        pieces += [(" · ", ""), ("failed:", "bold red"), (f" {', '.join(summary.failed)}", "")]
    if summary.stopped:
        pieces += [(" · ", ""), ("stopped:", "bold"), (f" {', '.join(summary.stopped)}", "")]
    return join_runs(pieces)


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

"""The line under the timeline: who leads while racing; who won, by how much and the speed-ups once over."""

from __future__ import annotations

from rich.text import Text

from providers.live import LiveRace, RaceSummary


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
    text = Text()
    if summary.first is None:
        text.append("no lane finished", style="bold")
    else:
        text.append(summary.first, style="bold")
        text.append(f" finished first in {summary.first_e2e or 0.0:.2f} s")
        if summary.runner_up is not None and summary.lead_s is not None:
            text.append(f", {summary.lead_s:.2f} s ahead of ")
            text.append(summary.runner_up, style="bold")
        if summary.slowest is not None:
            text.append(f" · against {summary.slowest}: ")
            parts = [r for r in summary.results if r.name != summary.slowest]
            for i, result in enumerate(parts):
                if i:
                    text.append(", ")
                tokens = "—" if result.tokens_speedup is None else f"{result.tokens_speedup:.1f}×"
                text.append(f"{result.name} {tokens} tokens {result.turn_speedup:.1f}× turn")
    if summary.failed:
        text.append(" · failed: ", style="bold red")
        text.append(", ".join(summary.failed))
    return text

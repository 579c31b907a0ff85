"""A tier under load as one lane: its aggregate delivered tok/s on a bar shared by every lane, the requests done,
under way and failed, and its TTFT distribution as a strip of percentiles over a histogram."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from rich.style import Style
from rich.text import Text

from tokrace.providers.metrics.turn import percentile
from tokrace.providers.model.units import duration
from tokrace.providers.runs.live_load import LiveTierLoad
from tokrace.providers.runs.load import TierLoad

from .frame_static import FrameStatic
from .gauge import SPARKS, bar
from .palette import Palette

HISTOGRAM_MIN: Final[int] = 8
"""The narrowest histogram drawn (cells); a narrower lane shows the percentiles alone."""


def histogram(values: Sequence[float], width: int) -> tuple[str, float, float]:
    """``values`` counted into ``width`` equal bins from their least to their greatest, each bin a spark scaled to
    the fullest one (an empty bin blank): the strip, its low and its high end."""
    lo, hi = min(values), max(values)
    counts = [0] * width
    span = hi - lo
    for v in values:
        counts[min(int((v - lo) / span * width), width - 1) if span > 0 else width // 2] += 1
    top = max(counts)
    strip = "".join(" " if c == 0 else SPARKS[min(math.ceil(c / top * len(SPARKS)) - 1, len(SPARKS) - 1)]
                    for c in counts)
    return strip, lo, hi


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def ms(seconds: float | None) -> str:
    """A TTFT as every table tells it: seconds to the millisecond ("1.068 s"), through ``model/units``."""
    return duration(seconds, 3)


def lane_text(lane: LiveTierLoad, index: int, now: float, scale: float, width: int, colours: Palette,
              final: TierLoad | None = None) -> Text:
    """The lane's lines for one frame; with ``final``, the figures of the finished level (bench's own)."""
    colour = colours.lane(index)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(lane.tier.name, style=colour + Style(bold=True))
    text.append(f"  {lane.tier.model or lane.tier.provider} · {plural(lane.streams, 'stream')}\n", style="dim")
    rate = final.delivered_tok_s if final is not None else lane.delivered_tok_s(now)
    # live: a running figure (≈); once over, bench's own cell
    label = "—" if rate is None else f"≈{rate:,.0f} tok/s" if final is None else f"{rate:.1f} tok/s"
    bar_width = max(width - 18, 4)
    filled, empty = bar((rate or 0.0) / scale, bar_width)
    text.append(filled, style=colours.gauge((rate or 0.0) / scale))
    text.append(empty, style="dim")
    text.append(f" {label:>16}\n", style="bold")
    done = len(final.rows) if final is not None else lane.done
    failed = len(final.failed) if final is not None else lane.failed
    state = "done" if final is not None else f"{lane.under_way} under way"
    text.append(f"{plural(done, 'request')} · {state}")
    if failed:
        text.append(f" · {failed} failed", style="red")
    text.append("\n")
    ttfts = sorted(r.ttft_s for r in final.ok if r.ttft_s is not None) if final is not None else sorted(lane.ttfts)
    if not ttfts:
        text.append("TTFT  —", style="dim")
        return text
    text.append("TTFT ")
    for q in (50, 90, 99):
        text.append(f" p{q} ", style="dim")
        text.append(ms(percentile(ttfts, q)))
    strip_width = width - 24
    if strip_width >= HISTOGRAM_MIN and ttfts[-1] > ttfts[0]:  # (all alike: the percentiles say it all)
        strip, lo, hi = histogram(ttfts, min(strip_width, 48))
        text.append("\n")
        text.append(f"{ms(lo):>10} ", style="dim")
        text.append(strip, style=colour)
        text.append(f" {ms(hi)}", style="dim")
    return text


class LoadLane(FrameStatic):
    """One tier under load; the screen sets its figures a few times a second (:meth:`show`)."""

    DEFAULT_CSS = """
    LoadLane { height: 7; }
    """

    def __init__(self, index: int, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="load-lane")
        self.index = index

    def show(self, text: Text) -> None:
        self.update(text, layout=False)

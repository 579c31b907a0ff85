"""How a figure reads to people: durations, percentages, money and "not known", one format for every screen,
table and export (docs/design.md §6). JSON and CSV keep the raw numbers; this is for what people read."""

from __future__ import annotations

import math
from typing import Final

NOT_KNOWN: Final[str] = "—"
"""A figure that does not exist or is not known (a lane that never ran has no end-to-end time)."""

GLUE: Final[str] = "\u00a0"
"""Between a number and its unit: a no-break space, so a wrapping line never splits "1.78 s"."""


def duration(seconds: float | None, digits: int = 2, glue: str = " ") -> str:
    """Seconds as people read them, always in seconds so a column never mixes units: "0.71 s", "127.0 s"
    (``digits`` after the point), "8 ms" for a positive time that would round to zero; ``—`` when not known."""
    if seconds is None or not math.isfinite(seconds):
        return NOT_KNOWN
    if 0 < seconds < 0.5 * 10 ** -digits:
        ms = seconds * 1000
        return f"{ms:.0f}{glue}ms" if ms >= 0.5 else f"<1{glue}ms"
    return f"{seconds:.{digits}f}{glue}s"


def percent(share: float | None) -> str:
    """A share (0.43) as "43%": never "100%" or "0%" unless it is exactly that (a share of 99.96 % reads
    "99.9%", one of 0.04 % reads "0.1%"); ``—`` when not known."""
    if share is None or not math.isfinite(share):
        return NOT_KNOWN
    value = 100 * share
    if 99.5 <= value < 100:
        return f"{math.floor(value * 10) / 10:.1f}%"
    if 0 < value < 0.5:
        return f"{math.ceil(value * 10) / 10:.1f}%"
    return f"{value:.0f}%"


def money(usd: float | None, digits: int = 4) -> str:
    """US dollars: "$0.1336"; ``—`` when there is no price."""
    if usd is None or not math.isfinite(usd):
        return NOT_KNOWN
    return f"${usd:.{digits}f}"


def counted(n: int, word: str, plural: str = "") -> str:
    """``n`` and its noun, singular for one ("1 model call", "2 human steps"); ``plural`` where it is not
    ``word`` + "s"."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"

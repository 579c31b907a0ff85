"""The one vocabulary of segment and breakdown kinds: what each is called, what it means, how it is drawn and which
are the model's time (docs/metrics.md). The timeline, the help, the breakdowns, the tables and the exports read
their words here, so one word has one meaning everywhere."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

SegmentKind: TypeAlias = Literal["connect", "pending", "think", "model", "tool", "human", "retry", "wait", "stall"]
"""What a stretch of a lane's time is."""

SEGMENT_KINDS: Final[tuple[str, ...]] = (
    "connect", "pending", "think", "model", "tool", "human", "retry", "wait", "stall")
"""Every kind, in the order the breakdowns and the legend list them."""

MEANINGS: Final[dict[str, str]] = {
    "connect": "opening the connection (DNS, TCP, TLS) and sending the request",
    "pending": "the model's: waiting for its first token, or for the next one through a stall mid-stream",
    "think": "the model's: reasoning tokens before the answer",
    "model": "the model's: the answer streaming",
    "tool": "a tool running (tests, a query, a search)",
    "human": "a person reviewing, approving or replying",
    "retry": "backing off before a retry",
    "wait": "a plain wait, the model not involved: a scenario's wait step (a rollout, a queue); in a trace, "
            "time no step accounts for",
    "stall": "the voice would fall silent",
}
"""Each kind in one line (the help's legend, the docs)."""

WORDS: Final[dict[str, str]] = {
    "connect": "connecting", "pending": "waiting for the model", "think": "thinking", "model": "streaming",
    "tool": "tool", "human": "person", "retry": "retry back-off", "wait": "waiting", "stall": "voice silent",
}
"""Each kind as a legend or a hover title calls it."""

MODEL_KINDS: Final[frozenset[str]] = frozenset({"pending", "think", "model"})
"""The kinds of a model request that are model time: all time spent waiting on the model API."""

THIN_KINDS: Final[frozenset[str]] = frozenset({"connect", "pending", "wait"})
"""Kinds drawn as a thin line (nothing is produced), the others as solid blocks (work)."""

COLOUR_OF: Final[dict[str, str]] = {"pending": "wait"}
"""A kind drawn in another kind's theme colour (``seg-wait``): themes name no colour of their own for it."""


def colour_name(kind: str) -> str:
    """The theme variable that colours ``kind`` (``seg-model``)."""
    return f"seg-{COLOUR_OF.get(kind, kind)}"

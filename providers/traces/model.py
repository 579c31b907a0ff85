"""The trace model (docs/design.md §12): a trace is a set of steps with kinds, times on the trace's own clock, and the
steps each waits for. Every reader produces it; analysis, re-timing and exports consume it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

StepKind: TypeAlias = Literal["model", "tool", "human", "wait", "retry"]
"""What a step is: a model call, a tool run, a person, an unexplained gap, or a retry back-off."""

STEP_KINDS: Final[tuple[StepKind, ...]] = ("model", "tool", "human", "retry", "wait")
"""Every step kind, in the precedence the breakdown gives an instant to when steps overlap."""

MAIN_CHAIN: Final[str] = "main"
"""The chain of the trace's main agent; sub-agents get chains of their own."""


@dataclass(slots=True)
class Step:
    """One step of a trace. Times are seconds on the trace's own clock (0 = the trace's first start)."""

    id: str
    kind: StepKind
    start: float
    end: float
    after: tuple[str, ...] = ()
    """The ids of the steps this one waits for (the step before it in its chain, a parent span, a sub-agent)."""
    chain: str = MAIN_CHAIN
    """The agent or sub-agent this step belongs to; parallel chains get rows of their own on the screen."""
    label: str = ""
    """What to call it: the tool's name, "approval", "sub-agent", the model."""
    model: str | None = None
    input_tokens: int | None = None
    """Input tokens of a model call, cached ones included."""
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    """The part of ``input_tokens`` written to a prompt cache (priced at the cache-write price where set)."""
    output_tokens: int | None = None
    """Output tokens of a model call, reasoning included."""
    reasoning_tokens: int | None = None
    ttft_s: float | None = None
    """Time to first token of a model call, where the format records it."""
    service_tier: str | None = None
    includes_approval: bool = False
    """A tool step whose time includes a person's approval (the format folds the two together)."""
    failed: bool = False
    unfinished: bool = False
    """A model call that never finished (its end is unknown): counted with its tokens, an instant on the clock,
    and never re-timed."""

    @property
    def duration(self) -> float:
        return self.end - self.start

    def moved(self, start: float, end: float) -> Step:
        """A copy of the step at other times (a plain copy of its fields: re-timing makes one per step)."""
        out = object.__new__(Step)
        for name in Step.__slots__:
            object.__setattr__(out, name, getattr(self, name))
        out.start, out.end = start, end
        return out


@dataclass(slots=True)
class Trace:
    """One trace read from a file: its steps, and what the reader could not read."""

    file: str
    format: str
    session: str = ""
    steps: list[Step] = field(default_factory=list)
    skipped: int = 0
    """Lines, records or spans the reader could not read and went past."""
    notes: list[str] = field(default_factory=list)
    """What the reader wants the user to know (what was skipped and why, what the format does not record)."""

"""One turn as the live lane model keeps it: its count, its decode rate and its spans on the timeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..metrics.turn import SegmentSpan, cut_gaps, usage_counts
from ..model.events import Usage


@dataclass(slots=True)
class LiveTurn:
    """What the live model keeps of one turn: enough for its segments, its count and its decode rate."""

    start: float
    wait_from: float
    first: float | None = None
    first_reasoning: bool = False
    first_tokens: int = 0
    answer: float | None = None
    last_token: float | None = None
    end: float | None = None
    token_events: int = 0
    streamed: int = 0
    streamed_reasoning: bool = False
    usage: Usage | None = None
    tool_called: bool = False
    gaps: list[tuple[float, float]] = field(default_factory=list)
    """Stalls in the stream (``metrics.stream_gaps``): drawn as waits, not as the model streaming."""

    def tokens(self) -> int:
        """The turn's count: the provider's usage when it sent one for the whole turn (``metrics.usage_counts``),
        else what was counted while streaming. Before any token, only an ended turn's usage counts."""
        if self.last_token is None and self.end is None:
            return self.streamed
        return self.usage.output if usage_counts(self.usage, self.last_token) and self.usage else self.streamed

    def text_in(self, channel: str, t: float) -> Literal["thinking", "streaming"]:
        """Note text of ``channel`` arriving at ``t`` (reasoning streamed, or the answer's first moment); the state
        the lane streams in."""
        if channel == "reasoning":
            self.streamed_reasoning = True
            return "thinking"
        if self.answer is None:
            self.answer = t
        return "streaming"

    def decode_parts(self) -> tuple[float, float] | None:
        """(tokens after the first event, seconds from first to last token), as ``metrics.decode_tok_s``."""
        if self.first is None or self.last_token is None or self.token_events < 2:
            return None
        span = self.last_token - self.first
        if span <= 0:
            return None
        hidden = 0
        if usage_counts(self.usage, self.last_token) and self.usage is not None and not self.streamed_reasoning:
            hidden = self.usage.reasoning
        visible = max(self.tokens() - hidden, self.token_events)
        return max(visible - self.first_tokens, 0), span

    def spans(self, open_end: float) -> list[SegmentSpan]:
        """The model's own spans of the turn (pending, think, model), its stalls cut out; still open, it ends at
        ``open_end``."""
        end = self.end if self.end is not None else open_end
        if self.first is None:
            return [SegmentSpan("pending", self.wait_from, end)]
        streamed: list[SegmentSpan] = []
        if self.first_reasoning:
            think_end = self.answer if self.answer is not None else end
            streamed.append(SegmentSpan("think", self.first, think_end))
        if self.answer is not None:
            streamed.append(SegmentSpan("model", self.answer, end))
        return [SegmentSpan("pending", self.wait_from, self.first), *cut_gaps(streamed, self.gaps)]

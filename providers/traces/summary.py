"""The figures over a set of traces (docs/design.md §12 "summary"): the six of the checklist (total task time, total
cost,
TTFT, tool waits, retry rate, the human review burden) plus model share and the Amdahl bound."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..metrics.turn import percentile
from .analysis import TraceAnalysis


@dataclass(slots=True)
class SetSummary:
    """Running totals over traces, fed one analysis at a time (so a folder never sits in memory)."""

    traces: int = 0
    task_s: list[float] = field(default_factory=list)
    cost_usd: float = 0.0
    priced: int = 0
    ttfts: list[float] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("model", "tool", "human", "retry", "wait"), 0.0))
    away_s: float = 0.0
    parallel_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("model", "tool", "human"), 0.0))
    calls: int = 0
    tool_calls: int = 0
    retries: int = 0
    human_steps: int = 0
    input_tokens: int | None = None
    """Summed over the traces that record them; ``None`` when none does."""
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    notes: dict[str, int] = field(default_factory=dict)
    """Each distinct note of the traces (what a format does not record, what was skipped) and how many traces
    carry it; notes naming a file are kept whole."""
    instant_s: float | None = 0.0
    """The sum of the traces' ``e2e_s`` on an instant tier (the Amdahl bound's denominator)."""

    def add(self, a: TraceAnalysis) -> None:
        self.traces += 1
        self.task_s.append(a.e2e_s)
        if a.cost_usd is not None:
            self.cost_usd += a.cost_usd
            self.priced += 1
        self.ttfts.extend(a.ttfts)
        for kind, value in a.breakdown.items():
            self.seconds[kind] = self.seconds.get(kind, 0.0) + value
        self.away_s += a.away_s
        for kind, value in a.parallel_s.items():
            self.parallel_s[kind] = self.parallel_s.get(kind, 0.0) + value
        self.calls += a.calls
        self.tool_calls += a.tool_calls
        self.retries += a.retries
        self.human_steps += a.human_steps
        self.instant_s = None if self.instant_s is None or a.instant_e2e_s is None else \
            self.instant_s + a.instant_e2e_s
        self.input_tokens = _plus(self.input_tokens, a.input_tokens)
        self.cached_input_tokens = _plus(self.cached_input_tokens, a.cached_input_tokens)
        self.output_tokens = _plus(self.output_tokens, a.output_tokens)

    def note(self, format: str, notes: Iterable[str]) -> None:
        """Count a trace's notes, each under its format's name."""
        for text in dict.fromkeys(notes):
            key = f"{format}: {text}"
            self.notes[key] = self.notes.get(key, 0) + 1

    @property
    def total_task_s(self) -> float:
        return sum(self.task_s)

    def share(self, kind: str) -> float | None:
        total = self.total_task_s
        return self.seconds.get(kind, 0.0) / total if total > 0 else None

    def to_json(self) -> dict[str, Any]:
        """The ``summary.original`` object of docs/design.md §12 (plus the set's totals of calls and tokens)."""
        total = self.total_task_s
        instant = self.instant_s
        return {
            "traces": self.traces,
            "total_task_s": _r(total),
            "task_s": {"p50": _pct(self.task_s, 50), "p90": _pct(self.task_s, 90)},
            "total_cost_usd": round(self.cost_usd, 8) if self.priced else None,
            "ttft_s": {"p50": _pct(self.ttfts, 50), "p90": _pct(self.ttfts, 90)},
            "tool_wait_s": _r(self.seconds["tool"]),
            "tool_share": _r(self.share("tool")),
            "retry_rate": _r(self.retries / self.calls) if self.calls else None,
            "human_steps": self.human_steps,
            "human_review_s": _r(self.seconds["human"]),
            "human_share": _r(self.share("human")),
            "model_share": _r(self.share("model")),
            "amdahl_max_speedup": _r(total / instant) if instant is not None and instant > 1e-9 else None,
            "away_s": _r(self.away_s),
            "breakdown": {k: _r(v) for k, v in self.seconds.items()},
            "parallel_s": {k: _r(v) for k, v in self.parallel_s.items()},
            "calls": self.calls,
            "tool_calls": self.tool_calls,
            "retries": self.retries,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
        }


def summarise(analyses: Iterable[TraceAnalysis]) -> SetSummary:
    out = SetSummary()
    for a in analyses:
        out.add(a)
    return out


def _plus(total: int | None, value: int | None) -> int | None:
    return total if value is None else (total or 0) + value


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _pct(values: list[float], q: float) -> float | None:
    return round(percentile(values, q), 6) if values else None

"""The comparison (docs/design.md §12): a set of traces as recorded and re-timed on every tier, the checklist a team
asks
about before paying for a faster tier, each tier's speed-up with a seeded bootstrap interval, and the one
sentence that leads the table, built from the same figures the table prints."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..metrics.turn import percentile
from ..model import units
from ..model.tiers import Price
from .analysis import IDLE_CAP_S, TraceAnalysis, analyse, step_cost_usd
from .model import Trace
from .retime import TierProfile, retime_on

ORIGINAL: Final[str] = "original"
"""The column of the traces as recorded."""

BOOTSTRAP_RESAMPLES: Final[int] = 2000
"""Resamples of the traces for the 95 % interval of each speed-up."""

BOOTSTRAP_SEED: Final[int] = 15
"""The default seed: the same traces always give the same interval."""

MIN_TRACES_FOR_CI: Final[int] = 10
"""Below this many traces no interval is given: a bootstrap over 3 values is their range, not a 95 % interval."""


@dataclass(slots=True)
class TraceRow:
    """One trace: its analysis as recorded and on every tier (tier name → analysis of the re-timed trace)."""

    trace: Trace
    original: TraceAnalysis
    on: dict[str, TraceAnalysis] = field(default_factory=dict)

    def speedup(self, tier: str) -> float | None:
        """The trace's recorded ``e2e_s`` ÷ its ``e2e_s`` on the tier."""
        on = self.on[tier].e2e_s
        return self.original.e2e_s / on if on > 0 else None


@dataclass(slots=True)
class Column:
    """The checklist over the whole set, for the original or one tier."""

    name: str
    traces: int
    total_task_s: float
    task_p50: float | None
    task_p90: float | None
    total_cost_usd: float | None
    """Sum of the traces' costs; ``None`` when a trace with model calls could not be priced."""
    ttft_p50: float | None
    ttft_p90: float | None
    ttft_calls: int
    """Model calls with a TTFT (recorded for the original, modelled on a tier)."""
    tool_wait_s: float
    tool_share: float | None
    calls: int
    retries: int
    human_steps: int
    human_review_s: float
    human_share: float | None
    model_s: float
    wait_s: float
    model_share: float | None
    amdahl_max_speedup: float | None
    speedup: float | None = None
    """Original total task time ÷ this column's (tiers only)."""
    ci95: tuple[float, float] | None = None
    """The 95 % percentile-bootstrap interval of ``speedup`` over the traces (tiers only)."""

    @property
    def retry_rate(self) -> float | None:
        """Retries per model call."""
        return self.retries / self.calls if self.calls else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "traces": self.traces, "total_task_s": _r(self.total_task_s),
            "task_s": {"p50": _r(self.task_p50), "p90": _r(self.task_p90)},
            "total_cost_usd": None if self.total_cost_usd is None else round(self.total_cost_usd, 8),
            "ttft_s": {"p50": _r(self.ttft_p50), "p90": _r(self.ttft_p90)},
            "tool_wait_s": _r(self.tool_wait_s), "tool_share": _r(self.tool_share),
            "retry_rate": _r(self.retry_rate), "human_steps": self.human_steps,
            "human_review_s": _r(self.human_review_s), "human_share": _r(self.human_share),
            "model_share": _r(self.model_share), "amdahl_max_speedup": _r(self.amdahl_max_speedup),
        }
        if self.name != ORIGINAL:
            out["speedup"] = {"total": _r(self.speedup),
                              "ci95": None if self.ci95 is None else [_r(self.ci95[0]), _r(self.ci95[1])]}
        return out


@dataclass(slots=True)
class Comparison:
    """Every trace on every tier, the columns over the set, and the verdict sentence."""

    rows: list[TraceRow]
    profiles: list[TierProfile]
    columns: list[Column]
    verdict: str
    original_price: str
    """Where the original's price came from, in words."""
    seed: int
    idle_cap_s: float
    kept_calls: int = 0
    """Model calls with no output token count: they keep their recorded duration on every tier."""
    original_prices: dict[str, Price] = field(default_factory=dict)
    """The prices the original was costed at, by where they came from (``--original-price`` or a model)."""
    unread: list[tuple[str, str]] = field(default_factory=list)
    """The files that gave no trace, with why (not a trace, unreadable): every output lists them."""


NO_PRICE: Final[str] = "none for the traces' model; give --original-price IN,OUT[,CACHED[,WRITE]]"
"""Where the original's price came from when nothing prices it: ``tokrace traces`` says it the same way with and
without ``--on``."""


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def original_pricer(price: Price | None, tier_prices: dict[str, Price]) -> Callable[[str | None], Price | None]:
    """The price of an original model call: ``--original-price`` when given, else the price of a configured tier
    with the call's model, else none."""
    def price_of(model: str | None) -> Price | None:
        if price is not None:
            return price
        return tier_prices.get(model or "")

    return price_of


def price_source(original_price: Price | None, price_sources: dict[str, str], models: Iterable[str]) -> str:
    """Where the original's price comes from, in words: ``--original-price``, the tier whose price a model got
    (see :class:`Comparer`), or :data:`NO_PRICE`."""
    if original_price is not None:
        return "--original-price"
    used = sorted({price_sources[m] for m in models if m in price_sources})
    return "; ".join(used) if used else NO_PRICE


def priced_analysis(trace: Trace, idle_cap_s: float, price_of: Callable[[str | None], Price | None]) -> TraceAnalysis:
    """The trace as recorded, each model call costed at its model's price (``None`` when a call has none)."""
    return _with_cost(analyse(trace, idle_cap_s), _original_cost(trace, price_of))


def _original_cost(trace: Trace, price_of: Callable[[str | None], Price | None]) -> float | None:
    """USD for the trace as recorded; ``None`` when a model call has no price or no usage."""
    total = 0.0
    for step in trace.steps:
        if step.kind != "model":
            continue
        cost = step_cost_usd(step, price_of(step.model))
        if cost is None:
            return None
        total += cost
    return total


def _ttfts(trace: Trace) -> list[float]:
    return [s.ttft_s for s in trace.steps if s.kind == "model" and s.ttft_s is not None]


def _column(name: str, analyses: Sequence[TraceAnalysis], ttfts: Sequence[float],
            costs: Sequence[float | None]) -> Column:
    total = sum(a.e2e_s for a in analyses)
    tasks = [a.e2e_s for a in analyses]
    model_s = sum(a.breakdown["model"] for a in analyses)
    tool_s = sum(a.breakdown["tool"] for a in analyses)
    human_s = sum(a.breakdown["human"] for a in analyses)
    instant = [0.0 if a.e2e_s <= 0 else a.instant_e2e_s for a in analyses]  # an empty trace takes no time
    instant_total = sum(x for x in instant if x is not None) if all(x is not None for x in instant) else None
    priced_all = all(c is not None or a.calls == 0 for c, a in zip(costs, analyses, strict=True))
    return Column(
        name=name, traces=len(analyses), total_task_s=total,
        task_p50=percentile(tasks, 50) if tasks else None, task_p90=percentile(tasks, 90) if tasks else None,
        total_cost_usd=sum(c or 0.0 for c in costs) if priced_all and any(c is not None for c in costs) else None,
        ttft_p50=percentile(ttfts, 50) if ttfts else None, ttft_p90=percentile(ttfts, 90) if ttfts else None,
        ttft_calls=len(ttfts), tool_wait_s=tool_s, tool_share=_share(tool_s, total),
        calls=sum(a.calls for a in analyses), retries=sum(a.retries for a in analyses),
        human_steps=sum(a.human_steps for a in analyses), human_review_s=human_s,
        human_share=_share(human_s, total), model_s=model_s, wait_s=sum(a.breakdown["wait"] for a in analyses),
        model_share=_share(model_s, total),
        amdahl_max_speedup=total / instant_total if instant_total is not None and instant_total > 1e-9 else None)


def bootstrap_ci(original: Sequence[float], retimed: Sequence[float], seed: int = BOOTSTRAP_SEED,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float] | None:
    """The 95 % percentile-bootstrap interval of the speed-up (sum of original times ÷ sum of re-timed times),
    resampling the traces with replacement; seeded, so the same traces always give the same interval. ``None``
    on fewer than :data:`MIN_TRACES_FOR_CI` traces."""
    n = len(original)
    if n < MIN_TRACES_FOR_CI or sum(retimed) <= 0:
        return None
    rng = random.Random(seed)
    indexes = range(n)
    ratios: list[float] = []
    for _ in range(resamples):
        picks = rng.choices(indexes, k=n)
        den = sum(map(retimed.__getitem__, picks))
        if den > 0:
            ratios.append(sum(map(original.__getitem__, picks)) / den)
    if not ratios:
        return None
    return percentile(ratios, 2.5), percentile(ratios, 97.5)


@dataclass(slots=True)
class Measured:
    """One trace's figures, made by :meth:`Comparer.measure` and added by :meth:`Comparer.take`."""

    row: TraceRow
    costs: dict[str, float | None] = field(default_factory=dict)
    """Column name → the trace's cost there."""
    ttfts: dict[str, list[float]] = field(default_factory=dict)
    """Column name → the trace's TTFTs there."""
    kept_calls: int = 0
    cached_tokens: int = 0
    write_tokens: int = 0


class Comparer:
    """Builds a comparison one trace at a time: each trace is analysed as recorded and re-timed on every tier
    when it is added, and only its figures are kept, so the caller may let its steps go (a folder of traces
    never sits in memory). ``tier_prices`` maps a tier's model to its price, for the original's cost when
    ``original_price`` is not given; ``price_sources`` says, per model, which tier that price is ("Sol standard's,
    a built-in demo tier with the same model")."""

    def __init__(self, profiles: Sequence[TierProfile], *, original_price: Price | None = None,
                 tier_prices: dict[str, Price] | None = None, idle_cap_s: float = IDLE_CAP_S,
                 seed: int = BOOTSTRAP_SEED, price_sources: dict[str, str] | None = None) -> None:
        self.profiles = list(profiles)
        self.original_price = original_price
        self.tier_prices = dict(tier_prices or {})
        self.price_sources = dict(price_sources or {})
        self.idle_cap_s = idle_cap_s
        self.seed = seed
        self.rows: list[TraceRow] = []
        self.kept_calls = 0
        self.cached_tokens = 0
        self.write_tokens = 0
        self._costs: dict[str, list[float | None]] = {ORIGINAL: [], **{p.name: [] for p in self.profiles}}
        self._ttfts: dict[str, list[float]] = {ORIGINAL: [], **{p.name: [] for p in self.profiles}}
        self._price_of = original_pricer(original_price, self.tier_prices)

    def add(self, trace: Trace) -> TraceRow:
        """Analyse one trace as recorded and on every tier."""
        return self.take(self.measure(trace))

    def measure(self, trace: Trace) -> Measured:
        """One trace's figures as recorded and on every tier, without adding them (a worker process's share of
        :meth:`add`: what it returns holds no steps once the caller lets ``trace.steps`` go)."""
        original = priced_analysis(trace, self.idle_cap_s, self._price_of)
        out = Measured(TraceRow(trace=trace, original=original))
        out.costs[ORIGINAL], out.ttfts[ORIGINAL] = original.cost_usd, _ttfts(trace)
        for profile in self.profiles:
            moved = retime_on(trace, profile)
            on = analyse(moved, self.idle_cap_s, price=profile.price)
            out.row.on[profile.name] = on
            out.costs[profile.name] = None if profile.price is None else on.cost_usd
            out.ttfts[profile.name] = _ttfts(moved)
        out.kept_calls = sum(1 for s in trace.steps if s.kind == "model" and s.output_tokens is None)
        out.cached_tokens = sum(s.cached_input_tokens or 0 for s in trace.steps if s.kind == "model")
        out.write_tokens = sum(s.cache_write_tokens or 0 for s in trace.steps if s.kind == "model")
        return out

    def take(self, measured: Measured) -> TraceRow:
        """Add one trace's figures from :meth:`measure`, in the order traces are to be reported."""
        for name, cost in measured.costs.items():
            self._costs[name].append(cost)
            self._ttfts[name].extend(measured.ttfts[name])
        self.kept_calls += measured.kept_calls
        self.cached_tokens += measured.cached_tokens
        self.write_tokens += measured.write_tokens
        self.rows.append(measured.row)
        return measured.row

    def finish(self) -> Comparison:
        """The columns over every trace added, each tier's speed-up and interval, and the verdict."""
        rows = self.rows
        columns = [_column(ORIGINAL, [r.original for r in rows], self._ttfts[ORIGINAL], self._costs[ORIGINAL])]
        originals = [r.original.e2e_s for r in rows]
        for i, profile in enumerate(self.profiles):
            on = [r.on[profile.name] for r in rows]
            column = _column(profile.name, on, self._ttfts[profile.name], self._costs[profile.name])
            if column.total_task_s > 0:
                column.speedup = columns[0].total_task_s / column.total_task_s
            column.ci95 = bootstrap_ci(originals, [a.e2e_s for a in on], seed=self.seed + i)
            columns.append(column)
        used = {m: self.tier_prices[m] for r in rows for m in r.original.models if m in self.tier_prices}
        prices = {"--original-price": self.original_price} if self.original_price is not None else used
        models = [m for r in rows for m in r.original.models if m in self.tier_prices]
        source = price_source(self.original_price, {m: self.price_sources.get(m, "a tier with the same model")
                                                    for m in models}, models)
        kinds = PricedKinds(self.cached_tokens, self.write_tokens, tuple(prices.values()))
        return Comparison(rows=rows, profiles=self.profiles, columns=columns,
                          verdict=verdict(columns, self.kept_calls, self.profiles, kinds), original_price=source,
                          seed=self.seed, idle_cap_s=self.idle_cap_s,
                          kept_calls=self.kept_calls, original_prices=prices)


def compare(traces: Sequence[Trace], profiles: Sequence[TierProfile], *, original_price: Price | None = None,
            tier_prices: dict[str, Price] | None = None, idle_cap_s: float = IDLE_CAP_S,
            seed: int = BOOTSTRAP_SEED) -> Comparison:
    """Every trace as recorded and re-timed on every tier, summed up column by column (see :class:`Comparer`)."""
    comparer = Comparer(profiles, original_price=original_price, tier_prices=tier_prices, idle_cap_s=idle_cap_s,
                        seed=seed)
    for trace in traces:
        comparer.add(trace)
    return comparer.finish()


def _with_cost(analysis: TraceAnalysis, cost: float | None) -> TraceAnalysis:
    from dataclasses import replace

    return replace(analysis, cost_usd=cost)


def amount(seconds: float) -> str:
    """A duration in the comparison: always seconds, as every table and screen tells it (docs/design.md §6)."""
    return units.duration(seconds, 1)


def price_text(price: Price | None) -> str:
    """Which price each kind of token gets, in USD per million: input, cached input, cache writes, output."""
    if price is None or (price.input is None and price.output is None):
        return "no price"

    def usd(v: float | None) -> str:
        return "not priced" if v is None else f"${v:g}"

    cached = usd(price.cached_input) if price.cached_input is not None else "at the input price (none set)"
    write = usd(price.cache_write) if price.cache_write is not None else "at the input price (none set)"
    return f"input {usd(price.input)}, cached input {cached}, cache writes {write}, output {usd(price.output)} per M"


def money(usd: float) -> str:
    """Dollars as the table and the verdict print them (cents, or four decimals below a dollar)."""
    return units.money(usd, 2 if abs(usd) >= 1 else 4)


def percent(share: float) -> str:
    return units.percent(share)


def _tokens_missing(kept: int, calls: int) -> str:
    return f"{kept} of {calls} model calls record no token counts" if kept < calls else "no model call records " \
        "token counts"


@dataclass(frozen=True, slots=True)
class PricedKinds:
    """What the verdict needs to say which price each token kind got: the set's cached-input and cache-write
    tokens, and the prices the original was costed at."""

    cached_tokens: int = 0
    write_tokens: int = 0
    original_prices: tuple[Price, ...] = ()


def _input_priced(kinds: PricedKinds, sides: Sequence[tuple[str, Sequence[Price]]]) -> list[str]:
    """Caveats for token kinds a side's price leaves at the input price (cached input, cache writes), where the
    set has such tokens: the money compared is then not what the provider would bill."""
    out = []
    for what, count, field_name, be in (("cached input", kinds.cached_tokens, "cached_input", "is"),
                                        ("cache writes", kinds.write_tokens, "cache_write", "are")):
        names = [name for name, prices in sides if prices and count
                 and any(getattr(p, field_name) is None and p.input is not None for p in prices)]
        if names:
            verb = "sets" if len(names) == 1 else "set"
            out.append(f"{what[0].upper()}{what[1:]} ({count:,} tokens) {be} priced at the input price for "
                       f"{' and '.join(names)}, which {verb} no {what[:-1] if what.endswith('s') else what} price.")
    return out


def verdict(columns: Sequence[Column], kept_calls: int = 0, profiles: Sequence[TierProfile] = (),
            kinds: PricedKinds = PricedKinds()) -> str:
    """The sentence that leads the table: "On these N traces, <tier> would have saved X s of Y s (Z%), for $A
    more; the model was M% of the time; no tier could save more than B%." The tier is the one that saves
    the most; every number is one the table prints (X and Y from the total task times, A from the total
    costs, M the original's model share, B from its Amdahl bound, measured on an instant tier). Caveats
    follow where they apply: cached input or cache writes priced at the input price on a side of the money
    compared (``kinds``), calls without token counts (never blamed on a price), tiers whose TTFT ignores the
    input (no ``prefill_tok_s``), and too few traces for an interval. A set whose calls record no tokens
    at all gets what can be said: where its time went, and that the model's time cannot be re-timed."""
    original = columns[0]
    n = original.traces
    head = "On this trace" if n == 1 else f"On these {n} traces"
    total = original.total_task_s
    calls = original.calls
    if calls and kept_calls >= calls and total > 0:
        parts = [("the model's recorded calls", original.model_s), ("tools", original.tool_wait_s),
                 ("people", original.human_review_s), ("waits", original.wait_s)]
        where = ", ".join(f"{what} {amount(sec)} ({percent(sec / total)})" for what, sec in parts if sec > 0)
        calls_text = f"{calls} calls record" if calls != 1 else "1 call records"
        return (f"{head}, the model's {calls_text} no token counts, so the model's time "
                f"cannot be re-timed on another tier; of {amount(total)} of task time, {where}.")
    share = original.model_share
    if share is not None:
        bound = 1.0 - 1.0 / original.amdahl_max_speedup if original.amdahl_max_speedup else 1.0
        tail = f"; the model was {percent(share)} of the time; no tier could save more than {percent(bound)}."
    else:
        tail = "."
    tiers = list(columns[1:])
    if not tiers or total <= 0:
        return f"{head}, {amount(total)} of task time" + tail
    best = max(tiers, key=lambda c: total - c.total_task_s)
    saved = total - best.total_task_s
    if saved > 0:
        what = f"{best.name} would have saved {amount(saved)} of {amount(total)} " \
               f"({percent(saved / total)})"
    elif saved == 0:
        what = f"{best.name} would have saved nothing of {amount(total)}"
    else:
        what = f"no tier would have saved time: {best.name} would have taken {amount(-saved)} more " \
               f"than {amount(total)} ({percent(-saved / total)})"
    priced = {p.name: p.price is not None for p in profiles}
    caveats: list[str] = []
    if best.total_cost_usd is None and not priced.get(best.name, False):
        cost = f", at a cost not known ({best.name} has no price)"
    elif best.total_cost_usd is None or original.total_cost_usd is None:
        cost = f", at a cost not known ({_tokens_missing(kept_calls, calls)})" if kept_calls else \
            ", at a cost not known (the original has no price)"
    else:
        diff = best.total_cost_usd - original.total_cost_usd
        cost = ", at the same cost" if round(diff, 4) == 0 else \
            f", for {money(abs(diff))} {'more' if diff > 0 else 'less'}"
        tier_price = next((p.price for p in profiles if p.name == best.name and p.price is not None), None)
        compared = [("the original", kinds.original_prices), (best.name, (tier_price,) if tier_price else ())]
        caveats += _input_priced(kinds, compared)
    if kept_calls:
        caveats.append(f"{_tokens_missing(kept_calls, calls)}: they keep their recorded time on every tier.")
    unmodelled = [p.name for p in profiles if p.prefill_tok_s is None]
    if unmodelled and calls:
        caveats.append(f"Input processing is not modelled on {', '.join(unmodelled)} (no prefill_tok_s): "
                       f"{'its' if len(unmodelled) == 1 else 'their'} TTFT is the same whatever the input.")
    if 1 < n < MIN_TRACES_FOR_CI:  # one trace is never given an interval: nothing to say
        caveats.append(f"No 95% interval: {n} trace{'s are' if n != 1 else ' is'} too few "
                       f"({MIN_TRACES_FOR_CI} or more needed).")
    return f"{head}, {what}{cost}" + tail + "".join(f" {c}" for c in caveats)

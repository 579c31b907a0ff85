"""Re-timing (DESIGN §12): a trace played again on another tier's speed profile.

Each model step takes the tier's time (TTFT, plus input tokens ÷ ``prefill_tok_s`` when the tier sets it, plus
output tokens, reasoning included, ÷ the decode rate); every other step keeps its recorded duration; the wall
time follows the longest path through the dependencies, so parallel chains and parallel tools stay parallel.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..base import ConfigError, Price, TierSpec
from .model import Step, Trace

_HTTP_PROVIDERS = ("openai", "openai-responses", "anthropic")


@dataclass(frozen=True, slots=True)
class TierProfile:
    """How fast a tier answers, for re-timing: its TTFT, decode rate, optional prefill rate, and its price."""

    name: str
    ttft_s: float
    tok_s: float
    prefill_tok_s: float | None = None
    price: Price | None = None
    model: str = ""

    def model_time(self, step: Step) -> float | None:
        """A model step's duration on this tier; ``None`` when the step has no output token count to time."""
        if step.output_tokens is None:
            return None
        ttft = self.ttft_time(step)
        return ttft + step.output_tokens / self.tok_s

    def ttft_time(self, step: Step) -> float:
        """A model step's time to first token on this tier: the TTFT, plus the prefill of its input when set."""
        if self.prefill_tok_s is not None and step.input_tokens:
            return self.ttft_s + step.input_tokens / self.prefill_tok_s
        return self.ttft_s

    def describe(self) -> str:
        """The profile in one line, as the tables' footnotes and ``--help`` texts show it."""
        prefill = f" + input ÷ {self.prefill_tok_s:.6g} tok/s" if self.prefill_tok_s else ""
        return f"{self.name}: TTFT {self.ttft_s * 1000:.6g} ms{prefill}, {self.tok_s:.4g} tok/s"


def tier_profile(tier: TierSpec) -> TierProfile:
    """A configured tier's profile. A synthetic tier always has one (its stream's own profile); an HTTP tier has
    one once ``tokrace calibrate`` measured it (or its ``ttft_ms`` and ``tok_s`` were written by hand)."""
    opts = tier.options
    if tier.provider == "synthetic":
        from ..synthetic import Profile

        synthetic = Profile.from_options(opts)
        ttft_ms, tok_s = synthetic.ttft_ms, synthetic.tok_s
    else:
        missing = [key for key in ("ttft_ms", "tok_s") if key not in opts]
        if missing:
            how = (f"measure it with: tokrace calibrate --tiers {tier.name!r}" if tier.provider in _HTTP_PROVIDERS
                   else "give it ttft_ms and tok_s in the config")
            raise ConfigError(f"tier {tier.name!r} has no speed profile to re-time on (no {' or '.join(missing)}); "
                              f"{how}")
        ttft_ms, tok_s = float(opts["ttft_ms"]), float(opts["tok_s"])
    prefill = opts.get("prefill_tok_s")
    if ttft_ms < 0 or tok_s <= 0 or (prefill is not None and prefill <= 0):
        raise ConfigError(f"tier {tier.name!r}: ttft_ms must be 0 or more, tok_s and prefill_tok_s above 0")
    return TierProfile(name=tier.name, ttft_s=float(ttft_ms) / 1000.0, tok_s=float(tok_s),
                       prefill_tok_s=float(prefill) if prefill is not None else None, price=tier.price,
                       model=tier.model)


def dependency_order(steps: Sequence[Step]) -> list[int]:
    """The steps' indexes with every step after the steps it waits for (ties in start order). Ids a step waits
    for that no step has are ignored; a dependency cycle (a broken file) is broken at its earliest step."""
    index = {step.id: i for i, step in enumerate(steps)}
    waiting = [0] * len(steps)
    followers: list[list[int]] = [[] for _ in steps]
    for i, step in enumerate(steps):
        for dep in dict.fromkeys(step.after):
            j = index.get(dep)
            if j is not None and j != i:
                waiting[i] += 1
                followers[j].append(i)
    ready = [(steps[i].start, i) for i in range(len(steps)) if waiting[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    done = [False] * len(steps)
    pending = sorted(range(len(steps)), key=lambda i: (steps[i].start, i))
    cursor = 0
    while len(order) < len(steps):
        if not ready:  # a cycle: release its earliest step
            while done[pending[cursor]]:
                cursor += 1
            i = pending[cursor]
            waiting[i] = 0
            heapq.heappush(ready, (steps[i].start, i))
        _, i = heapq.heappop(ready)
        if done[i]:
            continue
        done[i] = True
        order.append(i)
        for k in followers[i]:
            waiting[k] -= 1
            if waiting[k] == 0 and not done[k]:
                heapq.heappush(ready, (steps[k].start, k))
    return order


def retime(trace: Trace, duration: Callable[[Step], float | None], label: str = "") -> Trace:
    """The trace with each step lasting ``duration(step)`` (``None`` keeps the recorded duration), each step
    starting as much later or sooner as the latest of the steps it waits for now ends, and keeping its recorded
    gap after them. On the recorded durations this gives back every start and end exactly."""
    steps = trace.steps
    new_end: dict[str, float] = {}
    retimed: list[Step | None] = [None] * len(steps)
    index = {step.id: i for i, step in enumerate(steps)}
    for i in dependency_order(steps):
        step = steps[i]
        deps = [j for j in (index.get(d) for d in step.after) if j is not None and retimed[j] is not None]
        shift = 0.0
        if deps:
            shift = max(new_end[steps[j].id] for j in deps) - max(steps[j].end for j in deps)
        length = duration(step)
        stretch = 0.0 if length is None else length - step.duration
        moved = dataclasses.replace(step, start=step.start + shift, end=step.end + shift + stretch)
        retimed[i] = moved
        new_end[step.id] = moved.end
    out = [s for s in retimed if s is not None]
    notes = list(trace.notes)
    if label:
        notes.append(label)
    return Trace(file=trace.file, format=trace.format, session=trace.session, steps=out, skipped=trace.skipped,
                 notes=notes)


def retime_on(trace: Trace, profile: TierProfile) -> Trace:
    """The trace on a tier: model steps take the tier's time and carry its modelled TTFT; the rest keep theirs.
    A model step without an output token count keeps its recorded duration, and a note says how many did."""
    kept = 0

    def duration(step: Step) -> float | None:
        nonlocal kept
        if step.kind != "model":
            return None
        length = profile.model_time(step)
        if length is None:
            kept += 1
        return length

    out = retime(trace, duration, label=f"re-timed on {profile.describe()}")
    for step in out.steps:
        if step.kind == "model" and step.output_tokens is not None:
            step.ttft_s = profile.ttft_time(step)
            step.service_tier = profile.name
    if kept:
        out.notes.append(f"{kept} model step{'s' if kept != 1 else ''} without an output token count kept "
                         "the recorded duration")
    return out

"""Re-timing (docs/design.md §12): a trace played again on another tier's speed profile.

Each model step takes the tier's time (TTFT, plus input tokens ÷ ``prefill_tok_s`` when the tier sets it, plus
output tokens, reasoning included, ÷ the decode rate); every other step keeps its recorded duration; the wall
time follows the longest path through the dependencies, so parallel chains and parallel tools stay parallel.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ..model.errors import ConfigError
from ..model.tiers import Price, TierSpec
from ..model.units import duration
from ..race.calibrate import HTTP_PROVIDERS
from .model import Step, Trace


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
        return f"{self.name}: TTFT {duration(self.ttft_s, 3)}{prefill}, {self.tok_s:.4g} tok/s"


def tier_profile(tier: TierSpec) -> TierProfile:
    """A configured tier's profile. A synthetic tier always has one (its stream's own profile); an HTTP tier has
    one once ``tokrace calibrate`` measured it (or its ``ttft_ms`` and ``tok_s`` were written by hand)."""
    opts = tier.options
    if tier.provider == "synthetic":
        from ..adapters.synthetic import Profile

        synthetic = Profile.from_options(opts)
        ttft_ms, tok_s = synthetic.ttft_ms, synthetic.tok_s
    else:
        missing = [key for key in ("ttft_ms", "tok_s") if key not in opts]
        if missing:
            how = (f"measure it with: tokrace calibrate --tiers {tier.name!r}" if tier.provider in HTTP_PROVIDERS
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


CONTAINER_SCAN_LIMIT: Final[int] = 4_000_000
"""How many (container, step) pairs re-timing looks at to find what each container holds (bounded time)."""


def _is_container_kind(step: Step) -> bool:
    """A step that may hold others: an agent's own span (``wait``), or the tool step that ran a sub-agent."""
    return step.end > step.start and (step.kind == "wait" or (step.kind == "tool" and step.label == "sub-agent"))


def containers(steps: Sequence[Step]) -> dict[int, int]:
    """Each held step's innermost container: a ``wait`` step (an agent's span) or a ``sub-agent`` tool step whose
    time holds other steps (a sub-agent tool holds only other chains' steps). Containers are taken outermost
    first; of two with the same time, the sub-agent tool holds the agent's span."""
    order = sorted(range(len(steps)), key=lambda i: steps[i].start)
    starts = [steps[i].start for i in order]
    candidates = sorted((i for i, s in enumerate(steps) if _is_container_kind(s)),
                        key=lambda i: (-(steps[i].end - steps[i].start), steps[i].kind != "tool", steps[i].start, i))
    held: dict[int, int] = {}
    taken: set[int] = set()
    scanned = 0
    eps = 1e-9
    for c in candidates:
        box = steps[c]
        lo = bisect.bisect_left(starts, box.start - eps)
        hi = bisect.bisect_right(starts, box.end + eps)
        scanned += hi - lo
        if scanned > CONTAINER_SCAN_LIMIT:
            break
        members = [j for j in order[lo:hi] if j != c and j not in taken and steps[j].end <= box.end + eps
                   and (box.kind == "wait" or steps[j].chain != box.chain)]
        if any(steps[j].end > steps[j].start for j in members):
            taken.add(c)
            held.update((j, c) for j in members)
    return held


def _order(count: int, waits: list[list[int]], first: Callable[[int], float]) -> list[int]:
    """Nodes in an order where each comes after the nodes it waits for (ties by ``first``); a cycle (a broken
    file) is broken at its earliest node."""
    waiting = [len(w) for w in waits]
    followers: list[list[int]] = [[] for _ in range(count)]
    for node, before in enumerate(waits):
        for b in before:
            followers[b].append(node)
    ready = [(first(i), i) for i in range(count) if waiting[i] == 0]
    heapq.heapify(ready)
    pending = sorted(range(count), key=lambda i: (first(i), i))
    done = [False] * count
    order: list[int] = []
    cursor = 0
    while len(order) < count:
        if not ready:
            while done[pending[cursor]]:
                cursor += 1
            heapq.heappush(ready, (first(pending[cursor]), pending[cursor]))
        _, node = heapq.heappop(ready)
        if done[node]:
            continue
        done[node] = True
        order.append(node)
        for f in followers[node]:
            waiting[f] -= 1
            if waiting[f] == 0 and not done[f]:
                heapq.heappush(ready, (first(f), f))
    return order


def dependency_order(steps: Sequence[Step]) -> list[int]:
    """The steps' indexes with every step after the steps it waits for (ties in start order). Ids a step waits
    for that no step has are ignored; a dependency cycle (a broken file) is broken at its earliest step."""
    index = {step.id: i for i, step in enumerate(steps)}
    waits = [[j for j in dict.fromkeys(index.get(d, -1) for d in step.after) if 0 <= j != i]
             for i, step in enumerate(steps)]
    return _order(len(steps), waits, lambda i: steps[i].start)


def dependency_graph(steps: Sequence[Step]) -> tuple[list[list[int]], dict[int, list[int]]]:
    """What each step waits for, as re-timing and the critical path (docs/design.md §12) see it, and what each
    container holds. A container (an agent's span, a sub-agent's tool step) waits only for the steps it holds; a
    step it holds waits for what the container waits for wherever its reader chained it after the container."""
    n = len(steps)
    index = {step.id: i for i, step in enumerate(steps)}
    held = containers(steps)
    members: dict[int, list[int]] = {}
    for j, c in held.items():
        members.setdefault(c, []).append(j)

    def outer(i: int) -> set[int]:
        found: set[int] = set()
        while i in held and held[i] not in found:
            i = held[i]
            found.add(i)
        return found

    def effective(i: int) -> list[int]:
        """What step i waits for: a container holding it stands for what that container waits for (a reader
        chains an agent's first step after the agent's own span); a container waits only for what it holds."""
        if i in members:
            return members[i]
        around = outer(i)
        out: dict[int, None] = {}
        todo = [index.get(d, -1) for d in steps[i].after]
        seen: set[int] = set()
        while todo:
            j = todo.pop()
            if j < 0 or j == i or j in seen:
                continue
            seen.add(j)
            if j in around:
                todo.extend(index.get(d, -1) for d in steps[j].after)
            elif i not in outer(j):
                out[j] = None
        return list(out)

    return [effective(i) for i in range(n)], members


def retime(trace: Trace, duration: Callable[[Step], float | None], label: str = "") -> Trace:
    """The trace with each step lasting ``duration(step)`` (``None`` keeps the recorded duration), each step
    starting as much later or sooner as the latest of the steps it waits for now ends (keeping its recorded gap
    after them), and each container (an agent's span, a sub-agent's tool step) starting and ending as much later
    or sooner as the first and last steps it holds (keeping its own head and tail). On the recorded durations
    this gives back every start and end exactly."""
    steps = trace.steps
    n = len(steps)
    waits, members = dependency_graph(steps)
    start_shift = [0.0] * n
    end_shift = [0.0] * n
    done = [False] * n
    for i in _order(n, waits, lambda k: steps[k].start):
        done[i] = True
        step = steps[i]
        ready = [j for j in waits[i] if done[j]]
        if i in members:
            if ready:
                start_shift[i] = (min(steps[j].start + start_shift[j] for j in ready)
                                  - min(steps[j].start for j in ready))
                end_shift[i] = max(steps[j].end + end_shift[j] for j in ready) - max(steps[j].end for j in ready)
            continue
        if ready:  # the latest of what it waits for, now against then
            start_shift[i] = max(steps[j].end + end_shift[j] for j in ready) - max(steps[j].end for j in ready)
        length = duration(step)
        end_shift[i] = start_shift[i] + (0.0 if length is None else length - step.duration)
    out = [s.moved(s.start + start_shift[i], s.end + end_shift[i])
           for i, s in enumerate(steps)]
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
        if step.kind != "model" or step.unfinished:
            return None
        length = profile.model_time(step)
        if length is None:
            kept += 1
        return length

    out = retime(trace, duration, label=f"re-timed on {profile.describe()}")
    for step in out.steps:
        if step.kind == "model" and step.output_tokens is not None and not step.unfinished:
            step.ttft_s = profile.ttft_time(step)
            step.service_tier = profile.name
    if kept:
        out.notes.append(f"{kept} model step{'s' if kept != 1 else ''} without an output token count kept "
                         "the recorded duration")
    return out

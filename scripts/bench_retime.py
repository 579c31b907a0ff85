"""How fast re-timing and the comparison run: many made-up traces on the three demo tiers, and one long trace.

Prints its figures (wall time, steps per second, peak memory of the figures kept); no pass/fail.

    python scripts/bench_retime.py [--traces 1000] [--steps 60] [--long 20000]
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.traces.compare import Comparer
from tokrace.providers.traces.model import Step, Trace
from tokrace.providers.traces.retime import tier_profile


def made_up(rng: random.Random, n: int) -> Trace:
    """A coding loop inside an agent's span: model calls, tools (sometimes three side by side), people."""
    steps = [Step(id="agent", kind="wait", start=0.0, end=0.0, label="agent")]
    t, last = 0.0, ("agent",)
    for i in range(n):
        kind = rng.choice(["model", "model", "tool", "tools", "human"])
        if kind == "tools":
            ids = []
            for k in range(3):
                steps.append(Step(id=f"{i}.{k}", kind="tool", start=t, end=t + rng.uniform(0.1, 9), after=last))
                ids.append(f"{i}.{k}")
            t = max(s.end for s in steps[-3:])
            last = tuple(ids)
            continue
        end = t + rng.uniform(0.5, 30)
        steps.append(Step(id=str(i), kind=kind, start=t, end=end, after=last,  # type: ignore[arg-type]
                          output_tokens=rng.randint(50, 1500) if kind == "model" else None,
                          input_tokens=rng.randint(1000, 90_000) if kind == "model" else None))
        t, last = end, (str(i),)
    steps[0].end = t
    return Trace(file="made-up", format="bench", steps=steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--long", type=int, default=20_000)
    args = parser.parse_args()
    profiles = [tier_profile(t) for t in demo_tiers()]
    rng = random.Random(1)
    traces = [made_up(rng, args.steps) for _ in range(args.traces)]
    steps = sum(len(t.steps) for t in traces)
    comparer = Comparer(profiles)
    start = time.perf_counter()
    for trace in traces:
        comparer.add(trace)
        trace.steps = []
    added = time.perf_counter()
    comparer.finish()
    done = time.perf_counter()
    print(f"{args.traces} traces, {steps:,} steps, {len(profiles)} tiers: re-timed and analysed in "
          f"{added - start:.2f} s ({steps * (len(profiles) + 1) / (added - start):,.0f} step-analyses/s), "
          f"summed up with the bootstrap in {done - added:.2f} s")
    tracemalloc.start()  # a second pass, traced (tracing slows it down): what the figures kept weigh
    comparer = Comparer(profiles)
    for trace in (made_up(rng, args.steps) for _ in range(args.traces)):
        comparer.add(trace)
        trace.steps = []
    comparer.finish()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"peak traced memory over the {args.traces} traces, read one at a time: {peak / 1e6:.1f} MB")
    long = made_up(random.Random(2), args.long)
    start = time.perf_counter()
    one = Comparer(profiles)
    one.add(long)
    one.finish()
    print(f"one trace of {len(long.steps):,} steps on {len(profiles)} tiers: {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()

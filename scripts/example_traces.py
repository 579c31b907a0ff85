"""Write the example traces in examples/traces: five made-up coding-agent sessions on standard Sol, as WEKA
agentic traces (per-request records), for trying `tokrace traces examples/traces --on ...` and for the README.

Made up, never copied from a real session: seeded, so the files are the same every time.

    python scripts/example_traces.py [--out examples/traces]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

MODEL = "gpt-5.6-sol"
TTFT_S = 1.0
TOK_S = 750 / 14
PREFILL_TOK_S = 40_000
"""Standard Sol as the demo models it: about a second to the first token plus the input at 40,000 tokens a
second, then 54 tokens a second."""


def request(rng: random.Random, t: float, stop: str, out: int | None = None) -> dict[str, Any]:
    out = out if out is not None else rng.randint(80, 1400)
    inp = rng.randint(6000, 60000)
    ttft = round((TTFT_S + inp / PREFILL_TOK_S) * rng.uniform(0.8, 1.4), 3)
    api = round(ttft + out / (TOK_S * rng.uniform(0.9, 1.1)), 3)
    return {"t": round(t, 3), "type": "streaming", "model": MODEL, "in": inp, "out": out,
            "api_time": api, "ttft": ttft, "think_time": 0, "stop": stop}


def session(rng: random.Random, name: str, calls: int, sub_agent: bool) -> dict[str, Any]:
    """One task: calls stopping for tools (reads, edits, test runs), a person's review in the middle and at the
    end, and optionally a sub-agent searching the code base beside the main agent. As in WEKA's traces, a
    request's ``think_time`` is the gap before it, in whole seconds, and a sub-agent is a record of its own."""
    records: list[dict[str, Any]] = []
    t = 0.0
    review_at = calls // 2
    think_before = 0.0
    for i in range(calls):
        last = i == calls - 1
        if last:
            stop, think = "end_turn", 0.0
        elif i == review_at:
            stop, think = "end_turn", rng.uniform(30, 120)  # the person reads the plan and answers
        else:
            stop = "tool_use"
            think = rng.choice([rng.uniform(0.3, 2.0), rng.uniform(0.3, 2.0), rng.uniform(8, 45)])  # tests are slow
        rec = request(rng, t, stop)
        rec["think_time"] = round(think_before)
        records.append(rec)
        if sub_agent and i == 2:
            start = t + rec["api_time"]
            sub_t = start
            subs = []
            for _ in range(4):
                sub = request(rng, sub_t, "tool_use", out=rng.randint(60, 400))
                gap = rng.uniform(0.2, 1.5)
                sub["think_time"] = round(sub_t - (subs[-1]["t"] + subs[-1]["api_time"])) if subs else 0
                subs.append(sub)
                sub_t += sub["api_time"] + gap
            records.append({"type": "subagent", "t": round(start, 3), "duration_ms": round((sub_t - start) * 1000),
                            "tool_use_count": 4, "requests": subs})
            think = max(think, sub_t - start)
        t += rec["api_time"] + think
        think_before = think
    return {"id": name, "models": [MODEL], "requests": records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples/traces"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(2026)
    tasks = [("fix-flaky-test", 14, False), ("add-endpoint", 26, True), ("refactor-config", 18, False),
             ("incident-triage", 9, False), ("upgrade-dependency", 22, True)]
    for name, calls, sub_agent in tasks:
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(session(rng, name, calls, sub_agent), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Measure tokrace's real-clock accuracy: a synthetic tier of known timing, run through `tokrace bench`.

The tier streams 600 tokens at 750 tok/s after a 200 ms TTFT, with no jitter. Prints how far `ttft_s` and
`decode_tok_s` land from the truth on the real clock, how much CPU a run takes, and how closely
`tokrace replay --headless` reproduces a recorded run. Exit 0 when every figure is within its target.

    python scripts/check_accuracy.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TTFT_S, TOK_S, TOKENS = 0.200, 750.0, 600
TTFT_TARGET_MS, DECODE_TARGET_PCT = 2.0, 1.0
REPLAY_TIME_TARGET_MS, REPLAY_DECODE_TARGET_PCT = 1.0, 1.0

CONFIG = f"""\
[defaults]
prompt = "Count, steadily."
max_tokens = {TOKENS}

[[tiers]]
name = "known"
provider = "synthetic"
ttft_ms = {TTFT_S * 1000:g}
tok_s = {TOK_S:g}
jitter = 0
"""


def tokrace(*argv: str) -> tuple[dict[str, Any], float, float]:
    """Run the CLI; return its only run's JSON, its wall time and its CPU time (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", *argv], capture_output=True, text=True,
                           check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"tokrace {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout)["tiers"][0]["runs"][0], wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each measurement (default 5)")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "tokrace.toml"
        config.write_text(CONFIG, encoding="utf-8")

        print(f"real clock: ttft {TTFT_S * 1000:.0f} ms, {TOK_S:g} tok/s, {TOKENS} tokens, jitter 0 "
              f"({args.runs} runs of `tokrace bench --json - --no-record`)")
        ttft_err, decode_err = [], []
        for i in range(args.runs):
            run, wall, cpu = tokrace("bench", "--config", str(config), "--json", "-", "--no-record")
            ttft_err.append((run["ttft_s"] - TTFT_S) * 1000)
            decode_err.append((run["decode_tok_s"] - TOK_S) / TOK_S * 100)
            tokens_ok = run["output_tokens"] == TOKENS
            ok &= tokens_ok
            print(f"  run {i + 1}: ttft_s {run['ttft_s']:.6f} (error {ttft_err[-1]:+.3f} ms)  "
                  f"decode_tok_s {run['decode_tok_s']:.3f} (error {decode_err[-1]:+.3f} %)  "
                  f"output_tokens {run['output_tokens']}{'' if tokens_ok else ' (WRONG)'}  "
                  f"process CPU {cpu:.2f} s over {wall:.2f} s wall, stream {run['e2e_s']:.3f} s")
        worst_ttft, worst_decode = max(map(abs, ttft_err)), max(map(abs, decode_err))
        ok &= worst_ttft <= TTFT_TARGET_MS and worst_decode <= DECODE_TARGET_PCT
        print(f"  worst: ttft error {worst_ttft:.3f} ms (target {TTFT_TARGET_MS:g}), decode error "
              f"{worst_decode:.3f} % (target {DECODE_TARGET_PCT:g}); median ttft error "
              f"{statistics.median(ttft_err):+.3f} ms, median decode error {statistics.median(decode_err):+.3f} %")

        print(f"record → replay on the real clock ({args.runs} pairs of `bench --record F`, "
              "`replay F --headless --json -`)")
        time_diff, decode_diff = [], []
        for i in range(args.runs):
            recording = Path(tmp) / f"run{i}.jsonl"
            live, _, _ = tokrace("bench", "--config", str(config), "--json", "-", "--record", str(recording))
            replayed, _, _ = tokrace("replay", str(recording), "--headless", "--json", "-")
            diffs = [abs(replayed[k] - live[k]) * 1000 for k in ("ttft_s", "e2e_s")]
            time_diff.append(max(diffs))
            decode_diff.append(abs(replayed["decode_tok_s"] - live["decode_tok_s"]) / live["decode_tok_s"] * 100)
            same_tokens = replayed["output_tokens"] == live["output_tokens"]
            ok &= same_tokens
            print(f"  pair {i + 1}: ttft {live['ttft_s']:.6f} → {replayed['ttft_s']:.6f}, "
                  f"e2e {live['e2e_s']:.6f} → {replayed['e2e_s']:.6f} (max diff {time_diff[-1]:.3f} ms), "
                  f"decode {live['decode_tok_s']:.3f} → {replayed['decode_tok_s']:.3f} "
                  f"(diff {decode_diff[-1]:.3f} %){'' if same_tokens else ', tokens differ'}")
        ok &= max(time_diff) <= REPLAY_TIME_TARGET_MS and max(decode_diff) <= REPLAY_DECODE_TARGET_PCT
        print(f"  worst: ttft/e2e diff {max(time_diff):.3f} ms (target {REPLAY_TIME_TARGET_MS:g}), decode diff "
              f"{max(decode_diff):.3f} % (target {REPLAY_DECODE_TARGET_PCT:g})")
    print("all within target" if ok else "OUT OF TARGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Fast-forward benchmark: how much faster than real time does ``tokrace bench --fast-forward`` run?

Races synthetic lanes on virtual time with ``tokrace bench --fast-forward`` in a fresh process, recorded to a
temporary file as bench records by default (its modules compiled once beforehand, as an installed tokrace's are),
and compares the wall time with the race's own length (the slowest lane's end to end: what the race takes on real
time). Lanes (default): six at 750 tok/s, one token per event, each streaming its share of ``--tokens`` (200,000
each, tokrace's limit per turn). Not a test: it prints figures, and the start-up's on a line of its own.

Goal (issue 12): >= 20 x faster than real time on 1.2 M tokens.

    python scripts/bench_fast_forward.py [--tokens 1200000] [--rates 750,3000] [--tokens-per-event 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 20.0


def config(rates: list[float], tokens: int, per_event: int) -> str:
    """One synthetic tier per rate, each streaming the same share of ``tokens``."""
    share = tokens // len(rates)
    return "".join(
        f'[[tiers]]\nname = "lane {i + 1}"\nprovider = "synthetic"\nmodel = "ff"\nmax_tokens = {share}\n'
        f"ttft_ms = 200\ntok_s = {rate}\njitter = 0.1\nseed = {i + 1}\ntokens_per_event = {per_event}\n\n"
        for i, rate in enumerate(rates))


def child_env() -> dict[str, str]:
    """The environment of the measured process: tokrace's modules compiled once, as an installed tokrace's are
    (``pip`` compiles them), not again in every fresh process. Where ``PYTHONDONTWRITEBYTECODE`` is set (as on
    the development box), that compiling was 0.4 s of CPU in each run; the compiled modules go to a folder of
    the system's temporary one (``PYTHONPYCACHEPREFIX``), never beside the sources."""
    env = dict(os.environ)
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None or not env.get("PYTHONPYCACHEPREFIX"):
        env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "tokrace-bench-pycache"))
    return env


def run(rates: list[float], tokens: int, per_event: int) -> tuple[float, float, int, float]:
    """(wall seconds, the race's length in seconds, tokens streamed, the process's CPU seconds)."""
    with tempfile.TemporaryDirectory(prefix="tokrace-ff-") as folder:
        cfg = Path(folder) / "tokrace.toml"
        cfg.write_text(config(rates, tokens, per_event), encoding="utf-8")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "bench", "--config", str(cfg), "--fast-forward",
                              "--record", str(Path(folder) / "ff.jsonl"), "--json", "-"],
                             cwd=ROOT, capture_output=True, text=True, check=False, env=child_env())
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"tokrace bench failed: {out.stderr.strip()[-400:]}")
    runs = [tier["runs"][0] for tier in json.loads(out.stdout)["tiers"]]
    return wall, max(r["e2e_s"] for r in runs), sum(r["output_tokens"] for r in runs), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1_200_000)
    parser.add_argument("--rates", default="750,750,750,750,750,750", help="one lane per rate, tok/s")
    parser.add_argument("--tokens-per-event", type=int, default=1)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    start_wall, _, _, start_cpu = run(rates, 6 * len(rates), args.tokens_per_event)  # compiles, warms the caches
    wall, race, tokens, cpu = run(rates, args.tokens, args.tokens_per_event)
    speed = race / wall
    print(f"{len(rates)} lanes at {', '.join(f'{r:g}' for r in rates)} tok/s, {args.tokens_per_event} token(s) per "
          f"event, recorded: {tokens:,} tokens, a {race:,.0f} s race, {wall:.1f} s of wall time in a fresh process "
          f"({tokens / wall:,.0f} tokens per wall second)")
    print(f"a race of {6 * len(rates)} tokens in a fresh process (start-up: imports, parsing, the JSON) took "
          f"{start_wall:.2f} s of wall time, {start_cpu:.2f} s of CPU")
    print(f"the process used {cpu:.1f} s of CPU ({cpu / tokens * 1e6:.1f} us per token): on a machine with nothing "
          f"else running, about {race / cpu:.1f} x real time")
    met = speed >= GOAL
    print(f"{'--fast-forward on ' + f'{tokens / 1e6:.1f} M tokens, x real time':52} {'>= 20 x':>10} "
          f"{speed:>8.1f} x  {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

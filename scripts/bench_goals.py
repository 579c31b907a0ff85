"""Every goal of issues 12 and 29, goal against measured: runs each benchmark script in turn (each in fresh
processes) and prints their verdict lines together at the end. Meant for an otherwise idle machine: the figures
move with whatever else the cores are doing. Not a test: it prints figures (about 20 to 25 minutes; the steady
state's 4 x 100 requests at two rates are most of it).

    python scripts/bench_goals.py [--quick] [--only first,steady,screen,trip,fidelity,memory,cpu,delivery,ff,
                                                     traces,cold,concurrency,peers]

When scripts/bench_concurrency.py exists, its rows (``concurrency``) are run and included too; the ``peers`` row
runs aiperf and guidellm beside tokrace when they are installed (one line and a skip when not).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rows(quick: bool) -> dict[str, list[list[str]]]:
    """Each row's name and the script runs that measure it."""
    def n(full: int, short: int) -> str:
        return str(short if quick else full)

    return {
        "first": [["bench_first_request.py", "--runs", n(15, 6)]],
        "steady": [["bench_first_request.py", "--steady", "4x100" if not quick else "2x20", "--runs", n(15, 6)]],
        "screen": [["bench_first_request.py", "--screen", "--rates", "750", "--runs", n(10, 4)]],
        "trip": [["bench_trip_out.py", "--runs", n(20, 8)]],
        "fidelity": [["bench_fidelity.py", "--ui", "app", "--runs", n(30, 10)]] * 3,
        "memory": [["bench_memory.py", "--tokens", n(1_000_000, 400_000)]],
        "cpu": [["bench_cpu.py", "--seconds", n(4, 2)]],
        "delivery": [["bench_render.py", "--rates", "20000,20000,20000,20000", "--seconds", n(10, 4)]],
        "ff": [["bench_fast_forward.py", "--tokens", n(1_200_000, 400_000)]],
        "traces": [["bench_traces.py", "--traces", n(1000, 200)]],
        "cold": [["bench_cold_start.py", "--runs", n(7, 3)]],
        **({"concurrency": [["bench_concurrency.py", *(["--quick"] if quick else [])]]}
           if (HERE / "bench_concurrency.py").exists() else {}),
        "peers": [["compare_peers.py", "--rounds", n(4, 1)]],
    }


def verdicts(output: str) -> list[str]:
    """The lines of a script's output that hold a goal and a verdict."""
    return [line for line in output.splitlines()
            if line.rstrip().endswith((" met", " MISSED")) or line.startswith("targets:")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and tokens: a smoke test, not the figures")
    parser.add_argument("--only", help="comma-separated rows (default: all)")
    args = parser.parse_args()
    table = rows(args.quick)
    wanted = args.only.split(",") if args.only else list(table)
    unknown = [w for w in wanted if w not in table]
    if unknown:
        parser.error(f"unknown rows: {', '.join(unknown)} (known: {', '.join(table)})")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    summary: list[str] = []
    for name in wanted:
        runs = table[name]
        met = 0
        for i, command in enumerate(runs):
            started = time.perf_counter()
            out = subprocess.run([sys.executable, str(HERE / command[0]), *command[1:]], cwd=HERE.parent,
                                 capture_output=True, text=True, check=False)
            took = time.perf_counter() - started
            print(f"$ python scripts/{' '.join(command)}   ({took:.0f} s, exit {out.returncode})", flush=True)
            print(out.stdout.rstrip() or out.stderr.strip()[-800:], flush=True)
            lines = verdicts(out.stdout)
            met += out.returncode == 0
            if len(runs) == 1:
                summary += lines
            elif i == len(runs) - 1:
                summary.append(f"{'bench_fidelity with the screen drawing: met in every run':60} {met} of "
                               f"{len(runs)} runs  {'met' if met == len(runs) else 'MISSED'}")
    print(f"\n== issues 12 and 29, goal vs measured ({cores} cores, load average {load:.1f} at the start"
          f"{', QUICK: fewer runs' if args.quick else ''}) ==")
    for line in summary:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The request's trip out: from tokrace's "on the wire" to the ground-truth server's "arrived", on tokrace's
socket-time transport against httpx's own, the same 4 lanes and server as ``bench_fidelity.py`` (no screen).

The server counts a request as arrived when its last byte reached the socket (the kernel's receive stamp), so
the trip out is the client's alone: how long after its "on the wire" the request really was there. The stamped
transport's "on the wire" is the kernel's transmit stamp of the request's last byte (Linux), so its trip out is the
kernel's own way from the device to the server's socket; httpx's is when its transport hands the body over. On loopback
the bytes arrive inside the sending call itself, so a client that stamps when its write returned reads a few
microseconds below zero; the size of the trip out either way, ``|trip out|``, is what is compared.

Goal (issue 12): the stamped transport's p99 no worse than httpx's. Not a test: it prints figures.

    python scripts/bench_trip_out.py [--runs 20] [--rounds 4] [--ui none|app]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_fidelity


def trip_out(transport: str, runs: int, ui: str) -> list[float]:
    """Every lane's trip-out times (ms) over ``runs`` races on ``transport``."""
    args = argparse.Namespace(runs=runs, ui=ui, transport=transport, load_ms=10.0, load_hz=40.0)
    errors = bench_fidelity.measure(args)
    return [x for lane in errors.values() for x in lane["out_ms"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--ui", choices=("none", "app"), default="none")
    parser.add_argument("--rounds", type=int, default=4, help="turns each transport takes (runs split between them)")
    args = parser.parse_args()
    from tokrace.providers.metrics.turn import percentile

    # The two transports take turns, a few runs each, so that whatever else the cores are doing weighs on both
    # alike (one after the other, a burst of load on a shared box decided the comparison).
    figures: dict[str, list[float]] = {"stamped": [], "httpx": []}
    rounds = max(1, min(args.rounds, args.runs))
    for turn in range(rounds):
        runs = args.runs // rounds + (1 if turn < args.runs % rounds else 0)
        for t in (("stamped", "httpx") if turn % 2 == 0 else ("httpx", "stamped")):
            figures[t] += trip_out(t, runs, args.ui)
    p99 = {t: percentile([abs(x) for x in v], 99) for t, v in figures.items()}
    for t, v in figures.items():
        print(f"{t:8} trip out: p1 {percentile(v, 1):.3f} ms, p50 {percentile(v, 50):.3f} ms, "
              f"p99 {percentile(v, 99):.3f} ms, max {max(v):.3f} ms; |trip out| p99 {p99[t]:.3f} ms "
              f"({len(v)} requests)")
    met = p99["stamped"] <= p99["httpx"]
    print(f"{'request |trip out| p99, stamped vs httpx':52} {'<= httpx':>10} "
          f"{p99['stamped']:.3f} vs {p99['httpx']:.3f} ms  {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

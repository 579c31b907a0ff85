"""First-request benchmark: what does the first request of a fresh tokrace process measure on loopback?

A ground-truth server (the engine of ``tokrace serve``, in a process of its own, on its own core when there are
two) streams a known schedule and notes when it read each request and wrote its first token. Each run is a fresh
process: ``tokrace bench`` (one request, as a user would run it) or, with ``--screen``, the race screen drawing
headless (its first race). Per run this prints nothing; at the end, per rate: the error of the first request's
``ttft_s`` (as the user sees it: connection set-up included) against the server's own TTFT, p50 and p99, and the
first request's ``connect_s``, p50 and p99.

Goals (issue 12): TTFT error p50 < 0.5 ms and p99 < 3 ms at 750 and at 50 tok/s; ``connect_s`` of a first request
< 1 ms p50 on loopback, bench and screen alike. With ``--steady PxR`` (issue 29: 4x100), the steady state
against the first request: requests 2..R of P fresh ``tokrace bench --runs R`` processes, TTFT error p50 no more
than 0.2 ms above the first request's (measured in the same window) and p99 < 3 ms; ``itl_ms`` with its mean and
``started_at`` in every run. Not a test: it prints figures.

    python scripts/bench_first_request.py [--runs 15] [--rates 750,50] [--screen] [--steady 4x100 [--tokens N]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TTFT_MS, TOKENS = 200.0, 20
TTFT_P50_MS, TTFT_P99_MS, CONNECT_P50_MS = 0.5, 3.0, 1.0
STEADY_OVER_FIRST_MS, STEADY_P99_MS = 0.2, 3.0
STEADY_DECODE_S = 0.25
"""Each steady request asks for this many seconds of tokens at its rate (at least 20 tokens): 187 at 750 tok/s."""


def steady_tokens(rate: float) -> int:
    return max(TOKENS, round(rate * STEADY_DECODE_S))


def truth_server(conn: Connection, rate: float) -> None:
    """The ground-truth server: one synthetic schedule, the server's own record of every request sent back."""
    import gc

    from tokrace.providers.adapters.synthetic import Profile
    from tokrace.providers.model.tiers import MAX_TOKENS_LIMIT
    from tokrace.providers.serve import Served, ServeServer, SyntheticSource

    def sent(record: Served) -> None:
        conn.send((record.ttft_s, record.received))

    async def main() -> None:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cores) > 1:
            os.sched_setaffinity(0, {cores[-1]})
        gc.disable()
        # answers as long as each run asks (a served answer otherwise stops at the server's own 400 tokens)
        server = ServeServer(SyntheticSource(Profile(ttft_ms=TTFT_MS, tok_s=rate, jitter=0.0, seed=1)),
                             on_served=sent, max_tokens=MAX_TOKENS_LIMIT)
        await server.start()
        conn.send(("port", server.port))
        stop = asyncio.Event()
        asyncio.get_running_loop().add_reader(conn.fileno(), stop.set)
        await stop.wait()
        await server.close()

    asyncio.run(main())


def client_cores() -> None:
    """Run the client on the cores the server does not use (the issue's condition: separate cores)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) > 1:
        os.sched_setaffinity(0, set(cores[:-1]))


def child_bench(port: int, runs: int = 1, tokens: int = TOKENS) -> list[dict[str, Any]]:
    """A fresh ``tokrace bench`` process, ``runs`` requests one after the other: their run objects of the JSON
    contract."""
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "tokrace.toml"
        config.write_text(f'[[tiers]]\nname = "loopback"\nprovider = "openai"\nmodel = "first"\n'
                          f'base_url = "http://127.0.0.1:{port}/v1"\n', encoding="utf-8")
        out = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "bench", "--config", str(config),
                              "--runs", str(runs), "--max-tokens", str(tokens), "--no-record", "--json", "-"],
                             cwd=ROOT, capture_output=True, text=True, check=False, timeout=60 + 10 * runs,
                             preexec_fn=client_cores)
    if out.returncode != 0:
        raise SystemExit(f"tokrace bench failed: {out.stderr.strip()}")
    got: list[dict[str, Any]] = json.loads(out.stdout)["tiers"][0]["runs"]
    return got


SCREEN_CHILD = """
import asyncio, json, sys
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.metrics.turn import turn_metrics
from tokrace.tui.app.app import build_app

async def main(port):
    tier = TierSpec(name="loopback", provider="openai", model="first", base_url=f"http://127.0.0.1:{port}/v1")
    app = build_app([tier], TurnRequest("Count, steadily.", max_tokens=TOKENS))
    async with app.run_test(size=(160, 45)):
        await app.runner.wait_started()
        await app.runner.wait_finished()
        m = turn_metrics(app.runner.race.lanes[0].events)
        print(json.dumps({"connect_s": m.connect_s, "ttft_s": m.ttft_s, "ok": m.ok, "error": m.error}))

asyncio.run(main(int(sys.argv[1])))
""".replace("TOKENS", str(TOKENS))


def child_screen(port: int) -> dict[str, Any]:
    """A fresh process drawing the race screen headless: its first race's connect and TTFT."""
    out = subprocess.run([sys.executable, "-c", SCREEN_CHILD, str(port)], cwd=ROOT, capture_output=True,
                         text=True, check=False, timeout=60, preexec_fn=client_cores)
    if out.returncode != 0:
        raise SystemExit(f"the screen failed: {out.stderr.strip()[-400:]}")
    run: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return run


def pct(values: list[float], q: float) -> float:
    from tokrace.providers.metrics.turn import percentile

    return percentile(values, q)


def measure(rate: float, runs: int, screen: bool) -> tuple[list[float], list[float]]:
    """(TTFT errors in ms, connect_s in ms) of the first request of ``runs`` fresh processes."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=truth_server, args=(child, rate), daemon=True)
    server.start()
    tag, port = parent.recv()
    assert tag == "port"
    errors, connects = [], []
    try:
        for _ in range(runs):
            run = child_screen(port) if screen else child_bench(port)[0]
            error, connect = judged(run, parent)
            errors.append(error)
            connects.append(connect)
    finally:
        parent.send("stop")
        server.join(5)
    return errors, connects


def judged(run: dict[str, Any], server: Connection) -> tuple[float, float]:
    """(TTFT error, ``connect_s``) of one run in ms, against the server's record of the same request."""
    if not run["ok"]:
        raise SystemExit(f"the request failed: {run['error']}")
    server_ttft, _ = server.recv()
    return (run["ttft_s"] - server_ttft) * 1000.0, run["connect_s"] * 1000.0


def measure_steady(rate: float, processes: int, runs: int, tokens: int
                   ) -> tuple[list[float], list[float], list[dict[str, Any]]]:
    """(TTFT errors in ms, connect_s in ms, run objects) of requests 2 to ``runs`` of ``processes`` fresh
    ``tokrace bench`` processes, each making ``runs`` requests one after the other."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=truth_server, args=(child, rate), daemon=True)
    server.start()
    tag, port = parent.recv()
    assert tag == "port"
    errors, connects, objects = [], [], []
    try:
        for _ in range(processes):
            for i, run in enumerate(child_bench(port, runs, tokens)):
                error, connect = judged(run, parent)
                objects.append(run)
                if i:
                    errors.append(error)
                    connects.append(connect)
    finally:
        parent.send("stop")
        server.join(5)
    return errors, connects, objects


def rows(runs: int, rates: list[float], screen: bool) -> Iterator[tuple[str, str, str, bool]]:
    """(measure, goal, measured, met) for every rate."""
    where = "screen's first race" if screen else "bench, first request"
    for rate in rates:
        errors, connects = measure(rate, runs, screen)
        e50, e99 = pct(errors, 50), pct(errors, 99)
        c50, c99 = pct(connects, 50), pct(connects, 99)
        yield (f"TTFT error vs server, {where}, {rate:g} tok/s (p50 / p99)",
                    f"< {TTFT_P50_MS:g} / < {TTFT_P99_MS:g} ms", f"{e50:.2f} / {e99:.2f} ms",
                    abs(e50) < TTFT_P50_MS and abs(e99) < TTFT_P99_MS)
        yield (f"connect_s, {where}, {rate:g} tok/s (p50 / p99)", f"< {CONNECT_P50_MS:g} ms p50",
                    f"{c50:.2f} / {c99:.2f} ms", c50 < CONNECT_P50_MS)


def steady_rows(runs: int, rates: list[float], processes: int, per_process: int,
                tokens: int | None) -> Iterator[tuple[str, str, str, bool]]:
    """(measure, goal, measured, met) of the steady state against the first request, for every rate: requests 2
    to ``per_process`` of ``processes`` fresh processes, the first requests of ``runs`` others."""
    for rate in rates:
        first, first_connects = measure(rate, runs, False)
        steady, connects, objects = measure_steady(rate, processes, per_process, tokens or steady_tokens(rate))
        f50, s50, s99 = pct(first, 50), pct(steady, 50), pct(steady, 99)
        yield (f"TTFT error, steady ({processes} x {per_process}), {rate:g} tok/s (p50 / p99)",
                    f"<= {f50:.2f}+{STEADY_OVER_FIRST_MS:g} / < {STEADY_P99_MS:g} ms", f"{s50:.2f} / {s99:.2f} ms",
                    abs(s50) <= abs(f50) + STEADY_OVER_FIRST_MS and abs(s99) < STEADY_P99_MS)
        yield (f"connect_s, steady vs first request, {rate:g} tok/s (p50)", "as the first's",
                    f"{pct(connects, 50):.2f} vs {pct(first_connects, 50):.2f} ms",
                    pct(connects, 50) <= pct(first_connects, 50) + STEADY_OVER_FIRST_MS)
        no_mean = sum(1 for run in objects if not (run["itl_ms"] or {}).get("mean"))
        paced = sum(1 for run in objects if run["reads_paced_ms"] is not None)
        yield (f"itl_ms without its mean, steady, {rate:g} tok/s ({paced} of {len(objects)} paced)", "0 runs",
                    f"{no_mean} of {len(objects)}", no_mean == 0)
        starts = [run.get("started_at") for run in objects]
        ordered = all(starts) and starts == sorted(starts, key=str)  # one process after the other: in order
        yield (f"started_at in every run, in order, steady, {rate:g} tok/s", "every run",
                    f"{sum(1 for s in starts if s)} of {len(starts)}", bool(ordered))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per rate")
    parser.add_argument("--rates", default="750,50", help="the server's tok/s, comma-separated")
    parser.add_argument("--screen", action="store_true", help="the screen's first race instead of tokrace bench")
    parser.add_argument("--steady", metavar="PxR", help="also requests 2..R of P fresh processes making R requests "
                        "each, against the first request (issue 29: 4x100)")
    parser.add_argument("--tokens", type=int, help="tokens each steady request asks for (default: "
                        f"{STEADY_DECODE_S:g} s of the rate's, at least {TOKENS})")
    args = parser.parse_args()
    steady: tuple[int, int] | None = None
    if args.steady:
        try:
            p, r = (int(x) for x in args.steady.lower().split("x"))
        except ValueError:
            parser.error("--steady takes PROCESSESxRUNS, like 4x100")
        steady = (p, r)
    rates = [float(r) for r in args.rates.split(",")]
    started = time.perf_counter()
    ok = True
    print(f"{'measure':64} {'goal':>18} {'measured':>18}")
    table = steady_rows(args.runs, rates, *steady, args.tokens) if steady else rows(args.runs, rates, args.screen)
    for name, goal, got, met in table:
        ok = ok and met
        print(f"{name:64} {goal:>18} {got:>18}  {'met' if met else 'MISSED'}", flush=True)
    print(f"({args.runs} fresh processes per rate, {time.perf_counter() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

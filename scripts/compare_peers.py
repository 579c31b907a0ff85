"""tokrace beside aiperf and guidellm on one ground-truth server: each tool's TTFT p50 / p99 against the server's own
for the same requests, sequential, at 750 and 50 tok/s.

The server is the engine of ``tokrace serve`` in a process of its own (``bench_first_request.truth_server``: it
notes when it read each request and wrote its first token). Each round runs every installed tool in turn, the
order rotated from round to round so none always goes first; each tool's run sends ``--requests`` requests one
after the other, and its TTFT percentiles (from its own JSON export) are set against the server's percentiles over
exactly the requests it served for that tool. A tool that is not installed is one line and a skip; with neither
installed, the script says so and exits 0. The peers are not tokrace's dependencies: ``pip install aiperf guidellm``
into a virtual environment of their own, with their executables on PATH. Not a test: it prints figures.

    python scripts/compare_peers.py [--rounds 4] [--requests 25] [--rates 750,50]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from bench_first_request import TOKENS, child_bench, client_cores, pct, truth_server

PEERS = ("aiperf", "guidellm")
TIMEOUT_S = 600


def aiperf_ttfts(port: int, requests: int, folder: Path) -> tuple[float, float]:
    """aiperf's TTFT p50 / p99 (ms) over ``requests`` sequential streamed chat requests."""
    subprocess.run(["aiperf", "profile", "--model", "truth", "--url", f"127.0.0.1:{port}", "--endpoint-type", "chat",
                    "--streaming", "--concurrency", "1", "--request-count", str(requests),
                    "--output-tokens-mean", str(TOKENS), "--output-tokens-stddev", "0",
                    "--synthetic-input-tokens-mean", "16", "--tokenizer", "gpt2",
                    "--artifact-dir", str(folder)], check=True, capture_output=True, timeout=TIMEOUT_S,
                   preexec_fn=client_cores)
    export = next(folder.rglob("profile_export_aiperf.json"))
    ttft = json.loads(export.read_text(encoding="utf-8"))["time_to_first_token"]
    return float(ttft["p50"]), float(ttft["p99"])


def guidellm_ttfts(port: int, requests: int, folder: Path) -> tuple[float, float]:
    """guidellm's TTFT p50 / p99 (ms) over ``requests`` synchronous streamed requests."""
    out = folder / "benchmarks.json"
    subprocess.run(["guidellm", "benchmark", "--target", f"http://127.0.0.1:{port}", "--model", "truth",
                    "--rate-type", "synchronous", "--max-requests", str(requests),
                    "--data", f"prompt_tokens=16,output_tokens={TOKENS}", "--processor", "gpt2",
                    "--output-path", str(out)], check=True, capture_output=True, timeout=TIMEOUT_S,
                   preexec_fn=client_cores)
    ttft = json.loads(out.read_text(encoding="utf-8"))["benchmarks"][0]["metrics"]["time_to_first_token_ms"]
    done = ttft["successful"]
    return float(done["median"]), float(done["percentiles"]["p99"])


def tokrace_ttfts(port: int, requests: int, folder: Path) -> tuple[float, float]:
    """tokrace bench's TTFT p50 / p99 (ms) over ``requests`` runs of one process."""
    runs = child_bench(port, requests)
    ttfts = [run["ttft_s"] * 1000.0 for run in runs]
    return pct(ttfts, 50), pct(ttfts, 99)


TOOLS: dict[str, Callable[[int, int, Path], tuple[float, float]]] = {
    "tokrace": tokrace_ttfts, "aiperf": aiperf_ttfts, "guidellm": guidellm_ttfts}


def served(server: Connection) -> list[float]:
    """The server's TTFTs (ms) of the requests it served since the last call."""
    out = []
    while server.poll(0.5):
        ttft_s, _ = server.recv()
        if ttft_s is not None:
            out.append(ttft_s * 1000.0)
    return out


def compare(rate: float, tools: list[str], rounds: int, requests: int) -> dict[str, list[tuple[float, float]]]:
    """Per tool, (p50 error, p99 error) in ms of each round."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=truth_server, args=(child, rate), daemon=True)
    server.start()
    tag, port = parent.recv()
    assert tag == "port"
    errors: dict[str, list[tuple[float, float]]] = {tool: [] for tool in tools}
    try:
        for r in range(rounds):
            for tool in tools[r % len(tools):] + tools[:r % len(tools)]:
                with tempfile.TemporaryDirectory(prefix=f"tokrace-peer-{tool}-") as folder:
                    p50, p99 = TOOLS[tool](port, requests, Path(folder))
                truth = served(parent)
                errors[tool].append((p50 - pct(truth, 50), p99 - pct(truth, 99)))
    finally:
        parent.send("stop")
        server.join(5)
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds, the tools' order rotated each round")
    parser.add_argument("--requests", type=int, default=25, help="sequential requests per tool and round")
    parser.add_argument("--rates", default="750,50", help="the server's tok/s, comma-separated")
    args = parser.parse_args()
    missing = [peer for peer in PEERS if shutil.which(peer) is None]
    for peer in missing:
        print(f"{peer}: not installed (pip install {peer}, with its executable on PATH); skipped")
    tools = ["tokrace", *(peer for peer in PEERS if peer not in missing)]
    if len(tools) == 1:
        print("compare_peers: no peer installed; nothing to compare")
        return 0
    print(f"{'tool':10} {'rate':>8} {'TTFT error p50 / p99 (median over rounds)':>44}")
    for rate in (float(r) for r in args.rates.split(",")):
        for tool, rounds in compare(rate, tools, args.rounds, args.requests).items():
            p50 = pct([e[0] for e in rounds], 50)
            p99 = pct([e[1] for e in rounds], 50)
            print(f"{tool:10} {rate:>8g} {p50:>28.2f} / {p99:.2f} ms")
    print(f"({args.rounds} rounds x {args.requests} requests per tool and rate, order rotated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

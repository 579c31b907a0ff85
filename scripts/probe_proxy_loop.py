"""Where a proxied chunk's time goes (docs/performance.md, "Where a chunk's p99 went"): runs ``tokrace proxy`` in a
process of its own with its event loop and collector watched, streams the benchmark's paired chunks through it
(``bench_proxy.py``'s upstream and client), and prints, beside the added delay:

- the wake-up: from a chunk's kernel arrival stamp to the relay's callback for it (the OS's scheduling, and the
  loop being busy with something else);
- the loop busy when a chunk came: the callback running then and how long it still ran;
- every garbage collection during the streams, by generation;
- the loop's callbacks over 100 µs, by name, and the longest.

With ``--big-bodies``, another connection sends a call with a 4 MB request body every 100 ms while the chunks stream
(an agent with a long context beside the one measured): reading such a request is the proxy's longest piece of work.
With ``--emoji`` that body opens with a system prompt holding an emoji, as Claude Code's does: a character outside the
BMP makes Python's text of the body four bytes a character.

Usage: ``python scripts/probe_proxy_loop.py [--rates 750,12000] [--seconds 2] [--big-bodies [--emoji]]``"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_proxy import UPSTREAM, conditions, paired, pct

WATCHED = r'''
import asyncio, collections, gc, json, os, signal, sys, time
from asyncio import events
from tokrace.providers.proxy import relay
slow, collections_, wakes, busy = collections.defaultdict(list), [], [], []
last = [0.0, ""]
run = events.Handle._run
def _run(self):
    t0 = time.perf_counter()
    run(self)
    t1 = time.perf_counter()
    name = getattr(self._callback, "__qualname__", None) or type(self._callback).__name__
    last[0], last[1] = t1, name
    if t1 - t0 > 100e-6 and wakes:  # (the streams, not the start-up)
        slow[name].append(t1 - t0)
events.Handle._run = _run
began = {}
def on_gc(phase, info):
    if phase == "start":
        began["t"] = time.perf_counter()
    elif wakes:
        collections_.append((info["generation"], time.perf_counter() - began["t"]))
gc.callbacks.append(on_gc)
received = relay._Upstreaming.data_received
def data_received(self, data):
    now = time.perf_counter()
    stamp = self.sock.stamp if self.sock is not None else None
    if stamp is not None:
        wakes.append(now - stamp)
        busy.append((max(0.0, last[0] - stamp), last[1]))
    received(self, data)
relay._Upstreaming.data_received = data_received
def dump(*_):
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump({"slow": slow, "gc": collections_, "wakes": wakes, "busy": busy}, out)
    os._exit(0)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["tokrace", *sys.argv[1:]]
from tokrace.tui.main import main
main()
'''


def ms(x: float) -> str:
    return f"{x * 1e3:.3f}"


def big_bodies(port: int, stop: threading.Event, emoji: bool) -> None:
    """A call with a 4 MB request body every 100 ms on a kept-alive connection, until ``stop``."""
    system = [{"type": "text", "text": "You are Claude Code \U0001F916. " * 200}] if emoji else []
    body = json.dumps({"model": "m", "stream": True, "system": system, "messages": [
        {"role": "user", "content": [{"type": "text", "text": f"line {i} " + "x" * 200}]} for i in range(18_000)],
        "metadata": {"user_id": "user_1_session_big"}}, ensure_ascii=False).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    with contextlib.suppress(ConnectionError):  # (the proxy ends mid-call when the probe is done)
        while not stop.is_set():
            sock.sendall(f"POST /v1/messages?chunks=3&rate=1000 HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}"
                         "\r\n\r\n".encode() + body)
            got = b""
            while not got.endswith(b"\r\n0\r\n\r\n"):
                got += sock.recv(65536)
            time.sleep(0.1)
    sock.close()


def main(rates: list[int], seconds: float, bodies: bool, emoji: bool) -> None:
    print(f"conditions: {conditions()}")
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    assert upstream.stdout is not None
    up_port = int(upstream.stdout.readline())
    folder = Path(tempfile.mkdtemp())
    out = folder / "probe.json"
    proxy = subprocess.Popen([sys.executable, "-c", WATCHED, "proxy", "--port", "0", "--upstream",
                              f"http://127.0.0.1:{up_port}", "--record", str(folder / "probe.jsonl")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PROBE_OUT": str(out)})
    assert proxy.stderr is not None
    proxy_port = int(proxy.stderr.readline().rsplit(":", 1)[1])
    threading.Thread(target=proxy.stderr.read, daemon=True).start()
    stop = threading.Event()
    try:
        paired(up_port, proxy_port, 200, 750)  # warm
        if bodies:
            threading.Thread(target=big_bodies, args=(proxy_port, stop, emoji), daemon=True).start()
            print("with a call carrying a 4 MB request body every 100 ms on another connection"
                  + (", its system prompt holding an emoji" if emoji else ""))
        for rate in rates:
            plain, via = paired(up_port, proxy_port, int(rate * seconds), rate)
            added = [v - d for v, d in zip(via, plain, strict=True)]
            print(f"{rate:,} chunks/s: direct p99 {ms(pct(plain, 99))} ms; added p50 {ms(statistics.median(added))} "
                  f"/ p99 {ms(pct(added, 99))} / p99.9 {ms(pct(added, 99.9))} ms")
        stop.set()
        proxy.send_signal(__import__("signal").SIGUSR1)
        proxy.wait(30)
    finally:
        if proxy.poll() is None:
            proxy.terminate()
        upstream.terminate()
        proxy.wait()
        upstream.wait()
    seen = json.loads(out.read_text())
    wakes = seen["wakes"]
    print(f"wake-up, kernel arrival to the relay's callback ({len(wakes):,} reads): p50 {ms(pct(wakes, 50))} / "
          f"p99 {ms(pct(wakes, 99))} / p99.9 {ms(pct(wakes, 99.9))} ms")
    busy = [b for b, _ in seen["busy"]]
    late = [(b, name) for b, name in seen["busy"] if b > 100e-6]
    print(f"loop busy when a read came: p99 {ms(pct(busy, 99))} ms; over 0.1 ms for {len(late)} of {len(busy):,} "
          f"reads, in: {dict(sorted(__import__('collections').Counter(n for _, n in late).items()))}")
    by_generation: dict[int, list[float]] = {}
    for generation, took in seen["gc"]:
        by_generation.setdefault(generation, []).append(took)
    print("collections during the streams: " + (", ".join(
        f"generation {g}: {len(t)} (p50 {ms(statistics.median(t))} ms, max {ms(max(t))} ms)"
        for g, t in sorted(by_generation.items())) or "none"))
    for name, took in sorted(seen["slow"].items(), key=lambda kv: -sum(kv[1]))[:8]:
        print(f"  callbacks over 0.1 ms: {name}: {len(took)}, max {ms(max(took))} ms")
    longest = max((max(took), name) for name, took in seen["slow"].items()) if seen["slow"] else (0.0, "none")
    print(f"the loop's longest callback: {ms(longest[0])} ms ({longest[1]})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="750,12000")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--big-bodies", action="store_true")
    parser.add_argument("--emoji", action="store_true", help="the big bodies' system prompt holds an emoji")
    args = parser.parse_args()
    main([int(r) for r in args.rates.split(",")], args.seconds, args.big_bodies, args.emoji)

"""Memory per event on hostile input: how much a lane takes for huge SSE events, a replay of many tiny recorded
events, and ``tokrace serve``'s timing while one client uploads a byte per chunk. Not a test: it prints figures
(docs/performance.md#hostile-input).

Each measurement runs in a fresh child process and reports its peak resident memory (``ru_maxrss``), its time and
its CPU time (what a loaded machine stretches less):
- ``bench`` on one OpenAI-compatible lane whose server (a process of its own) sends one 1 KB text event (the run's
  own baseline: imports, the tokenizer, the race), then one ``--event-mb`` MB event (a misbehaving server), then
  ``--many`` events of ``--many-mb`` MB, each recorded: the peak above the baseline's, and the peak while the lane
  streamed (before bench loads the tokenizer to measure it) above the baseline's, each as a multiple of one
  event's size (goal: ≤ 4×);
- ``tokrace replay FILE --headless --fast-forward`` of recordings of ``--events`` one-token events, and of ten
  times as many with ``--ten-times`` (goal: the peak does not grow with the number of events);
- ``tokrace serve``: nine requests' first-token error (kernel stamps, against the plan) before and during an
  upload sent a byte per chunk as fast as a socket takes it (goal: the medians within 1 ms of each other).

    python scripts/bench_hostile.py [--event-mb 10] [--many 60] [--many-mb 4] [--events 1000000] [--ten-times]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SERVER = r"""
import asyncio, json, sys
SIZE, COUNT = int(sys.argv[1]), int(sys.argv[2])

async def serve(reader, writer):
    while (await reader.readline()).strip():
        pass
    event = f"data: {json.dumps({'choices': [{'delta': {'content': 'y' * SIZE}}]})}\n\n".encode()
    done = b"data: [DONE]\n\n"
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
                 + str(len(event) * COUNT + len(done)).encode() + b"\r\nconnection: close\r\n\r\n")
    for _ in range(COUNT):
        writer.write(event)
        await writer.drain()
    writer.write(done)
    await writer.drain()
    writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""

ONE_EVENT = r"""
import contextlib, io, os, resource, subprocess, sys, time
from pathlib import Path
SIZE, RECORD, COUNT, SERVER = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def main():
    # the server runs in a process of its own: its copies of the events are not the lane's
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(SIZE), str(COUNT)], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    config = Path(RECORD).with_suffix(".toml")
    config.write_text(f'[[tiers]]\nname = "huge"\nprovider = "openai"\nmodel = "m"\n'
                      f'base_url = "http://127.0.0.1:{port}/v1"\nmax_retries = 0\n')
    os.environ["OPENAI_API_KEY"] = "x"
    from tokrace.providers.runs import session
    from tokrace.tui.main import main as cli
    streamed = []
    measure = session.lane_metrics

    def metrics(*args, **kwargs):  # the peak while streaming: bench loads the tokenizer only to measure, after
        streamed.append(peak())
        return measure(*args, **kwargs)

    session.lane_metrics = metrics
    began = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli(["--config", str(config), "bench", "--record", RECORD, "--max-tokens", "200000"])
    finally:
        server.kill()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"exit {code}; {time.perf_counter() - began:.1f} s ({usage.ru_utime + usage.ru_stime:.1f} s of CPU), "
          f"peak {peak():.0f} MB, {streamed[0] if streamed else 0:.0f} MB streaming")

main()
"""

REPLAY = """
import contextlib, io, resource, sys, time
from tokrace.tui.main import main
began = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["replay", sys.argv[1], "--headless", "--fast-forward"])
usage = resource.getrusage(resource.RUSAGE_SELF)
print(f"exit {code}; {time.perf_counter() - began:.1f} s ({usage.ru_utime + usage.ru_stime:.1f} s of CPU), "
      f"peak {usage.ru_maxrss / 1024:.0f} MB")
"""

SERVE = r'''
import asyncio, statistics, subprocess, sys
import httpx
from tokrace.providers.adapters.synthetic import Profile
from tokrace.providers.serve import ServeServer, SyntheticSource

BODY = {"model": "m", "stream": True, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
UPLOAD = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
sock.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nhost: x\\r\\ntransfer-encoding: chunked\\r\\n\\r\\n")
piece = b"1\\r\\n \\r\\n" * 4096
print("sending", flush=True)
try:
    while True:
        sock.sendall(piece)
except OSError:
    pass
"""

async def errors(server, client, planned):
    out = []
    for _ in range(9):
        answer = await client.post("/v1/chat/completions", json=BODY, timeout=30)
        assert answer.status_code == 200
        out.append(abs(server.served[-1].ttft_s - planned) * 1000)
    return out

async def main():
    profile = Profile(ttft_ms=150, tok_s=400, ttfb_ms=20, seed=1)
    planned = SyntheticSource(profile).plan(BODY, 20, 0).pieces[0].t
    async with ServeServer(SyntheticSource(profile)) as server, httpx.AsyncClient(base_url=server.url) as client:
        quiet = await errors(server, client, planned)
        upload = subprocess.Popen([sys.executable, "-c", UPLOAD, str(server.port)], stdout=subprocess.PIPE)
        await asyncio.to_thread(upload.stdout.readline)
        await asyncio.sleep(0.5)  # well under way
        busy = await errors(server, client, planned)
        upload.kill()
        upload.wait()
    q, b = statistics.median(quiet), statistics.median(busy)
    verdict = "within" if b - q < 1 else "NOT within"
    print(f"median TTFT error {q:.3f} ms before, {b:.3f} ms during the upload: {b - q:+.3f} ms ({verdict} 1 ms); "
          f"worst during it {max(busy):.3f} ms")

asyncio.run(main())
'''

BASELINE = """
import resource
import tokrace.tui.main, tokrace.providers.adapters.http, tokrace.providers.runs.session
print(f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
"""


def write_recording(path: Path, events: int) -> None:
    """A one-lane recording of ``events`` one-token deltas, 10 µs apart."""
    header = {"format": "tokrace-recording", "version": 1, "prompt": "p", "scenario": None,
              "tiers": [{"name": "lane 0", "provider": "synthetic", "model": "m"}]}
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(header) + "\n" + '{"lane":0,"run":0,"kind":"request","t":0.0}\n')
        batch: list[str] = []
        for i in range(events):
            batch.append(f'{{"lane":0,"run":0,"kind":"delta","t":{0.001 + i / 100_000:.6f},"text":"w",'
                         '"channel":"content","tokens":1}\n')
            if len(batch) == 100_000:
                fh.write("".join(batch))
                batch = []
        fh.write("".join(batch) + f'{{"lane":0,"run":0,"kind":"done","t":{0.002 + events / 100_000:.6f}}}\n')


def run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    return (done.stdout.strip().splitlines() or [done.stderr.strip()[-300:]])[-1]


def peak(line: str) -> float | None:
    """The peak (MB) a child reported, if it got that far."""
    return float(line.rsplit("peak ", 1)[1].split()[0]) if "peak " in line else None


def streaming(line: str) -> float | None:
    """The peak (MB) a child reported before it measured the run (while the lane streamed)."""
    return float(line.split(" MB streaming")[0].rsplit(" ", 1)[1]) if " MB streaming" in line else None


def sse_events(scratch: str, count: int, megabytes: float, base: str | None) -> str:
    """``bench`` on ``count`` SSE events of ``megabytes`` MB each: its peak, and its peak while streaming, each
    over the baseline run's, per event's size."""
    size = int(megabytes * 1024 * 1024)
    line = run(ONE_EVENT, str(size), f"{scratch}/e{count}.jsonl", str(count), SERVER)
    if base is None:
        return line
    figures = []
    for what, read in (("peak", peak), ("while streaming", streaming)):
        got, before = read(line), read(base)
        if got is not None and before is not None:
            above = got - before
            figures.append(f"{what} {above:.0f} MB above the baseline's, {above / megabytes:.1f}× one event")
    return f"{line}; {', '.join(figures)} (goal ≤ 4×)"


def replay(scratch: str, events: int) -> str:
    path = Path(scratch) / "many.jsonl"
    write_recording(path, events)
    try:
        return f"replay of {events:,} events ({path.stat().st_size / 1e6:.0f} MB): {run(REPLAY, str(path))}"
    finally:
        path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--event-mb", type=float, default=10.0)
    parser.add_argument("--many", type=int, default=60)
    parser.add_argument("--many-mb", type=float, default=4.0)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ten-times", action="store_true", help="also replay ten times --events")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        print(f"tokrace imported: {run(BASELINE)}")
        base = sse_events(scratch, 1, 1 / 1024, None)
        print(f"baseline, bench on one 1 KB SSE event, recorded: {base}")
        print(f"one {args.event_mb:g} MB SSE event, bench, recorded: {sse_events(scratch, 1, args.event_mb, base)}")
        print(f"{args.many} SSE events of {args.many_mb:g} MB, bench, recorded: "
              f"{sse_events(scratch, args.many, args.many_mb, base)}")
        print(replay(scratch, args.events))
        if args.ten_times:
            print(replay(scratch, 10 * args.events))
    print(f"tokrace serve during a byte-per-chunk upload: {run(SERVE)}")


if __name__ == "__main__":
    main()

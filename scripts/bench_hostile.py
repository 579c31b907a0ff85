"""Memory per event on hostile input: how much a lane takes for one huge SSE event, and a replay of many tiny
recorded events. Not a test: it prints figures (docs/performance.md#hostile-input).

Each measurement runs in a fresh child process and reports its peak resident memory (``ru_maxrss``) and time:
- ``bench`` on one OpenAI-compatible lane whose server sends one ``--event-mb`` MB text event (a misbehaving
  server), recorded, and the peak's ratio to the event's size;
- ``tokrace replay FILE --headless --fast-forward`` of a recording of ``--events`` one-token events.

    python scripts/bench_hostile.py [--event-mb 10] [--events 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE_EVENT = """
import asyncio, contextlib, io, json, resource, sys, time
from pathlib import Path
SIZE = int(sys.argv[1])
RECORD = sys.argv[2]

async def serve(reader, writer):
    while (await reader.readline()).strip():
        pass
    body = json.dumps({"choices": [{"delta": {"content": "y" * SIZE}}]})
    payload = f"data: {body}\\n\\ndata: [DONE]\\n\\n".encode()
    writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-type: text/event-stream\\r\\ncontent-length: "
                 + str(len(payload)).encode() + b"\\r\\nconnection: close\\r\\n\\r\\n" + payload)
    await writer.drain()
    writer.close()

async def start():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]

def main():
    import threading
    loop = asyncio.new_event_loop()
    server, port = loop.run_until_complete(start())
    threading.Thread(target=loop.run_forever, daemon=True).start()
    config = Path(RECORD).with_suffix(".toml")
    config.write_text(f'[[tiers]]\\nname = "huge"\\nprovider = "openai"\\nmodel = "m"\\n'
                      f'base_url = "http://127.0.0.1:{port}/v1"\\nmax_retries = 0\\n')
    import os
    os.environ["OPENAI_API_KEY"] = "x"
    from tokrace.tui.main import main as cli
    began = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli(["--config", str(config), "bench", "--record", RECORD, "--max-tokens", "200000"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"exit {code}; {time.perf_counter() - began:.1f} s, peak {peak:.0f} MB")

main()
"""

REPLAY = """
import contextlib, io, resource, sys, time
from tokrace.tui.main import main
began = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["replay", sys.argv[1], "--headless", "--fast-forward"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"exit {code}; {time.perf_counter() - began:.1f} s, peak {peak:.0f} MB")
"""

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--event-mb", type=float, default=10.0)
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        print(f"baseline (tokrace imported): {run(BASELINE)}")
        size = int(args.event_mb * 1024 * 1024)
        print(f"one {args.event_mb:g} MB SSE event, bench, recorded: {run(ONE_EVENT, str(size), scratch + '/e.jsonl')}")
        path = Path(scratch) / "many.jsonl"
        write_recording(path, args.events)
        print(f"replay of {args.events:,} events ({path.stat().st_size / 1e6:.0f} MB): {run(REPLAY, str(path))}")


if __name__ == "__main__":
    main()

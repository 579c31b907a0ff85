"""Fault budgets: how much memory and time tokrace takes on hostile or huge input. Not a test: it prints figures.

Each measurement runs in a fresh child process and reports its peak resident memory (``ru_maxrss``) beside the
time it took:
- reading a recording of ``--mb`` megabytes (streamed line by line; events held in their compact form);
- ``tokrace recordings`` on that file (the header, the last line, and a byte search for each lane's end);
- the SSE parser on one 4 MB line fed in 64-byte chunks, and on a 1 MB line in 50-byte chunks;
- a synthetic lane at the ``max_tokens`` cap (200,000) on virtual time.

    python scripts/bench_faults.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBES = {
    "read_recording": """
from tokrace.providers.recording import read_recording
rec = read_recording(PATH)
print(sum(len(v) for v in rec.events.values()), "events")
""",
    "recordings (list)": """
from tokrace.providers.recording import list_recordings
[info] = list_recordings(PATH.parent)
print(f"duration {info.duration:.1f} s")
""",
    "SSE 4 MB line / 64 B chunks": """
from tokrace.providers.adapters.http.sse import SSEParser
line = b"data: " + b"y" * (4 * 1024 * 1024) + b"\\n\\n"
parser = SSEParser()
print(sum(len(parser.feed(line[i:i + 64])) for i in range(0, len(line), 64)), "event")
""",
    "SSE 1 MB line / 50 B chunks": """
from tokrace.providers.adapters.http.sse import SSEParser
line = b"data: " + b"y" * (1024 * 1024) + b"\\n\\n"
parser = SSEParser()
print(sum(len(parser.feed(line[i:i + 50])) for i in range(0, len(line), 50)), "event")
""",
    "200,000 tokens, fast-forward": """
from tokrace.tui.main import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    main(["bench", "--fast-forward", "--no-record", "--tiers", "Sol ultrafast", "--max-tokens", "200000"])
print("done")
""",
}


def write_recording(path: Path, megabytes: int) -> None:
    """A recording of about ``megabytes`` MB: three lanes of short deltas, like a long live session."""
    header = {"format": "tokrace-recording", "version": 1, "prompt": "p", "scenario": None,
              "tiers": [{"name": f"lane {i}", "provider": "synthetic", "model": "m"} for i in range(3)]}
    target = megabytes * 1024 * 1024
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(header) + "\n")
        size, n = 0, 0
        while size < target:
            line = (f'{{"lane":{n % 3},"run":0,"kind":"delta","t":{n / 3000:.6f},"text":" word{n % 97}",'
                    f'"channel":"content","tokens":1}}\n')
            fh.write(line)
            size += len(line)
            n += 1


def probe(name: str, code: str, path: Path) -> None:
    script = (f"import resource, time, sys\nfrom pathlib import Path\nPATH = Path({str(path)!r})\n"
              f"began = time.perf_counter()\n{code}\n"
              "print(f'{time.perf_counter() - began:.2f} s, peak {resource.getrusage(resource.RUSAGE_SELF)"
              ".ru_maxrss / 1024:.0f} MB')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    lines = (done.stdout or done.stderr).strip().splitlines()
    print(f"{name:<30} {' | '.join(lines[-2:])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the recording to read (default 200 MB)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.jsonl"
        began = time.perf_counter()
        write_recording(path, args.mb)
        print(f"wrote a {path.stat().st_size / 1024 / 1024:.0f} MB recording in {time.perf_counter() - began:.1f} s"
              f" (this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
        for name, code in PROBES.items():
            probe(name, code, path)


if __name__ == "__main__":
    main()

"""How fast `tokrace traces` reads a folder of real-sized traces, and in how much memory.

Writes N synthetic traces of about 1 MB each into a temporary folder (a mix of Claude Code sessions, Codex rollouts
and OTLP JSON Lines, each a few hundred lines with tool output as big as real ones), then runs
`tokrace traces FOLDER --json FILE` in a child process and prints its wall time, traces/s, MB/s and peak RSS
(goal: under 300 MB for 1,000 traces of 1 MB).

    python scripts/bench_traces.py [--traces 1000] [--size-mb 1.0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FILLER = "def test_parse_handles_empty_input():\n    assert parse('') == []\n"


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_777_000_000 + t)) + f".{int(t * 1000) % 1000:03d}Z"


def claude_session(rng: random.Random, size: int, n: int) -> list[str]:
    lines: list[str] = []
    t = 0.0
    sid = f"bench-{n}"
    out = 0
    lines.append(json.dumps({"type": "user", "uuid": "u0", "parentUuid": None, "sessionId": sid,
                             "timestamp": _iso(t), "message": {"role": "user", "content": "Fix the failing tests"}}))
    i = 0
    while sum(len(x) for x in lines) < size:
        i += 1
        t += rng.uniform(1, 6)
        for part in range(2):
            out += rng.randint(5, 60)
            block: dict[str, Any] = ({"type": "text", "text": "Looking at it."} if part == 0 else
                                     {"type": "tool_use", "id": f"toolu_{i}", "name": rng.choice(["Bash", "Read"]),
                                      "input": {"command": "pytest -q"}})
            lines.append(json.dumps({"type": "assistant", "uuid": f"a{i}.{part}", "parentUuid": f"u{i - 1}",
                                     "sessionId": sid, "timestamp": _iso(t + part * 0.5), "requestId": f"req_{i}",
                                     "message": {"id": f"msg_{i}", "model": "claude-sonnet-4-5", "content": [block],
                                                 "usage": {"input_tokens": 10, "cache_read_input_tokens": 20000 + i,
                                                           "output_tokens": out}}}))
        t += rng.uniform(0.2, 20)
        body = FILLER * rng.randint(20, 60)
        lines.append(json.dumps({"type": "user", "uuid": f"u{i}", "parentUuid": f"a{i}.1", "sessionId": sid,
                                 "timestamp": _iso(t), "message": {"role": "user", "content": [
                                     {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": body}]},
                                 "toolUseResult": {"stdout": body, "stderr": ""}}))
    return lines


def codex_rollout(rng: random.Random, size: int, n: int) -> list[str]:
    def line(t: float, kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": _iso(t), "type": kind, "payload": payload})

    lines = [line(0, "session_meta", {"id": f"cdx-{n}"}), line(0, "turn_context", {"model": "gpt-5.1-codex"}),
             line(0, "event_msg", {"type": "user_message", "message": "fix the build"})]
    t, total, i = 0.0, 0, 0
    while sum(len(x) for x in lines) < size:
        i += 1
        t += rng.uniform(1, 5)
        lines.append(line(t, "response_item", {"type": "function_call", "name": "shell", "call_id": f"c{i}",
                                                "arguments": "{\"command\":[\"make\"]}"}))
        total += 1000
        usage = {"input_tokens": 1000, "cached_input_tokens": 800, "output_tokens": 40,
                 "reasoning_output_tokens": 10, "total_tokens": 1040}
        lines.append(line(t + 0.1, "event_msg", {"type": "token_count", "info": {
            "last_token_usage": usage, "total_token_usage": {**usage, "input_tokens": total}}}))
        t += rng.uniform(0.2, 15)
        lines.append(line(t, "response_item", {"type": "function_call_output", "call_id": f"c{i}", "output": json.dumps(
            {"output": FILLER * rng.randint(20, 60), "metadata": {"exit_code": 0}})}))
    return lines


def otlp_export(rng: random.Random, size: int, n: int) -> list[str]:
    base = 1_777_000_000 * 10**9
    lines: list[str] = []
    t = 0.0
    i = 0
    while sum(len(x) for x in lines) < size:
        spans = []
        for _ in range(20):
            i += 1
            d = rng.uniform(0.5, 4)
            spans.append({"traceId": f"{n:032x}", "spanId": f"{i:016x}", "parentSpanId": "", "name": "chat gpt-4o",
                          "startTimeUnixNano": str(base + int(t * 1e9)),
                          "endTimeUnixNano": str(base + int((t + d) * 1e9)),
                          "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                                         {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1200"}},
                                         {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "80"}},
                                         {"key": "gen_ai.prompt", "value": {"stringValue": FILLER * 20}}]})
            t += d + rng.uniform(0.1, 3)
        lines.append(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return lines


MAKERS = (claude_session, claude_session, codex_rollout, otlp_export)


def generate(folder: Path, count: int, size: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    total = 0
    for n in range(count):
        make = MAKERS[n % len(MAKERS)]
        path = folder / f"{make.__name__}-{n:05d}.jsonl"
        text = "\n".join(make(rng, size, n)) + "\n"
        path.write_text(text, encoding="utf-8")
        total += len(text)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--size-mb", type=float, default=1.0)
    parser.add_argument("--keep", type=Path, help="write the traces here and keep them")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="tokrace-bench-traces-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        written = generate(folder, args.traces, int(args.size_mb * 1_000_000))
        print(f"wrote {args.traces} traces, {written / 1e6:.0f} MB, in {time.perf_counter() - started:.1f} s "
              f"to {folder}")
        out = folder.parent / f"{folder.name}-report.json"
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "traces", str(folder), "--json", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        elapsed = time.perf_counter() - started
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {"traces": []}
        out.unlink(missing_ok=True)
        read = len(report["traces"])
        print(f"read {read} traces (exit {done.returncode}) in {elapsed:.1f} s: {read / elapsed:.1f} traces/s, "
              f"{written / 1e6 / elapsed:.1f} MB/s; peak RSS {rss_mb:.0f} MB (goal < 300 MB)")
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

"""How fast `tokrace traces` reads a folder of real-sized traces, and in how much memory.

Writes N synthetic traces of about 1 MB each into a temporary folder (a mix of Claude Code sessions, Codex rollouts
and OTLP JSON Lines, each a few hundred lines with tool output as big as real ones), then, after one untimed pass
(so every run reads from the page cache), runs `tokrace traces FOLDER --json FILE` in a child process with --jobs 1
and with --jobs 2 in alternating rounds (3 by default; --jobs 1 first in one round, --jobs 2 first in the next), so
that a virtual machine's per-core speed drifting between runs moves both sides of a round alike. It prints each
run's wall time and CPU-seconds, each round's speed-up and the median and spread of the rounds, the MB/s per core
and what a 1 TB trace set would take (from the medians), and the peak RSS. On a busy box the wall times say more
about the other work than about tokrace, so it also prints each round's CPU-seconds of --jobs 2 against --jobs 1
(what a file costs with two workers busy against one: 1.00 when the work scales), where one more --jobs N run's
CPU-seconds go (the parent before, while and after the workers run; each worker's share), the critical path that
run gives on an idle box against its own total (CPU-seconds of runs made minutes apart differ by the box's drift,
so the two are never mixed) and with the rounds' CPU ratio, and how much N processes of pure Python get done at
once on this box now (the ceiling of any speed-up). Goals: --jobs 2 at least 1.8x faster than --jobs 1 on 1,000
files (on 2 cores; the median of the rounds), the same JSON in every run, under 300 MB for 1,000 traces of 1 MB.
About 3 minutes on an idle 2-core box (5 on a busy one).

    python scripts/bench_traces.py [--traces 1000] [--size-mb 1.0] [--jobs 2] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

SPEEDUP_GOAL, RSS_GOAL_MB = 1.8, 300.0
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
        t += 0.5 + rng.uniform(0.2, 20)  # the tool ran after its call (at t + 0.5): a result before it cannot be
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


class Run(NamedTuple):
    """One ``tokrace traces`` run: its wall and CPU seconds (the process and its workers), the JSON and exit code."""

    jobs: int
    wall: float
    cpu: float
    report: dict[str, Any]
    code: int


def read_folder(folder: Path, jobs: int) -> tuple[Run, float]:
    """``tokrace traces FOLDER --jobs N --json FILE`` in a fresh process, and the peak RSS in MB of any process so
    far."""
    out = folder.parent / f"{folder.name}-report-{jobs}.json"
    before = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "traces", str(folder), "--jobs", str(jobs),
                           "--json", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    elapsed = time.perf_counter() - started
    cpu = _children_cpu() - before  # the workers were waited for by the tool, so their CPU is in its own
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {"traces": []}
    out.unlink(missing_ok=True)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
    return Run(jobs, elapsed, cpu, report, done.returncode), rss_mb


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def round_orders(rounds: int, jobs: int) -> list[tuple[int, int]]:
    """The order of each round's two runs: --jobs 1 first in even rounds, --jobs N first in odd ones, so a box
    speeding up or slowing down through the rounds favours neither."""
    return [(1, jobs) if r % 2 == 0 else (jobs, 1) for r in range(rounds)]


def spread(values: list[float]) -> tuple[float, float, float]:
    """The median, the lowest and the highest of ``values``."""
    return statistics.median(values), min(values), max(values)


EXPLAIN = r"""
import os, resource, sys, time
def cpu(who=resource.RUSAGE_SELF):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime
import tokrace.tui.cli.traces as traces
import tokrace.tui.cli.traces_common as common
LOG = sys.argv[3]
work = common._work
def timed_work(batch):
    result = work(batch)
    with open(f"{LOG}.{os.getpid()}", "w") as f:
        f.write(str(time.process_time()))  # this worker's CPU so far: its last line is its whole share
    return result
common._work = timed_work
marks = []
each = traces.read_each
def read_each(*args, **kwargs):
    marks.append(cpu())
    yield from each(*args, **kwargs)
    marks.append(cpu())
traces.read_each = read_each
from tokrace.tui.main import main
main(["traces", sys.argv[1], "--jobs", sys.argv[2], "--json", os.devnull])
marks.append(cpu())
print(*marks)
"""


def explain(folder: Path, jobs: int) -> tuple[float, float, float, list[float]]:
    """Where ``--jobs N``'s CPU goes, in CPU-seconds (which move far less with other work on the box than wall
    seconds do): the parent before the workers start (start-up, the config, listing the files), while they run
    (taking each result in order and adding it up), after (the tables and the JSON), and each worker's whole
    share."""
    log = folder.parent / f"{folder.name}-explain"
    done = subprocess.run([sys.executable, "-c", EXPLAIN, str(folder), str(jobs), str(log)], capture_output=True,
                          text=True, check=False)
    workers = []
    for path in folder.parent.glob(f"{log.name}.*"):
        workers.append(float(path.read_text()))
        path.unlink()
    try:
        before, loop, end = (float(x) for x in done.stdout.split()[-3:])
    except ValueError:
        raise SystemExit(f"the explaining run failed: {done.stderr[-800:]}") from None
    return before, loop - before, end - loop, sorted(workers, reverse=True)


def box_scaling(jobs: int, seconds: float = 1.5) -> float:
    """How much more pure-Python work ``jobs`` processes do at once than one, in the same time, on this box now:
    the most ``--jobs`` can give (about ``jobs`` on an idle box with that many cores, less while other work runs)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    one = _spin(seconds)
    with ctx.Pool(jobs) as pool:
        many = sum(pool.map(_spin, [seconds] * jobs))
    return many / one


def _spin(seconds: float) -> int:
    """Units of JSON parsing done in ``seconds`` of wall time."""
    line = json.dumps({"type": "user", "message": {"content": [{"type": "text", "text": FILLER * 4}]}})
    end, done = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        for _ in range(200):
            json.loads(line)
        done += 1
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--size-mb", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=2, help="the jobs to compare with one (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one --jobs 1 and one --jobs N run, in "
                        "alternating order (default 3); the goal is judged on their median")
    parser.add_argument("--keep", type=Path, help="write the traces here and keep them")
    args = parser.parse_args()
    if args.rounds < 1 or args.jobs < 2 or args.traces < 1:
        parser.error("--rounds and --traces take 1 or more, --jobs 2 or more")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="tokrace-bench-traces-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        begun = time.perf_counter()
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"{cores} cores, load average {os.getloadavg()[0]:.1f} at the start")
        written = generate(folder, args.traces, int(args.size_mb * 1_000_000))
        print(f"wrote {args.traces} traces, {written / 1e6:.0f} MB, in {time.perf_counter() - begun:.1f} s "
              f"to {folder}")
        read_folder(folder, args.jobs)  # a first pass fills the page cache: every timed run reads from memory
        mb = written / 1e6
        runs: list[tuple[Run, Run]] = []
        rss_mb = 0.0
        for number, order in enumerate(round_orders(args.rounds, args.jobs), 1):
            pair: dict[int, Run] = {}
            for jobs in order:
                run, rss_mb = read_folder(folder, jobs)
                pair[jobs] = run
                read = len(run.report["traces"])
                print(f"round {number}, --jobs {jobs}: read {read} traces (exit {run.code}) in {run.wall:.1f} s, "
                      f"{run.cpu:.1f} CPU-s: {read / run.wall:.1f} traces/s, {mb / run.wall:.1f} MB/s")
            one, many = pair[1], pair[args.jobs]
            runs.append((one, many))
            print(f"round {number}: {one.wall / many.wall:.2f}x faster; CPU-seconds of --jobs {args.jobs} against "
                  f"--jobs 1: {many.cpu / one.cpu:.2f} (load average {os.getloadavg()[0]:.1f})")
        ratios = [one.wall / many.wall for one, many in runs]
        cpu_ratios = [many.cpu / one.cpu for one, many in runs]
        speedup, low, high = spread(ratios)
        cpu_ratio, cpu_low, cpu_high = spread(cpu_ratios)
        one_wall = statistics.median(one.wall for one, _ in runs)
        many_wall = statistics.median(many.wall for _, many in runs)
        one_cpu = statistics.median(one.cpu for one, _ in runs)
        print(f"--jobs {args.jobs} against --jobs 1 over {args.rounds} rounds: median {speedup:.2f}x (from {low:.2f} "
              f"to {high:.2f}: {', '.join(f'{r:.2f}' for r in ratios)}); CPU-seconds per file with {args.jobs} "
              f"workers busy against one process: median {cpu_ratio:.2f} (from {cpu_low:.2f} to {cpu_high:.2f})")
        before, during, after, workers = explain(folder, args.jobs)
        serial = before + after
        total = serial + during + sum(workers)
        path = serial + max(max(workers, default=0.0), (during + sum(workers)) / args.jobs)
        print(f"--jobs {args.jobs} in CPU-seconds (one more run): the parent {before:.2f} before the workers, "
              f"{during:.2f} while they ran, {after:.2f} after (tables, JSON); the workers "
              f"{', '.join(f'{w:.2f}' for w in workers)}; {total:.2f} in all")
        # CPU-seconds of two runs made at different times differ by the box's drift (a fifth or more on a VM):
        # the run's own total against its own critical path gives its shape; the rounds give what a file costs
        costing = max(cpu_ratio, 1.0)  # a second core never makes a file cheaper: below 1 is the box's noise
        idle = total / path / costing
        print(f"critical path on an idle box of {args.jobs} cores (the serial parts, then the busiest worker or an "
              f"even share of all the CPU while they ran): {path:.2f} s of that run's {total:.2f}, "
              f"{total / path:.2f}x, serial {serial / total:.1%}; with a file costing {costing:.2f} of one "
              f"process's CPU (the rounds' median {cpu_ratio:.2f}, 1.00 when below: noise), {idle:.2f}x")
        print(f"this box now: {args.jobs} processes do {box_scaling(args.jobs):.2f}x the pure-Python work of one in "
              f"the same time (the ceiling of the speed-up; load average {os.getloadavg()[0]:.1f})")
        per_core = mb / one_wall
        print(f"MB/s per core (--jobs 1, median): {per_core:.1f}; a 1 TB trace set at --jobs {args.jobs}: "
              f"{1e6 / (mb / many_wall) / 3600:.1f} h ({1e6 / per_core / 3600:.1f} h on one core)")
        cpu_core = mb / one_cpu
        print(f"the same from CPU-seconds (what an idle box gives; wall seconds above carry the other work): "
              f"{cpu_core:.1f} MB/s per core; a 1 TB trace set {1e6 / cpu_core / 3600:.1f} h on one core, "
              f"{1e6 / cpu_core / 3600 / idle:.1f} h at --jobs {args.jobs} on {args.jobs} idle cores")
        first = runs[0][0].report
        same = all(run.report == first and run.code == 0 for pair in runs for run in pair)
        print(f"took {time.perf_counter() - begun:.0f} s in all; load average {os.getloadavg()[0]:.1f} at the end")
        lines = [(f"traces --jobs {args.jobs} against --jobs 1, {args.traces} files (x faster, median)", ">= 1.8x",
                  f"{speedup:.2f}x", speedup >= SPEEDUP_GOAL),
                 (f"traces --jobs {args.jobs}: the same JSON as --jobs 1 (every run)", "identical",
                  "identical" if same else "DIFFERENT", same),
                 (f"traces, peak RSS of one process, {args.traces} traces of {args.size_mb:g} MB", "< 300 MB",
                  f"{rss_mb:.0f} MB", rss_mb < RSS_GOAL_MB)]
        for name, goal, got, met in lines:
            print(f"{name:64} {goal:>10} {got:>10}  {'met' if met else 'MISSED'}")
        return 0 if all(met for *_, met in lines) else 1
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

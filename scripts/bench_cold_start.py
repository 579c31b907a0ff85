"""Cold start: how long ``tokrace --version`` takes in a fresh process, and how long the demo takes from launch to
its first full frame on a terminal.

The demo runs in a pseudo-terminal of its own (no tmux, no terminal emulator): the script reads what it writes
and notes when every row of the screen has been written at least once since it switched to the alternate screen
(each row's cursor move, ``ESC [ row ; col H``): the first full frame. Goals (issue 29): ``--version`` < 0.15 s,
the demo's first frame < 0.4 s (medians of fresh processes). Not a test: it prints figures.

    python scripts/bench_cold_start.py [--runs 7] [--size 80x24]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VERSION_GOAL_S, FRAME_GOAL_S = 0.15, 0.4
TIMEOUT_S = 30.0
ALT_SCREEN = b"\x1b[?1049h"
MOVE = re.compile(rb"\x1b\[(\d+);\d+H")


def version_time() -> float:
    """Seconds from launching ``tokrace --version`` to its exit."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tokrace.tui.main", "--version"], cwd=ROOT, check=True,
                   capture_output=True, timeout=TIMEOUT_S)
    return time.perf_counter() - started


def first_frame(cols: int, rows: int) -> float:
    """Seconds from launching ``tokrace demo`` in a pseudo-terminal of ``cols`` x ``rows`` to the moment every
    row of its screen has been written."""
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the demo, on the terminal the parent reads
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)})
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execv(sys.executable, [sys.executable, "-m", "tokrace.tui.main", "demo"])
    seen: set[int] = set()
    out = b""
    on_screen = -1
    try:
        while time.perf_counter() - started < TIMEOUT_S:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            now = time.perf_counter()
            out += data
            if on_screen < 0:
                on_screen = out.find(ALT_SCREEN)
                if on_screen < 0:
                    continue
                out = out[on_screen:]
            seen.update(int(m) for m in MOVE.findall(out))
            out = out[-16:]  # a move cut by the end of a read is found with the next one
            if all(row in seen for row in range(1, rows + 1)):
                return now - started
        raise SystemExit(f"no full frame within {TIMEOUT_S:.0f} s (rows written: {len(seen)} of {rows})")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes for each figure")
    parser.add_argument("--size", default="80x24", help="the demo's terminal, COLSxROWS")
    args = parser.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    version_time()  # the first launch after an install fills the bytecode cache: not a cold start's
    versions = [version_time() for _ in range(args.runs)]
    frames = [first_frame(cols, rows) for _ in range(args.runs)]
    lines = [(f"`tokrace --version`, fresh process (median of {args.runs})", f"< {VERSION_GOAL_S:g} s",
              median(versions), median(versions) < VERSION_GOAL_S),
             (f"demo: launch to first full frame, {cols}x{rows} (median of {args.runs})", f"< {FRAME_GOAL_S:g} s",
              median(frames), median(frames) < FRAME_GOAL_S)]
    print(f"{'measure':64} {'goal':>10} {'measured':>10}")
    for name, goal, got, met in lines:
        print(f"{name:64} {goal:>10} {got:>8.3f} s  {'met' if met else 'MISSED'}")
    print(f"(--version {min(versions):.3f} to {max(versions):.3f} s; first frame {min(frames):.3f} to "
          f"{max(frames):.3f} s; load average {os.getloadavg()[0]:.1f})")
    return 0 if all(met for *_, met in lines) else 1


if __name__ == "__main__":
    sys.exit(main())

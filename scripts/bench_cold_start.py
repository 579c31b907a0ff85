"""Cold start: how long ``tokrace --version`` takes in a fresh process, and how long the demo takes from launch to
its first full frame on a terminal.

The demo runs in a pseudo-terminal of its own (no tmux, no terminal emulator): the script reads what it writes
and notes when every row of the screen has been written at least once since it switched to the alternate screen
(each row's cursor move, ``ESC [ row ; col H``) with the demo's lanes among it: the first full frame. Every
process is fresh; its bytecode is cached, as after the first launch of an install (in a folder of the script's
own, whatever ``PYTHONDONTWRITEBYTECODE`` says: a user's Python writes it). The first launch of a fresh clone,
with no bytecode for tokrace's own modules (its dependencies are compiled by pip when installed), is measured
too, and a bare Textual app's first frame beside it for scale. Goals (issue 29): ``--version`` < 0.15 s, the
demo's first frame < 0.4 s (medians). Not a test: it prints figures.

    python scripts/bench_cold_start.py [--runs 7] [--size 80x24]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VERSION_GOAL_S, FRAME_GOAL_S = 0.15, 0.4
TIMEOUT_S = 30.0
ALT_SCREEN = b"\x1b[?1049h"
MOVE = re.compile(rb"\x1b\[(\d+);\d+H")
CONTROL = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
LANE = b"Sol ultrafast"
"""A demo tier's name: the frame counted is the demo's (its lanes drawn), not a blank screen's."""
SOURCES = ("providers", "tui", "themes")
"""tokrace's own source folders: a fresh clone has no bytecode for them."""
BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Static
class Bare(App):
    def compose(self):
        yield Static("Sol ultrafast\\n" * 40)
        yield Footer()
Bare().run()
"""
"""A Textual app with next to nothing in it: what any Textual app's first frame costs on this machine."""
PROBE = """
import importlib.machinery, os, re, runpy, sys, time
out, rows, argv = os.environ["COLD_START_CPU"], int(os.environ["LINES"]), sys.argv[1:]
move = re.compile(r"\\x1b\\[(\\d+);\\d+H")
class Probe:
    def find_spec(self, name, path, target=None):
        if name != "textual.drivers.linux_driver":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module
        def exec_module(module):
            load(module)
            write, seen, on = module.LinuxDriver.write, set(), [False]
            def counting(driver, data):
                write(driver, data)
                on[0] = on[0] or "\\x1b[?1049h" in data
                if on[0] and len(seen) < rows:
                    seen.update(int(m) for m in move.findall(data))
                    if len(seen) >= rows:
                        with open(out, "w") as f:
                            f.write(repr(time.process_time()))
            module.LinuxDriver.write = counting
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Probe())
if argv[0] == "-c":
    sys.argv = ["-c", *argv[2:]]
    exec(compile(argv[1], "<app>", "exec"), {"__name__": "__main__"})
else:
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
"""
"""Run first (``python -c PROBE ARGV``), it notes the process's CPU time (every thread's, from its start) when the
app has written every row of its screen: a figure that the machine's load moves far less than the wall time."""


def child_env(cache: Path) -> dict[str, str]:
    """The environment of every process measured: bytecode written and read in ``cache``."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def version_time(env: dict[str, str]) -> float:
    """Seconds from launching ``tokrace --version`` to its exit."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tokrace.tui.main", "--version"], cwd=ROOT, check=True,
                   capture_output=True, timeout=TIMEOUT_S, env=env)
    return time.perf_counter() - started


def first_frame(argv: Sequence[str], env: dict[str, str], cols: int, rows: int) -> tuple[float, float]:
    """Seconds from launching ``python ARGV`` in a pseudo-terminal of ``cols`` x ``rows`` to the moment every row
    of its screen has been written, a demo lane's name among it; and the process's CPU seconds until it wrote them
    (``nan`` when it could not tell)."""
    cpu_file = Path(env["PYTHONPYCACHEPREFIX"]).parent / f"{Path(env['PYTHONPYCACHEPREFIX']).name}.cpu"
    cpu_file.unlink(missing_ok=True)
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app, on the terminal the parent reads
        os.environ.clear()
        os.environ.update({**env, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows),
                           "COLD_START_CPU": str(cpu_file)})
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-c", PROBE, *argv])
    seen: set[int] = set()
    out = b""
    on_screen = -1
    shown = False
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
            shown = shown or LANE in CONTROL.sub(b"", out)
            out = out[-64:]  # a move or a name cut by the end of a read is found with the next one
            if shown and all(row in seen for row in range(1, rows + 1)):
                return now - started, cpu_seconds(cpu_file)
        raise SystemExit(f"no full frame within {TIMEOUT_S:.0f} s (rows written: {len(seen)} of {rows})")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def cpu_seconds(path: Path) -> float:
    """What the probe noted (it writes just after the frame: wait for it a little)."""
    for _ in range(50):
        try:
            return float(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.01)
    return float("nan")


def forget_own_bytecode(cache: Path) -> None:
    """As in a fresh clone: no bytecode for tokrace's own modules (the dependencies' stays)."""
    for folder in SOURCES:
        shutil.rmtree(cache / (ROOT / folder).relative_to(ROOT.anchor), ignore_errors=True)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def spread(values: list[float]) -> str:
    return f"{min(values):.3f} to {max(values):.3f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes for each figure")
    parser.add_argument("--size", default="80x24", help="the demo's terminal, COLSxROWS")
    args = parser.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    demo = ["-m", "tokrace.tui.main", "demo", "--no-record"]
    with tempfile.TemporaryDirectory(prefix="tokrace-bytecode-") as folder:
        cache = Path(folder)
        env = child_env(cache)
        first_frame(demo, env, cols, rows)  # bytecode for everything (a fresh install's pip compiled its own)
        first_frame(["-c", BARE_APP], env, cols, rows)
        clones = []
        for _ in range(max(1, args.runs // 2)):
            forget_own_bytecode(cache)
            clones.append(first_frame(demo, env, cols, rows)[0])
        versions = [version_time(env) for _ in range(args.runs)]
        demo_runs, bare_runs = [], []
        for _ in range(args.runs):  # in turns, so both see the same load
            demo_runs.append(first_frame(demo, env, cols, rows))
            bare_runs.append(first_frame(["-c", BARE_APP], env, cols, rows))
    frames, demo_cpu = [run[0] for run in demo_runs], [run[1] for run in demo_runs]
    bare, bare_cpu = [run[0] for run in bare_runs], [run[1] for run in bare_runs]
    lines = [(f"`tokrace --version`, fresh process (median of {args.runs})", f"< {VERSION_GOAL_S:g} s",
              median(versions), median(versions) < VERSION_GOAL_S),
             (f"demo: launch to first full frame, {cols}x{rows} (median of {args.runs})", f"< {FRAME_GOAL_S:g} s",
              median(frames), median(frames) < FRAME_GOAL_S)]
    print(f"{'measure':64} {'goal':>10} {'measured':>10}")
    for name, goal, got, met in lines:
        print(f"{name:64} {goal:>10} {got:>8.3f} s  {'met' if met else 'MISSED'}")
    print(f"{f'demo, first launch of a fresh clone (no bytecode of its own; median of {len(clones)})':64} "
          f"{'':>10} {median(clones):>8.3f} s")
    print(f"{f'a bare Textual app: launch to first full frame (median of {args.runs})':64} {'':>10} "
          f"{median(bare):>8.3f} s")
    print(f"{'CPU to the first frame (every thread, from launch): demo / bare Textual':64} {'':>10} "
          f"{median(demo_cpu):>8.3f} / {median(bare_cpu):.3f} s")
    print(f"(--version {spread(versions)}; demo {spread(frames)}; fresh clone {spread(clones)}; bare Textual "
          f"{spread(bare)}; load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)")
    return 0 if all(met for *_, met in lines) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Faults from outside, on a real process: a disk that fills mid-race (a file-size limit), SIGTERM and SIGINT on
the race screen in a pseudo-terminal, and in bench. Each ends with the right exit code, the terminal restored,
the results printed (or the race stopped), and what was written still a recording that replays."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from paths import ROOT

from tokrace.providers.recording import read_recording


def env(tmp_path: Path) -> dict[str, str]:
    """A child's environment: its own config and data folders, a colour terminal."""
    out = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               TERM="xterm-256color", COLUMNS="120")
    out.pop("TEXTUAL", None)
    return out


def test_a_disk_that_fills_mid_race_stops_the_recording_once_and_bench_prints_its_results(tmp_path: Path) -> None:
    record = tmp_path / "full.jsonl"
    limit = 6_000
    script = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
              "from tokrace.tui.main import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", script, "bench", "--fast-forward", "--record", str(record),
                           "--json", "-", "--max-tokens", "200"],
                          capture_output=True, text=True, env=env(tmp_path), cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert all(run["ok"] and run["output_tokens"] == 200 for tier in report["tiers"] for run in tier["runs"])
    said = " ".join(done.stderr.split())
    assert said.count("cannot write the recording (File too large)") == 1
    assert "the recording stopped there (what it holds replays), the race went on" in said
    assert "partly recorded to" in said and "Traceback" not in said
    assert record.stat().st_size <= limit
    assert read_recording(record).lane_events(0)  # what it holds replays


def test_a_screen_recorder_whose_disk_fills_says_so_once_and_the_race_goes_on(tmp_path: Path) -> None:
    """The screen's recorder writes every 50 ms; the first failed write stops it with one notification."""
    script = f"""
import asyncio, resource, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))
from tui_harness import demo_app, at
from tokrace.providers.runs.record_paths import RecordPlan
from pathlib import Path

async def main():
    app, clock = demo_app()
    app.runner.record = RecordPlan(Path({str(tmp_path / "screen.jsonl")!r}))
    told = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.runner.notify = lambda message, title, severity: told.append((title, message))
        await at(pilot, clock, 12.0)
        await app.runner.wait_finished()
        done = [lane.finished and lane.state == "done" for lane in app.runner.live.lanes]
    print(repr(told))
    print(all(done))

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env(tmp_path),
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    told, finished = done.stdout.strip().splitlines()[-2:]
    assert told.count("Recording stopped") == 1 and "File too large" in told and finished == "True"


def recorded(record: Path, size: int = 4000) -> bool:
    """Whether the race has written ``size`` bytes of its recording (its lanes are streaming)."""
    return record.exists() and record.stat().st_size >= size


def until_recorded(record: Path, timeout: float = 30.0) -> None:
    """A bounded wait until :func:`recorded`."""
    deadline = time.monotonic() + timeout
    while not recorded(record):
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {record} to be written"
        time.sleep(0.05)


def default_sigint() -> None:
    """In the child, before it starts: SIGINT back to its default. An ignored SIGINT is inherited across exec, and
    a test worker may have been left ignoring it (Python then never installs its own handler, and the child would
    sleep through the SIGINT the test sends)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

class Screen:
    """tokrace running in a pseudo-terminal of 100x30, its output collected."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.master = master
        self.proc = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", *args], stdin=slave, stdout=slave,
                                     stderr=slave, env=env(tmp_path), cwd=ROOT, start_new_session=True,
                                     preexec_fn=default_sigint)
        os.close(slave)
        self.output = b""

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        """Collect the output until ``condition()`` holds (a bounded wait)."""
        end = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < end, f"waited {timeout:g} s for {what}"
            self._read(0.05)

    def read_until(self, marker: bytes, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while marker not in self.output and time.monotonic() < end:
            self._read(0.1)
        assert marker in self.output, self.output[-500:]

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the child closed the terminal
            return False
        self.output += data
        return bool(data)

    def finish(self, timeout: float = 30.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end and self._read(0.1):
            if self.proc.poll() is not None:
                while self._read(0.05) and select.select([self.master], [], [], 0)[0]:
                    pass
                break
        code = self.proc.wait(timeout=max(1.0, end - time.monotonic()))
        os.close(self.master)
        return code


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_on_the_race_screen_restores_the_terminal_records_stopped_lanes_and_exits(
        tmp_path: Path, sig: signal.Signals, code: int) -> None:
    record = tmp_path / "race.jsonl"
    screen = Screen(tmp_path, "demo", "--record", str(record), "--max-tokens", "4000")
    screen.read_until(b"\x1b[?1049h")  # the alternate screen
    screen.read_until(b"tok/s")  # a frame of the race
    screen.wait_for(lambda: recorded(record), "the lanes' first events in the recording")
    start = len(screen.output)
    screen.proc.send_signal(sig)
    assert screen.finish() == code
    after = screen.output[start:]
    assert b"\x1b[?1049l" in after  # the alternate screen left
    assert b"\x1b[?1000l" in after and b"\x1b[?1006l" in after  # mouse reporting off
    assert f"recorded to {record}".encode() in screen.output.replace(b"\r\n", b"\n").replace(b"\n", b"")
    rec = read_recording(record)
    assert rec.warnings == []
    stopped = [e for lane in range(3) for e in rec.lane_events(lane) if getattr(e, "error", "") == "stopped"]
    assert stopped, "every lane still running ends as stopped in the recording"


@pytest.mark.parametrize(("sig", "code", "said"), [(signal.SIGTERM, 143, "terminated"),
                                                   (signal.SIGINT, 130, "interrupted")])
def test_a_signal_in_bench_stops_the_lanes_writes_them_and_exits_like_the_screen(
        tmp_path: Path, sig: signal.Signals, code: int, said: str) -> None:
    record = tmp_path / "bench.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "bench", "--record", str(record), "--max-tokens",
                             "4000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(tmp_path), cwd=ROOT,
                            preexec_fn=default_sigint)
    until_recorded(record)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == code and f"tokrace: {said}" in err.decode() and b"Traceback" not in err
    rec = read_recording(record)
    assert rec.warnings == []
    assert any(getattr(e, "error", "") == "stopped" for lane in range(3) for e in rec.lane_events(lane))


def test_kill_9_in_bench_loses_at_most_the_line_being_written(tmp_path: Path) -> None:
    record = tmp_path / "killed.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "bench", "--record", str(record), "--max-tokens",
                             "4000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(tmp_path),
                            cwd=ROOT)
    until_recorded(record)
    proc.kill()
    proc.wait(timeout=30)
    on_disk = record.read_bytes()
    rec = read_recording(record)
    kept = sum(len(events) for events in rec.events.values())
    assert kept >= on_disk.count(b"\n") - 2  # every whole line but the header (and at most one cut-off line)
    assert rec.warnings == [] if on_disk.endswith(b"\n") else len(rec.warnings) == 1

"""A signal always ends tokrace: when the event loop is stuck in a call that does not return, the first SIGTERM
(or SIGINT) is handed to the loop as usual and the second ends the process at once with the signal's exit code;
and a FIFO given as a replay tier's file is refused at once rather than blocking in ``open()``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

STUCK = """
import asyncio, sys, time
from tokrace.tui.cli.signals import install

async def main():
    install(lambda code: sys.exit(code))
    print("ready", flush=True)
    time.sleep(60)  # the loop is stuck: its own signal handlers cannot run

asyncio.run(main())
"""


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_second_signal_ends_a_process_whose_loop_is_stuck(sig: signal.Signals, code: int) -> None:
    child = subprocess.Popen([sys.executable, "-c", STUCK], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(sig)
    time.sleep(0.2)
    assert child.poll() is None  # the first one waits for the loop
    started = time.monotonic()
    child.send_signal(sig)
    assert child.wait(5) == -sig  # ended by the signal itself: a shell reports 128 + its number
    assert 128 + sig == code
    assert time.monotonic() - started < 1.0


def test_a_fifo_as_a_replay_tiers_file_is_one_line_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    config = tmp_path / "tokrace.toml"
    config.write_text(f'[[tiers]]\nname = "old"\nprovider = "replay"\nfile = "{fifo}"\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "--config", str(config), "bench",
                           "--no-record"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1, done.stderr  # the lane failed, with its one line
    assert f"1 failed: {fifo}: cannot read it (it is a FIFO (named pipe), not a regular file)" in done.stdout
    assert "Traceback" not in done.stderr

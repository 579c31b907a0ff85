"""``tokrace proxy`` as a process: SIGTERM or Ctrl-C stops it as a quit does, its recording whole and its report
printed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serving import fast_source, serve_in_thread

from tokrace.providers.recording import read_recording


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_proxy_with_its_recording_written_and_its_report_printed(
        tmp_path: Path, sig: signal.Signals) -> None:
    record = tmp_path / "stopped.jsonl"
    with serve_in_thread(fast_source()) as server:
        proxy = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "proxy", "--port", "0", "--upstream",
                                  server.url, "--record", str(record)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proxy.stderr is not None
        line = proxy.stderr.readline()
        url = line.rsplit(" ", 1)[1].strip()
        body = {"model": "m", "stream": True, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(url + "/v1/messages", json=body, timeout=30).status_code == 200
        proxy.send_signal(sig)
        out, err = proxy.communicate(timeout=60)
    assert proxy.returncode == 0, err
    assert "tokrace proxy: stopped" in err and "recorded 1 call(s)" in err
    assert "where the time went" in out
    events = [e.kind for lane in read_recording(record).events.values() for e in lane]
    assert events.count("request") == 1 and events.count("done") == 1

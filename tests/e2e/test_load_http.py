"""``tokrace bench --concurrency`` in real processes: over HTTP to a ``tokrace serve`` process, every request found
in the server's log with the TTFT the server itself timed, one connection per stream; and stopped by a signal."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A ``tokrace serve`` process on a free loopback port: its OpenAI base_url, and the process."""
    proc = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "serve", "--port", "0", "--ttft-ms", "40",
                             "--tok-s", "2000"], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:
            found = re.search(r"OpenAI base_url\s+(\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "tokrace serve never said where it listens"
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(10)


def test_every_request_is_one_the_server_served_with_its_ttft(tmp_path: Path,
                                                              serve: tuple[str, subprocess.Popen[str]]) -> None:
    url, server = serve
    (tmp_path / "tokrace.toml").write_text(
        f'[defaults]\nmax_tokens = 60\n\n[[tiers]]\nname = "local"\nprovider = "openai"\nmodel = "m"\n'
        f'base_url = "{url}"\n', encoding="utf-8")
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "bench", "--concurrency", "3", "--requests",
                           "7", "--json", "-"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    (point,) = json.loads(done.stdout)["points"]
    rows = point["rows"]
    assert point["requests"] == point["ok"] == 7 and point["concurrency"] == 3
    assert sum(row["new_connection"] for row in rows) == 3  # one connection per stream, kept for its next requests
    assert sorted({row["stream"] for row in rows if row["new_connection"]}) == [0, 1, 2]
    server.terminate()
    assert server.stderr is not None
    log = server.stderr.read()
    served = dict(re.findall(r"^(\S+) /v1/chat/completions 200 ttft (\d+) ms", log, re.MULTILINE))
    assert sorted(served) == sorted(row["request_id"] for row in rows)
    for row in rows:  # the server's TTFT is from the request's arrival, ours from its start: connect_s apart
        ours = (row["ttft_s"] - row["connect_s"]) * 1000
        assert abs(ours - int(served[row["request_id"]])) < 15, row
    assert point["delivered_tok_s"] == pytest.approx(point["output_tokens"] / point["window_s"], rel=1e-3)
    assert point["window_s"] == pytest.approx(max(row["end_s"] for row in rows), abs=1e-5)


@pytest.mark.parametrize(("sig", "code", "said"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "terminated")])
def test_a_signal_stops_the_load_and_it_still_reports(tmp_path: Path, sig: int, code: int, said: str) -> None:
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    (tmp_path / "tokrace.toml").write_text(  # a token at once, then 20 a second: a request lasts 20 s
        '[defaults]\nmax_tokens = 400\n\n[[tiers]]\nname = "slow"\nprovider = "synthetic"\nttft_ms = 0\n'
        'tok_s = 20\n', encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "bench", "--concurrency", "2", "--duration",
                             "60", "--json", "-"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(6.0)  # started (a few seconds on a loaded box), both streams under way
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert f"tokrace: {said}" in err and "Traceback" not in err
    report = json.loads(out)
    assert report["stopped"] is True
    (point,) = report["points"]
    assert [row["error"] for row in point["rows"]] == ["stopped before the end"] * 2
    assert point["output_tokens"] > 0  # what arrived before the signal was delivered, and counts

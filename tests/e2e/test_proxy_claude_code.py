"""A real agent CLI through ``tokrace proxy`` to ``tokrace serve``: Claude Code completes a headless task, every
call is recorded and its key is nowhere in the recording. Opt-in and offline when it runs: set
``TOKRACE_E2E_CLAUDE`` to a ``claude`` installed from npm (``npm install @anthropic-ai/claude-code``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from serving import fast_source, serve_in_thread

from tokrace.providers.model.events import Done, Request
from tokrace.providers.recording import read_recording

CLAUDE = os.environ.get("TOKRACE_E2E_CLAUDE", "")
KEY = "sk-ant-e2e-canary-0123456789abcdef"


@pytest.mark.skipif(not CLAUDE, reason="set TOKRACE_E2E_CLAUDE to a claude binary "
                                       "(npm install @anthropic-ai/claude-code) to run it")
def test_claude_code_completes_a_headless_task_through_the_proxy(tmp_path: Path) -> None:
    record = tmp_path / "claude.jsonl"
    env = {**os.environ, "HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": KEY, "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "XDG_DATA_HOME": str(tmp_path / "data")}
    with serve_in_thread(fast_source(ttft_ms=50, tok_s=2000)) as server:
        done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "proxy", "--port", "0", "--upstream",
                               server.url, "--record", str(record), "--", CLAUDE, "-p", "say hello"],
                              env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Amdahl" in done.stdout  # the served answer, as the agent printed it
    events = [e for lane in read_recording(record).events.values() for e in lane]
    requests = sum(isinstance(e, Request) for e in events)
    assert requests >= 1 and sum(isinstance(e, Done) for e in events) == requests
    assert "where the time went" in done.stdout and f"recorded {requests} call(s)" in done.stderr
    assert KEY not in record.read_text() and KEY not in done.stdout + done.stderr

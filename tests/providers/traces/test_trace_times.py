"""Times in an agent trace are checked like every other number: a step that ends before it starts is skipped and
said (how many, the first one and why), the rest of the trace is read; a FIFO given as a trace is refused at once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from paths import ROOT

from tokrace.providers.traces.read import Found, read_file
from tokrace.providers.traces.reader_tools import Chains

SESSION = ROOT / "tests/providers/traces/fixtures/claude-code/session-a.jsonl"


def test_a_tool_step_that_ends_before_it_starts_is_skipped_with_its_reason(tmp_path: Path) -> None:
    text = SESSION.read_text(encoding="utf-8")
    # the first tool's result now comes 9 s before its call
    path = tmp_path / "t.jsonl"
    path.write_text(text.replace('"timestamp": "2026-05-01T10:00:10.000Z"', '"timestamp": "2026-05-01T09:59:55.000Z"',
                                 1), encoding="utf-8")
    good = read_file(SESSION).traces[0]
    trace = read_file(path).traces[0]
    assert len([s for s in trace.steps if s.kind == "tool"]) == len([s for s in good.steps if s.kind == "tool"]) - 1
    note = next(n for n in trace.notes if "whose times cannot be" in n)
    assert note == "skipped 1 step(s) whose times cannot be (first, tool Bash: it ends 9.000 s before it starts)"
    assert trace.skipped == good.skipped + 1


def test_a_step_a_hair_reversed_is_rounding_and_kept() -> None:
    chains = Chains()
    assert chains.add("tool", 10.0, 9.9995) is not None and chains.dropped == 0
    assert chains.add("tool", 10.0, float("nan")) is None and chains.dropped == 1


def test_a_fifo_given_as_a_trace_is_refused_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    outcome: list[Found] = []

    def read() -> None:
        outcome.append(read_file(fifo))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "reading a FIFO trace blocked"
    assert outcome[0].problem == f"{fifo}: cannot read it (it is a FIFO (named pipe), not a regular file)"

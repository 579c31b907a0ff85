"""Times and names read from a recording: a negative, reversed or out-of-order time is skipped with its reason; a name
or an id holding control characters comes out as one safe line; a FIFO is refused in one line, never waited on."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from tokrace.providers.model.events import Error, Segment, ToolCall
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import FORMAT, VERSION, RecordingError, read_recording

HOSTILE = "\x1b]52;c;cHduZWQ=\x1b\\ \x1b]0;owned\x07 \x1b[2J \x9b31m"
HEADER = {"format": FORMAT, "version": VERSION, "prompt": "Why?", "scenario": None,
          "tiers": [{"name": f"a{HOSTILE}", "provider": "synthetic", "model": f"m{HOSTILE}"}]}


def write(path: Path, *events: dict[str, object]) -> Path:
    lines = [json.dumps(HEADER), *(json.dumps({"lane": 0, **e}) for e in events)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def delta(t: float) -> dict[str, object]:
    return {"kind": "delta", "t": t, "text": "x"}


@pytest.mark.parametrize(("bad", "reason"), [
    ({"kind": "delta", "t": -5.0003, "text": "x"}, "a time before the lane started"),
    ({"kind": "request", "t": -1.0}, "a time before the lane started"),
    ({"kind": "segment", "t": 0.4, "seg": "model", "start": 0.3, "end": 0.1}, "ends (0.1) before it starts (0.3)"),
    ({"kind": "segment", "t": 0.4, "seg": "model", "start": -2.0, "end": 0.1}, "a time before the lane started"),
    (delta(0.05), "its time 0.05 is before the 0.3 of the text before it"),
])
def test_a_negative_reversed_or_out_of_order_time_is_skipped_with_its_reason(
        tmp_path: Path, bad: dict[str, object], reason: str) -> None:
    path = write(tmp_path / "r.jsonl", {"kind": "request", "t": 0.0}, delta(0.3), bad, delta(0.5),
                 {"kind": "done", "t": 0.6})
    rec = read_recording(path)
    assert [e.t for e in rec.lane_events(0)] == [0.0, 0.3, 0.5, 0.6]
    assert len(rec.warnings) == 1 and "skipped 1 line" in rec.warnings[0] and reason in rec.warnings[0]


def test_times_a_hair_out_of_order_are_rounding_and_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", {"kind": "request", "t": 0.0}, delta(0.3), delta(0.2995),
                 {"kind": "done", "t": 0.6})
    rec = read_recording(path)
    assert len(rec.lane_events(0)) == 4 and rec.warnings == []


def test_names_and_ids_from_a_recording_hold_no_control_character(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", {"kind": "request", "t": 0.0, "model": HOSTILE},
                 {"kind": "tool_call", "t": 0.1, "id": HOSTILE, "name": HOSTILE, "arguments": "{}"},
                 {"kind": "segment", "t": 0.2, "seg": "tool", "start": 0.1, "end": 0.2, "label": HOSTILE},
                 {"kind": "error", "t": 0.3, "error": HOSTILE, "message": f"boom{HOSTILE}\nline two"})
    rec = read_recording(path)
    events = rec.lane_events(0)
    texts = [events[0].model]  # type: ignore[union-attr]
    call, seg, err = events[1], events[2], events[3]
    assert isinstance(call, ToolCall) and isinstance(seg, Segment) and isinstance(err, Error)
    texts += [call.id, call.name, seg.label, err.error, err.message]
    tier = TierSpec.from_public(rec.tiers[0])
    texts += [tier.name, tier.model, tier.provider]
    for text in texts:
        assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in text), text
    assert "␛]52;c;" in tier.model and err.message.endswith(" line two")


def test_a_fifo_given_as_a_recording_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(outcome, fifo), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], RecordingError)
    assert str(outcome[0]) == f"{fifo}: cannot read it (it is a FIFO (named pipe), not a regular file)"


def _catch(outcome: list[BaseException], path: Path) -> None:
    try:
        read_recording(path)
    except BaseException as exc:
        outcome.append(exc)

"""The recorder's hot path: a delta text found to hold nothing to mask is remembered with its JSON, and written
exactly as the slow path writes it; texts that hold a secret or a credential's shape are masked every time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokrace.providers.model.events import Delta
from tokrace.providers.model.masking import redact
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import Recorder, event_line
from tokrace.providers.recording import writer as recording


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[1:-1]  # not splitlines: a text may hold U+2028


@pytest.mark.parametrize("many", [False, True])
def test_remembered_texts_are_written_as_the_slow_path_writes_them_and_shapes_are_masked_every_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, many: bool) -> None:
    monkeypatch.setattr(recording, "PLAIN_TEXTS_KEPT", 3)  # forgets often: every path is taken
    tier = TierSpec(name="a", provider="synthetic", model="m")
    texts = [" plain", " é\u2028\"quoted\"", " sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456", " plain", "\n", " x", " y", " z",
             " plain", " sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456"] * 3
    deltas = [Delta(0.01 * i, text, "content" if i % 3 else "reasoning", 1 if i % 2 else None)
              for i, text in enumerate(texts)]
    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [tier])
    if many:
        recorder.on_deltas(0, deltas[:7])
        recorder.on_deltas(0, deltas[7:])
    else:
        for delta in deltas:
            recorder(0, delta)
    recorder.close()
    assert len(recorder._plain) <= 3
    lines = _lines(tmp_path / "r.jsonl")
    assert lines == [redact(event_line(0, 0, delta), []) for delta in deltas]
    assert all("ABCDEFGHIJKLMNOP" not in line for line in lines)


def test_only_short_texts_are_remembered_so_a_long_fast_race_keeps_the_memo_small(tmp_path: Path) -> None:
    """An HTTP lane's paced reads join a read's chunks into one delta of a kilobyte or so, hardly ever seen twice:
    such texts are written as always but not remembered (they were, up to 65,536 of them: 130 MB)."""
    tier = TierSpec(name="a", provider="openai", model="m")
    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [tier], buffered=True)
    long_texts = [f" read {i} " + "word " * 200 for i in range(300)]
    deltas = [Delta(0.01 * i, text, "content", None, 190) for i, text in enumerate(long_texts)]
    deltas += [Delta(5.0 + 0.01 * i, text, "content", 1) for i, text in enumerate([" a", " b", " a"])]
    recorder.on_deltas(0, deltas)
    recorder.close()
    assert set(recorder._plain) == {" a", " b"}
    assert _lines(tmp_path / "r.jsonl") == [redact(event_line(0, 0, delta), []) for delta in deltas]
    assert max(map(len, recorder._plain)) <= recording.PLAIN_TEXT_CHARS


@pytest.mark.parametrize("buffered", [False, True])
def test_a_huge_text_is_written_a_slice_at_a_time_as_its_one_line_with_secrets_across_slices_masked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, buffered: bool) -> None:
    monkeypatch.setattr(recording, "HUGE_TEXT_CHARS", 16)
    monkeypatch.setattr(recording, "SLICE_CHARS", 7)
    monkeypatch.setenv("OPENAI_API_KEY", "key-0123456789abcdef")
    tier = TierSpec(name="a", provider="openai", model="m")
    texts = ["small", 'a "huge" text\n\u2028 é that goes on' * 3, "x" * 30 + "key-0123456789abcdef" + "y" * 30,
             "z" * 14 + "authorization: Bearer abcdefgh12345678" + "z" * 20, "tail"]
    deltas = [Delta(0.5 * i, text, "content", None if i % 2 else 3) for i, text in enumerate(texts)]
    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [tier], buffered=buffered)
    recorder(0, deltas[0])
    recorder.on_deltas(0, deltas[1:3])
    recorder(0, deltas[3])
    recorder(0, deltas[4])
    recorder.close()
    lines = _lines(tmp_path / "r.jsonl")
    assert lines == [redact(event_line(0, 0, delta), ["key-0123456789abcdef"]) for delta in deltas]
    assert "0123456789abcdef" not in "".join(lines) and "abcdefgh12345678" not in "".join(lines)


def test_recording_a_huge_text_holds_little_besides_the_text(tmp_path: Path) -> None:
    """A 10 MB event was escaped, made a line, that line and its newline, then bytes: four copies at once."""
    import tracemalloc

    tier = TierSpec(name="a", provider="openai", model="m")
    delta = Delta(0.1, "y" * 8_000_000, "content")
    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [tier])
    tracemalloc.start()
    try:
        recorder(0, delta)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    recorder.close()
    assert peak < len(delta.text) // 4, peak
    assert (tmp_path / "r.jsonl").stat().st_size > len(delta.text)


class CountingFile:
    """The recording's file, counting the writes it is handed (each one call to the OS: the file is unbuffered)."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        return self.real.write(data)  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.real.close()  # type: ignore[attr-defined]


def test_an_unbuffered_recorder_hands_the_deltas_a_lane_has_due_at_once_to_the_os_in_one_write(
        tmp_path: Path) -> None:
    """``bench`` records unbuffered: a wake-up's deltas (a list, or a synthetic lane's run) go in one write of
    every line, the same bytes as a write per delta (which cost a third of ``bench --fast-forward``'s time)."""
    from tokrace.providers.model.events import DeltaRun

    tier = TierSpec(name="a", provider="synthetic", model="m")
    words = [" plain", " é\u2028\"quoted\"", " sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456", "\n"]
    deltas = [Delta(0.01 * i, words[i % 4], "content", 1) for i in range(40)]
    run = DeltaRun([0.5 + 0.01 * i for i in range(40)], [words[i % 4] for i in range(40)], "reasoning", [1] * 40)
    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [tier])
    counted = CountingFile(recorder._fh)
    recorder._fh = counted  # type: ignore[assignment]
    recorder.on_deltas(0, deltas)
    recorder.on_deltas(1, run)
    recorder.on_deltas(1, run)  # its texts now known to hold nothing to mask (but the key's): column by column
    recorder.close()
    assert len(counted.writes) == 3
    expected = [redact(event_line(lane, 0, delta), []) for lane, batch in ((0, deltas), (1, run), (1, run))
                for delta in batch]
    assert _lines(tmp_path / "r.jsonl") == expected
    assert b"sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456" not in (tmp_path / "r.jsonl").read_bytes()

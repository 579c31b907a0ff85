"""Recordings (docs/design.md §7): a header then one flushed line per event; read back leniently at the end only; never
a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import race_virtually, synthetic
from paths import ROOT, TESTS

from tokrace.providers import __version__
from tokrace.providers.model.events import Delta, Error, Event, event_to_dict
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import (
    FORMAT,
    VERSION,
    Recorder,
    RecordingError,
    default_path,
    event_line,
    list_recordings,
    read_recording,
    recordings_dir,
)

FAKE_KEY = "sk-tokrace-test-0123456789abcdef"
FAKE_BEARER = "tok_live_ABCDEF0123456789"


def record_race(path: Path, tiers: list[TierSpec], max_tokens: int = 20, prompt: str = "Why?") -> Recorder:
    recorder = Recorder(path, prompt, tiers)
    race_virtually(tiers, max_tokens=max_tokens, prompt=prompt, listeners=[recorder])
    recorder.close()
    return recorder


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_first_line_is_a_header_with_format_version_prompt_and_tiers(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    record_race(path, [synthetic("fast", model="m1", tok_s=500), synthetic("slow", tok_s=50)], prompt="Hello?")
    header = lines(path)[0]
    assert header["format"] == FORMAT and header["version"] == VERSION == 1
    assert header["prompt"] == "Hello?"
    assert [t["name"] for t in header["tiers"]] == ["fast", "slow"]  # type: ignore[attr-defined]
    assert header["tool_version"] == __version__


def test_every_following_line_is_one_event_with_its_lane_and_run(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    tiers = [synthetic("a", tok_s=100), synthetic("b", tok_s=200)]
    recorder = Recorder(path, "Why?", tiers)
    lanes = race_virtually(tiers, max_tokens=10, listeners=[recorder])
    recorder.close()
    body = lines(path)[1:]
    assert len(body) == sum(len(lane.events) for lane in lanes)
    for lane in lanes:
        assert [{k: v for k, v in obj.items() if k not in ("lane", "run")} for obj in body
                if obj["lane"] == lane.index] == [event_to_dict(e) for e in lane.events]
    assert {obj["run"] for obj in body} == {0}


def test_each_event_is_on_disk_as_soon_as_it_happens(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    tiers = [synthetic("a", tok_s=100)]
    recorder = Recorder(path, "Why?", tiers)
    checked: list[bool] = []

    def check_disk(lane: int, event: Event) -> None:
        last = path.read_text(encoding="utf-8").splitlines()[-1]
        checked.append(json.loads(last) == {"lane": lane, "run": 0, **event_to_dict(event)})

    race_virtually(tiers, max_tokens=10, listeners=[recorder, check_disk])
    recorder.close()
    assert len(checked) == 14 and all(checked)


def test_a_recording_reads_back_to_the_same_events(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    tiers = [synthetic("a", tok_s=100, jitter=0.3, seed=4), synthetic("b", tok_s=300, thinking_tokens=5)]
    recorder = Recorder(path, "Why?", tiers)
    lanes = race_virtually(tiers, max_tokens=30, listeners=[recorder])
    recorder.close()
    rec = read_recording(path)
    assert rec.warnings == []
    assert rec.runs == 1
    assert [rec.lane_events(i) for i in range(2)] == [lane.events for lane in lanes]
    assert rec.lane_index("b") == 1
    assert rec.duration == max(lane.events[-1].t for lane in lanes)


def test_a_truncated_last_line_is_dropped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    record_race(path, [synthetic("a", tok_s=100)], max_tokens=10)
    text = path.read_text(encoding="utf-8").rstrip("\n")
    path.write_text(text[: text.rindex("\n") + 12], encoding="utf-8")
    rec = read_recording(path)
    assert len(rec.warnings) == 1 and "last line is incomplete" in rec.warnings[0]
    assert len(rec.lane_events(0)) == 13


def test_damage_before_the_last_line_is_skipped_and_counted_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    record_race(path, [synthetic("a", tok_s=100)], max_tokens=10)
    body = path.read_text(encoding="utf-8").splitlines()
    body[3] = body[3][:10]
    path.write_text("\n".join(body) + "\n", encoding="utf-8")
    rec = read_recording(path)
    assert len(rec.warnings) == 1 and "skipped 1 line that is not a recorded event (first, line 4: not JSON" \
        in rec.warnings[0]
    assert len(rec.lane_events(0)) == len(body) - 2


def test_a_newer_format_version_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    path.write_text(json.dumps({"format": FORMAT, "version": VERSION + 1}) + "\n", encoding="utf-8")
    with pytest.raises(RecordingError, match="version 2 is newer than this tokrace reads"):
        read_recording(path)


@pytest.mark.parametrize("content", ["", "hello\n", '{"format": "something-else", "version": 1}\n', "[1, 2]\n"])
def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RecordingError, match="not a tokrace recording"):
        read_recording(path)


def test_a_binary_or_missing_file_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(RecordingError, match="cannot read it"):
        read_recording(binary)
    with pytest.raises(RecordingError, match="no such file"):
        read_recording(tmp_path / "missing.jsonl")


def test_no_secret_is_ever_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKRACE_TEST_KEY", FAKE_KEY)
    tier = synthetic("leaky", tok_s=200, text=f"My key is {FAKE_KEY} and I send Authorization: Bearer {FAKE_BEARER} "
                                              "to the server.")
    tier.api_key_env = "TOKRACE_TEST_KEY"
    tier.options.update({"api_key": FAKE_KEY, "headers": {"Authorization": f"Bearer {FAKE_BEARER}"}})
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path, f"prompt with {FAKE_KEY}", [tier])
    race_virtually([tier], max_tokens=100, listeners=[recorder])
    recorder(0, Error(t=9.0, error="http", message=f'HTTP 401 for {{"authorization": "Bearer {FAKE_BEARER}"}}'))
    recorder.close()
    written = path.read_text(encoding="utf-8")
    assert FAKE_KEY not in written
    assert FAKE_BEARER not in written
    assert "TOKRACE_TEST_KEY" in written  # the variable's name is fine, and useful
    assert "[redacted]" in written


def test_the_key_a_provider_reads_by_default_is_masked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = "plainkeywithnoprefix42"  # not shaped like a credential: only its value can find it
    monkeypatch.setenv("OPENAI_API_KEY", plain)
    tier = TierSpec(name="chat", provider="openai", model="m")  # no api_key_env: the provider reads OPENAI_API_KEY
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path, "Why?", [tier])
    recorder(0, Delta(t=0.1, text=f"the server echoed {plain} back"))
    recorder.close()
    written = path.read_text(encoding="utf-8")
    assert plain not in written
    assert "[redacted]" in written


def test_a_tiers_public_form_keeps_token_counts_and_key_variable_names_but_not_keys() -> None:
    tier = synthetic("t", tok_s=10, tokens_per_event=2, fail_after_tokens=4, thinking_tokens=3)
    tier.api_key_env = "OPENAI_API_KEY"
    tier.options.update({"api_key": FAKE_KEY, "access_token": FAKE_BEARER, "client_secret": "s3cr3t-value"})
    public = tier.public()
    assert public["api_key_env"] == "OPENAI_API_KEY"
    assert (public["tokens_per_event"], public["fail_after_tokens"], public["thinking_tokens"]) == (2, 4, 3)
    assert not {"api_key", "access_token", "client_secret"} & set(public)


def test_recordings_go_to_the_user_data_dir_named_by_time_and_prompt(isolated_user_dirs: Path) -> None:
    import datetime as dt

    path = default_path("Why is the sky blue?", dt.datetime(2026, 8, 13, 9, 30, 5))
    assert path == isolated_user_dirs / "data" / "tokrace" / "recordings" / "20260813-093005-why-is-the-sky-blue.jsonl"
    assert recordings_dir() == path.parent


def test_a_recordings_name_tells_its_scenario_and_tiers_apart(isolated_user_dirs: Path) -> None:
    """Every demo race has the same prompt: the tiers raced (and a scenario's name) tell the files apart."""
    import datetime as dt

    when = dt.datetime(2026, 8, 13, 9, 30, 5)
    loop = default_path("coding-loop", when, tiers=["Sol standard", "Sol ultrafast"])
    assert loop.name == "20260813-093005-coding-loop-sol-standard-sol-ultrafast.jsonl"
    other = default_path("coding-loop", when, tiers=["Sol priority"])
    assert other.name == "20260813-093005-coding-loop-sol-priority.jsonl"
    many = default_path("x", when, tiers=[f"A very long tier name {i}" for i in range(9)])
    assert len(many.name) < 120 and not many.stem.endswith("-")


def test_a_recording_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(RecordingError, match="cannot write the recording"):
        Recorder(blocker / "r.jsonl", "Why?", [synthetic()])


def test_listing_shows_newest_first_with_prompt_tiers_duration_and_problems(tmp_path: Path) -> None:
    import os

    older, newer, broken = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    record_race(older, [synthetic("one", tok_s=100)], prompt="first")
    record_race(newer, [synthetic("two", tok_s=100), synthetic("three", tok_s=50)], prompt="second")
    broken.write_text("not json\n", encoding="utf-8")
    os.utime(older, (1_000_000, 1_000_000))
    os.utime(newer, (2_000_000, 2_000_000))
    os.utime(broken, (3_000_000, 3_000_000))
    infos = list_recordings(tmp_path)
    assert [i.path.name for i in infos] == ["c.jsonl", "b.jsonl", "a.jsonl"]
    assert infos[0].problem is not None and "not a tokrace recording" in infos[0].problem
    assert (infos[1].prompt, infos[1].tiers) == ("second", ["two", "three"])
    assert infos[1].duration == pytest.approx(0.5 + 19 / 100 * 2 - 0.19, abs=0.2)
    assert infos[2].created


def test_listing_marks_a_stopped_race_and_one_cut_short(tmp_path: Path) -> None:
    """A race the user stopped, and one whose file ends before a lane did (killed), replay only part-way:
    the listing says so. Every lane's end is found wherever it is in the file, not only near its end."""
    import os

    from tokrace.providers.recording.reader import race_state, read_header

    whole, stopped, cut = tmp_path / "whole.jsonl", tmp_path / "stopped.jsonl", tmp_path / "cut.jsonl"
    record_race(whole, [synthetic("fast", tok_s=1000), synthetic("slow", tok_s=50)])
    text = whole.read_text(encoding="utf-8").splitlines()
    ends = [i for i, line in enumerate(text) if '"kind":"done"' in line]
    assert len(ends) == 2 and ends[0] < len(text) - 5  # the fast lane ended long before the file does
    stopped.write_text("\n".join(text[:ends[1]]) + "\n" + event_line(
        1, 0, Error(t=0.3, error="stopped", message="stopped before the end")) + "\n", encoding="utf-8")
    cut.write_text("\n".join(text[:ends[1]]) + "\n", encoding="utf-8")
    for i, path in enumerate((whole, stopped, cut)):
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    states = {i.path.name: i.state for i in list_recordings(tmp_path)}
    assert states == {"whole.jsonl": "", "stopped.jsonl": "stopped", "cut.jsonl": "partial"}
    assert race_state(whole, read_header(whole)) == ""


def test_listing_a_missing_folder_is_empty(tmp_path: Path) -> None:
    assert list_recordings(tmp_path / "nothing") == []


def test_recorded_deltas_keep_their_text_exactly(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    tier = synthetic("u", tok_s=100, text="Ünïcödé “quotes” — and emoji 🚀 stay.")
    record_race(path, [tier], max_tokens=50)
    text = "".join(e.text for e in read_recording(path).lane_events(0) if isinstance(e, Delta))
    assert text == "Ünïcödé “quotes” — and emoji 🚀 stay."


def test_a_recording_is_its_header_and_each_events_line_byte_for_byte(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each event is written as ``redact(event_line(...))`` and a newline, in UTF-8, nothing else: the bytes the
    text file wrote before the recorder wrote bytes itself (non-ASCII text, tool calls, masked keys included)."""
    from tokrace.providers.model.events import ToolCall
    from tokrace.providers.model.masking import redact
    from tokrace.providers.recording import event_line

    monkeypatch.setenv("TOKRACE_REC_KEY", FAKE_KEY)
    tier = TierSpec(name="t", provider="openai", model="m", api_key_env="TOKRACE_REC_KEY")
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path, "Wie geht's? 🙂", [tier])
    events: list[tuple[int, Event]] = [
        (0, Delta(t=0.25, text="Grüße, 世界 — \"quoted\"\n", channel="content", tokens=2)),
        (0, Delta(t=1 / 3, text=f"key {FAKE_KEY} Authorization: Bearer abcdef0123456789", channel="reasoning")),
        (1, ToolCall(t=0.5, id="c1", name="grep", arguments='{"q": "ü"}')),
        (1, Error(t=0.75, error="http", message=f"bad https://x.example/?api_key={FAKE_BEARER}")),
    ]
    for lane, event in events:
        recorder(lane, event)
    recorder.close()
    raw = path.read_bytes()
    header, _, body = raw.partition(b"\n")
    secrets = [FAKE_KEY]
    expected = "".join(redact(event_line(lane, 0, event), secrets) + "\n" for lane, event in events)
    assert body == expected.encode("utf-8")
    assert json.loads(header)["prompt"] == "Wie geht's? 🙂"
    assert FAKE_KEY.encode() not in raw and FAKE_BEARER.encode() not in raw


def test_a_crash_mid_race_leaves_every_completed_line_on_disk(tmp_path: Path) -> None:
    """The process dies (no flush, no close) right after its 30th event: all 30 are in the file, whole."""
    import subprocess
    import sys

    path = tmp_path / "crash.jsonl"
    script = f"""
import os, sys
sys.path.insert(0, {str(TESTS)!r})
from conftest import race_virtually, synthetic
from tokrace.providers.recording import Recorder
tiers = [synthetic("a", tok_s=100), synthetic("b", tok_s=150)]
recorder = Recorder(__import__("pathlib").Path({str(path)!r}), "Why?", tiers)
seen = []
def crash(lane, event):
    seen.append(event)
    if len(seen) == 30:
        os._exit(3)
race_virtually(tiers, max_tokens=50, listeners=[recorder, crash])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 3, done.stderr
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 31
    rec = read_recording(path)
    assert rec.warnings == [] and sum(len(events) for events in rec.events.values()) == 30


class Trickle:
    """A file that takes a few bytes per write (as a nearly full disk may), then, when told, none."""

    def __init__(self, per_write: int) -> None:
        self.per_write = per_write
        self.data = b""

    def write(self, data: bytes) -> int:
        taken = data[: self.per_write]
        self.data += taken
        return len(taken)

    def close(self) -> None:
        pass


def test_a_short_write_goes_on_with_the_rest_of_the_line_and_a_write_taking_nothing_stops(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [synthetic()])
    trickle = Trickle(5)
    recorder._fh.close()  # type: ignore[union-attr]
    recorder._fh = trickle  # type: ignore[assignment]
    recorder(0, Delta(t=0.5, text="whole", tokens=1))
    assert trickle.data == b'{"lane":0,"run":0,"kind":"delta","t":0.5,"text":"whole","channel":"content","tokens":1}\n'
    trickle.per_write = 0
    recorder(0, Delta(t=0.6, text="lost", tokens=1))
    assert recorder.closed and recorder.problem is not None and "took none of the bytes" in recorder.problem


def test_a_buffered_recording_is_byte_for_byte_the_unbuffered_one(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The screen's recorder masks each line on its own when it writes what it kept: the same bytes as bench's
    recorder writing each event at once (keys, credential shapes, URL secrets and plain text alike)."""
    from tokrace.providers.model.events import ToolCall

    monkeypatch.setenv("TOKRACE_REC_KEY", FAKE_KEY)
    tier = TierSpec(name="t", provider="openai", model="m", api_key_env="TOKRACE_REC_KEY",
                    options={"headers": {"x-team": "teamsecretvalue42"}})
    events: list[tuple[int, Event]] = [
        (0, Delta(t=0.25, text=" plain", channel="content", tokens=1)),
        (0, Delta(t=0.5, text=f" {FAKE_KEY}", channel="content", tokens=1)),
        (1, Delta(t=0.5, text="Authorization: Bearer abcdef0123456789", channel="reasoning")),
        (0, Delta(t=0.625, text=" teamsecretvalue42", channel="content", tokens=1)),
        (1, ToolCall(t=0.75, id="c1", name="fetch", arguments='{"url": "https://h.example/?token=abc0123456"}')),
        # texts seen before (each is then made from its kept JSON): plain, a secret's, in other channels, with
        # several chunks, without a count, on another lane, and in the next run
        (0, Delta(t=1.0, text=" plain", channel="content", tokens=1)),
        (0, Delta(t=1.0625, text=" teamsecretvalue42", channel="content", tokens=1)),
        (1, Delta(t=1.125, text=" plain", channel="reasoning", tokens=2)),
        (0, Delta(t=1.1875, text=" plain", channel="content", tokens=3, chunks=3)),
        (1, Delta(t=1.2, text=" plain", channel="tool_args")),
        (0, Delta(t=1.21, text=" plain", channel="custom", tokens=1)),
        (1, Error(t=1.25, error="http", message="sk-proj-0123456789abcdefghij at the end")),
        (0, Delta(t=0.1, text=" plain", channel="content", tokens=1)),
        (1, Delta(t=0.2, text=" teamsecretvalue42", channel="content", tokens=1)),
    ]
    bodies = []
    for buffered, many in ((False, False), (True, False), (True, True), (False, True)):
        path = tmp_path / f"{buffered}-{many}.jsonl"
        recorder = Recorder(path, "Why?", [tier], buffered=buffered)
        for i, (lane, event) in enumerate(events):
            if i == len(events) - 2:
                recorder.run = 1
            if many and isinstance(event, Delta):  # as Race.emit_many hands a wake-up's deltas over
                recorder.on_deltas(lane, [event, event] if i in (5, 6, 8) else [event])
            else:
                recorder(lane, event)
            if buffered and i in (4, len(events) - 3):
                recorder.flush()
        recorder.close()
        bodies.append(path.read_bytes().partition(b"\n")[2])
    assert bodies[0] == bodies[1]
    assert bodies[2] == bodies[3] != bodies[0]
    assert FAKE_KEY.encode() not in bodies[0] and b"abc0123456" not in bodies[0] and b"[redacted]" in bodies[0]
    assert b"teamsecretvalue42" not in bodies[0] and bodies[0].count(b"\n") == len(events)
    assert b"teamsecretvalue42" not in bodies[2] and bodies[2].count(b"\n") == len(events) + 3
    assert b'"run":1,"kind":"delta","t":0.2' in bodies[0]


def test_runs_of_deltas_are_written_byte_for_byte_as_their_deltas_one_by_one(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic lane's runs (``DeltaRun``, made into lines column by column once their texts are known to hold
    nothing to mask): the same bytes as each delta written at once, with texts new and seen, one count and several,
    a secret value and a credential's shape in a text, every channel, and the next run."""
    from tokrace.providers.model.events import DeltaRun

    monkeypatch.setenv("TOKRACE_REC_KEY", FAKE_KEY)
    tier = TierSpec(name="t", provider="synthetic", model="m", api_key_env="TOKRACE_REC_KEY",
                    options={"headers": {"x-team": "teamsecretvalue42"}})
    words = [" plain", " é\u2028\"quoted\"", " other", "\n"]
    runs = [DeltaRun([0.125, 0.25], words[:2], "content", [1, 1]),
            DeltaRun([0.5, 0.625, 0.75], [words[0], words[1], words[0]], "content", [1, 1, 1]),  # all seen
            DeltaRun([1.0, 1.1, 1.2 + 1e-9, 1.3], words, "reasoning", [1, 2, 1, 3]),  # several counts
            DeltaRun([1.5, 1.6], [words[0], f" {FAKE_KEY}"], "content", [1, 1]),  # a secret value
            DeltaRun([1.7, 1.8], [words[0], f" {FAKE_KEY}"], "tool_args", [1, 1]),  # seen: masked again
            DeltaRun([1.9, 2.0], [" Authorization: Bearer abcdef0123456789", words[2]], "content", [1, 1]),
            DeltaRun([2.1, 2.2], [words[0], " teamsecretvalue42"], "content", [1, 1]),  # a header's value
            DeltaRun([2.3, 2.4], [words[0], " teamsecretvalue42"], "content", [1, 1]),  # seen: masked again
            DeltaRun([2.5, 1e7 - 0.5], [words[2], words[0]], "reasoning", [1, 1])]
    made: list[bool] = []
    run_lines = Recorder._run_lines

    def noted(recorder: Recorder, lane: int, run: int, deltas: DeltaRun) -> str | None:
        lines = run_lines(recorder, lane, run, deltas)
        made.append(lines is not None)
        return lines

    monkeypatch.setattr(Recorder, "_run_lines", noted)
    bodies = []
    for buffered, many in ((False, False), (True, True), (False, True)):
        path = tmp_path / f"{buffered}-{many}.jsonl"
        recorder = Recorder(path, "Why?", [tier], buffered=buffered)
        for i, run in enumerate(runs):
            if i == len(runs) - 1:
                recorder.run = 1
            if many:
                recorder.on_deltas(i % 2, run)
                if buffered and i == 3:
                    recorder.flush()
            else:
                for delta in run:
                    recorder(i % 2, delta)
        recorder.close()
        bodies.append(path.read_bytes().partition(b"\n")[2])
    assert made == [False, True, False, False, False, False, False, False, True] * 2  # by column where it can be
    assert bodies[0] == bodies[1] == bodies[2]
    assert bodies[0].count(b"\n") == sum(len(run) for run in runs)
    assert FAKE_KEY.encode() not in bodies[0] and b"abcdef0123456789" not in bodies[0]
    assert b"teamsecretvalue42" not in bodies[0] and bodies[0].count(b"[redacted]") == 5
    assert b'"run":1,"kind":"delta","t":9999999.5,"text":" plain","channel":"reasoning","tokens":1}\n' in bodies[0]

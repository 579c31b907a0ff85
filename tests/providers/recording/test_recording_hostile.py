"""Recordings as hostile input: wrong shapes, impossible numbers, huge lines and files end in one clear message
or a counted warning, in bounded memory and time, never a traceback or a hang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokrace.providers.model.events import Delta
from tokrace.providers.recording import FORMAT, VERSION, RecordingError, list_recordings, read_recording
from tokrace.providers.recording.reader import MAX_LINE_BYTES
from tokrace.tui.main import main

HEADER = {"format": FORMAT, "version": VERSION, "prompt": "Why?", "scenario": None,
          "tiers": [{"name": "a", "provider": "synthetic", "model": "m"}]}


def good(t: float, text: str = "x", lane: int = 0, run: int = 0) -> str:
    return json.dumps({"lane": lane, "run": run, "kind": "delta", "t": t, "text": text, "channel": "content"})


def write(path: Path, *lines: str, header: object = None) -> Path:
    path.write_text("\n".join([json.dumps(HEADER if header is None else header), *lines]) + "\n", encoding="utf-8")
    return path


def finishing(t: float) -> list[str]:
    return [json.dumps({"lane": 0, "kind": "request", "t": 0.0}), good(t, "hi"),
            json.dumps({"lane": 0, "kind": "done", "t": t})]


@pytest.mark.parametrize("bad", [
    "42", '"text"', "[1, 2]", "null",
    '{"lane": 0, "kind": "delta", "t": 0.5, "text": 5}',
    '{"lane": 0, "kind": "delta", "t": "soon", "text": "x"}',
    '{"lane": 0, "kind": "delta", "t": 0.5, "text": "x", "channel": ["content"]}',
    '{"lane": "zero", "kind": "delta", "t": 0.5, "text": "x"}',
    '{"lane": 0, "kind": "usage", "t": 0.5, "output": -3}',
    '{"lane": 0, "kind": "segment", "t": 0.5, "seg": "nap", "start": 0, "end": 1}',
    '{"lane": 0, "kind": "extra", "t": 0.5, "source": "x", "data": "not an object"}',
    '{"lane": 0, "kind": "teleport", "t": 0.5}',
])
def test_a_valid_json_line_of_the_wrong_shape_is_skipped_and_counted(tmp_path: Path, bad: str) -> None:
    path = write(tmp_path / "r.jsonl", json.dumps({"lane": 0, "kind": "request", "t": 0.0}), bad, bad,
                 good(0.6), json.dumps({"lane": 0, "kind": "done", "t": 0.7}))
    rec = read_recording(path)
    assert [e.kind for e in rec.lane_events(0)] == ["request", "delta", "done"]
    assert len(rec.warnings) == 1
    assert "skipped 2 lines that are not recorded events (first, line 3:" in rec.warnings[0]


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "1e300", "-5e9"])
def test_a_time_that_is_not_a_finite_sane_number_is_skipped(tmp_path: Path, number: str) -> None:
    bad = f'{{"lane": 0, "kind": "delta", "t": {number}, "text": "x"}}'
    path = write(tmp_path / "r.jsonl", *finishing(0.5)[:2], bad, finishing(0.5)[2])
    rec = read_recording(path)
    assert all(e.t == e.t and abs(e.t) < 1e7 for e in rec.lane_events(0))
    assert "skipped 1 line" in rec.warnings[0]


def test_a_run_or_lane_far_out_of_place_is_skipped_and_cannot_grow_memory(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", *finishing(0.5), good(0.3, run=100_000_000), good(0.3, lane=100_000_000))
    rec = read_recording(path)
    assert rec.runs == 1 and set(rec.events) == {(0, 0)}
    assert "skipped 2 lines" in rec.warnings[0] and "its run is 100000000 (expected 0 to 1)" in rec.warnings[0]


def test_replaying_a_file_with_a_nan_time_and_a_huge_run_finishes_with_one_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "r.jsonl", *finishing(0.5)[:2], '{"lane": 0, "kind": "delta", "t": NaN, "text": "x"}',
                 good(0.3, run=100_000_000), finishing(0.5)[2])
    code = main(["replay", str(path), "--headless", "--fast-forward", "--json", "-"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["tiers"][0]["runs"][0]["ok"] is True
    assert err.count("skipped 2 lines") == 1 and "Traceback" not in err


@pytest.mark.parametrize("tiers", ["a,b", ["a", "b"], [{"name": 5}], 7])
def test_a_header_whose_tiers_are_not_tier_objects_is_refused_and_listed_as_unreadable(
        tmp_path: Path, tiers: object, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.jsonl", *finishing(0.5), header={**HEADER, "tiers": tiers})
    write(tmp_path / "fine.jsonl", *finishing(0.5))
    with pytest.raises(RecordingError, match="tiers are not a list of tier objects"):
        read_recording(bad)
    infos = {i.path.name: i for i in list_recordings(tmp_path)}
    assert infos["bad.jsonl"].problem is not None and infos["fine.jsonl"].problem is None
    assert main(["recordings", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fine.jsonl" in out and "bad.jsonl" in out


def test_a_line_over_16_mb_is_refused_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(HEADER) + "\n" + good(0.1) + "\n")
        fh.write('{"lane": 0, "kind": "delta", "t": 0.2, "text": "' + "y" * (MAX_LINE_BYTES + 10) + '"}\n')
    with pytest.raises(RecordingError, match="line 3 is longer than 16 MB"):
        read_recording(path)


def test_recordings_reads_only_the_header_and_the_last_line(tmp_path: Path) -> None:
    """A 17 MB line in the middle would be refused by a whole read; the listing never touches it."""
    path = tmp_path / "long.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(HEADER) + "\n" + good(0.1) + "\n")
        fh.write('{"lane": 0, "kind": "delta", "t": 0.2, "text": "' + "y" * (MAX_LINE_BYTES + 10) + '"}\n')
        fh.write(good(42.5) + "\n")
    [info] = list_recordings(tmp_path)
    assert info.problem is None and info.duration == 42.5 and info.tiers == ["a"] and info.prompt == "Why?"


def test_recordings_takes_the_duration_from_the_last_whole_line_of_a_cut_off_file(tmp_path: Path) -> None:
    path = write(tmp_path / "cut.jsonl", good(0.1), good(3.25))
    path.write_text(path.read_text(encoding="utf-8") + '{"lane": 0, "kind": "del', encoding="utf-8")
    [info] = list_recordings(tmp_path)
    assert info.duration == 3.25


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.dictionaries(st.sampled_from(["lane", "run", "kind", "t", "text", "channel", "tokens", "seg",
                                               "start", "end", "data", "status", "message", "error"]),
                              _json_values | st.sampled_from(["delta", "usage", "segment", "error", "extra"]),
                              max_size=8),
       garbage=st.binary(max_size=40))
def test_any_line_between_good_ones_is_an_event_or_a_counted_skip(tmp_path: Path, fields: dict[str, object],
                                                                  garbage: bytes) -> None:
    path = tmp_path / "prop.jsonl"
    body = (json.dumps(HEADER) + "\n" + good(0.1) + "\n" + json.dumps(fields) + "\n").encode() + garbage.replace(
        b"\n", b" ") + b"\n" + (good(0.9) + "\n").encode()
    path.write_bytes(body)
    rec = read_recording(path)
    events = rec.lane_events(0)
    assert isinstance(events[0], Delta) and isinstance(events[-1], Delta) and events[-1].t == 0.9
    assert len(rec.warnings) <= 1



def test_a_providers_figure_that_is_not_finite_is_recorded_as_null_and_reads_back(tmp_path: Path) -> None:
    from conftest import synthetic

    from tokrace.providers.model.events import Extra
    from tokrace.providers.recording import Recorder

    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [synthetic("a")])
    recorder(0, Extra(t=0.5, source="timings", data={"predicted_per_second": float("inf"), "n": float("nan")}))
    recorder.close()
    assert "Infinity" not in (tmp_path / "r.jsonl").read_text(encoding="utf-8")
    rec = read_recording(tmp_path / "r.jsonl")
    assert rec.warnings == [] and rec.lane_events(0)[0].data == {"predicted_per_second": None, "n": None}  # type: ignore[union-attr]


def test_recordings_draws_a_header_full_of_markup_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    write(tmp_path / "[x].jsonl", *finishing(0.5), header={**HEADER, "prompt": "[/] [bold]why", "created": "[/]",
                                                           "tiers": [{"name": "[red]a[/]"}]})
    write(tmp_path / "v.jsonl", header={**HEADER, "version": "[/]"})
    assert main(["recordings", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[/] [bold]why" in out and "[red]a[/]" in out and "[x].jsonl" in out and "version '[/]'" in out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.lists(st.sampled_from([
           "Bearer ", "abcdef0123456789", "sk-", "proj-0123456789abcdefgh", "api_key=", "Authorization: ",
           "?token=", "https://u:p@h.example/x", " the", ",", "\n", "\x1b", "asic", "é", "\u0130", "ssk-abc0123",
           "\"", "\\", "gh", "=", "Σ"]), max_size=8).map("".join), min_size=1, max_size=6),
       channel=st.sampled_from(["content", "reasoning", "tool_args"]))
def test_a_recorded_delta_line_is_what_redacting_its_whole_line_gives(
        tmp_path: Path, texts: list[str], channel: str) -> None:
    """The recorder skips looking for shapes in a delta line whose text it already found free of them; the line
    is still exactly ``redact(event_line(...))``, the first time a text comes and every time after, with secret
    values looked for in the whole line."""
    from tokrace.providers.model.events import Delta
    from tokrace.providers.model.masking import redact
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.recording import Recorder, event_line

    tier = TierSpec(name="t", provider="openai", model="m", options={"headers": {"x-k": "ssk-abc0123"}})
    recorder = Recorder(tmp_path / "r.jsonl", "Why?", [tier])
    for text in [*texts, *texts]:
        event = Delta(t=0.125, text=text, channel=channel, tokens=1)  # type: ignore[arg-type]
        assert recorder._line(1, event) == redact(event_line(1, 0, event), recorder._secrets)
    recorder.close()

"""The voice lens: a speaking voice over a lane's answer, its stalls and margins, in bench and in --json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import race_virtually, synthetic

from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model.events import Delta, Done, Error, Event, Request, Segment
from tokrace.providers.voice.lens import (
    DEFAULT_TTS_DELAY_S,
    DEFAULT_WPM,
    LaneVoice,
    Playhead,
    SentenceSplitter,
    VoiceMetrics,
    VoiceSettings,
    VoiceTrack,
    conversation_verdict,
    lane_voice,
)

ONE_WORD_A_SECOND = VoiceSettings(wpm=60, tts_delay_s=0.0)
"""Round numbers for hand-checked expectations."""

SECONDS_PER_WORD = 60 / DEFAULT_WPM

SLOW_AND_FAST = """
[[tiers]]
name = "slow"
provider = "synthetic"
ttft_ms = 200
tok_s = 2

[[tiers]]
name = "fast"
provider = "synthetic"
ttft_ms = 200
tok_s = 60
"""


def track(*pieces: tuple[float, str], end: float | None = None, settings: VoiceSettings = ONE_WORD_A_SECOND,
          ok: bool = True) -> VoiceTrack:
    voice = VoiceTrack(settings)
    for t, text in pieces:
        voice.add(t, text)
    if end is not None:
        voice.end(end, ok=ok)
    return voice


# The model, checked by hand.

def test_speech_starts_when_the_first_sentence_is_complete_plus_the_tts_delay() -> None:
    voice = track((1.0, "One two."), (2.0, " Three"), end=3.0,
                  settings=VoiceSettings(wpm=60, tts_delay_s=0.5))
    m = voice.metrics()
    assert m.ttfs_s == 2.0  # the whitespace after the end mark completes the sentence
    assert m.first_audio_s == 2.5
    assert voice.at(2.4) == Playhead(0, 0.0, "waiting")
    assert voice.at(2.5).state == "speaking"


def test_the_voice_stalls_when_it_finishes_a_sentence_before_the_next_is_complete() -> None:
    voice = track((1.0, "One two. "), (5.0, "Three four. "), end=6.0)
    m = voice.metrics()
    assert (m.stalls, m.stall_s, m.min_margin_s, m.falls_behind) == (1, 2.0, 0.0, True)
    assert [s.to_json() for s in m.stall_spans] == [
        {"kind": "stall", "label": "voice", "start_s": 3.0, "end_s": 5.0}]
    assert m.speech_end_s == 7.0


def test_a_sentence_complete_but_not_yet_synthesized_is_a_stall_too() -> None:
    voice = track((0.0, "One. "), (1.2, "Two. "), end=1.2, settings=VoiceSettings(wpm=60, tts_delay_s=0.5))
    # "One." is spoken 0.5–1.5; "Two." has arrived by 1.2 but its audio is ready only at 1.7.
    assert voice.stall_spans() == [(1.5, 1.7)]


def test_min_margin_is_the_smallest_lead_of_speakable_text_over_the_voice() -> None:
    voice = track((1.0, "A b c d. "), (3.0, "E f. "), (6.0, "G. "), end=7.0,
                  settings=VoiceSettings(wpm=60, tts_delay_s=0.5))
    m = voice.metrics()
    # Speech 1.5–5.5; "E f." speakable at 3.5 (lead 2 s); 5.5–7.5; "G." speakable at 6.5 (lead 1 s); 7.5–8.5.
    assert (m.stalls, m.min_margin_s, m.speech_end_s) == (0, 1.0, 8.5)


def test_min_margin_is_none_when_the_whole_answer_was_ready_before_the_voice_began() -> None:
    assert track((1.0, "One. Two. Three."), end=1.0).metrics().min_margin_s is None


def test_the_unfinished_rest_is_the_last_sentence_when_the_turn_ends_normally() -> None:
    voice = track((1.0, "Hello there"), end=3.0)
    assert voice.metrics().ttfs_s == 3.0
    assert voice.metrics().speech_end_s == 5.0


def test_the_unfinished_rest_of_a_failed_turn_is_never_spoken() -> None:
    voice = track((0.0, "Spoken. Never"), end=3.0, ok=False)
    assert voice.metrics().speech_end_s == 1.0
    assert voice.at(10.0) == Playhead(len("Spoken."), 1.0, "done")


def test_the_playhead_moves_evenly_through_each_word_and_stops_where_the_text_runs_out() -> None:
    voice = track((0.0, "One two. "))
    assert voice.at(0.5) == Playhead(1, 0.5, "speaking")
    assert voice.at(1.0) == Playhead(3, 1.0, "speaking")  # "One" spoken; the space goes with the next word
    assert voice.at(1.5) == Playhead(6, 1.5, "speaking")
    assert voice.at(2.5) == Playhead(8, 2.0, "stalled")  # more may come
    voice.end(3.0)
    assert voice.at(2.5) == Playhead(8, 2.0, "done")


def test_a_live_rate_change_affects_only_the_speech_after_it() -> None:
    voice = track((0.0, "One two. "), end=0.0)
    voice.set_wpm(120, at=0.5)
    assert voice.at(0.5).words == 0.5
    assert voice.at(0.75).words == 1.0
    assert voice.metrics().speech_end_s == 1.25


def test_live_stall_spans_include_the_silence_still_going_on() -> None:
    voice = track((0.0, "One. "))
    assert voice.stall_spans(until=3.0) == [(1.0, 3.0)]
    assert voice.segments(until=3.0) == [Segment(t=3.0, seg="stall", start=1.0, end=3.0, label="voice")]
    voice.end(3.0)  # nothing more came: the voice had simply finished
    assert voice.stall_spans(until=3.0) == []


def test_only_the_answer_is_spoken_never_the_reasoning() -> None:
    events: list[Event] = [Request(t=0.0), Delta(t=0.5, text="Think. Think. ", channel="reasoning"),
                           Delta(t=1.0, text="Say this. "), Done(t=1.0)]
    m = lane_voice(events, ONE_WORD_A_SECOND)
    assert (m.ttfs_s, m.speech_end_s) == (1.0, 3.0)


def test_sentences_end_after_closing_quotes_and_never_inside_a_number() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed('It costs 3.5 dollars. He said "Stop') == [(0, 21)]
    assert splitter.feed('."') == []
    assert splitter.feed(" Then") == [(21, 37)]
    assert splitter.text[21:37] == ' He said "Stop."'
    assert splitter.finish() == (37, 42)
    assert splitter.finish() is None


@pytest.mark.parametrize("profile", [
    {"ttft_ms": 300, "tok_s": 40},
    {"ttft_ms": 100, "tok_s": 700, "jitter": 0.2, "seed": 3, "tokens_per_event": 3},
    {"ttft_ms": 500, "tok_s": 80, "thinking_tokens": 30},
])
def test_ttfs_is_the_same_as_the_runs_ttfs(profile: dict[str, float]) -> None:
    events = race_virtually([synthetic(**profile)], max_tokens=120)[0].events
    assert lane_voice(events).ttfs_s == turn_metrics(events).ttfs_s


def test_each_turn_of_a_lane_is_voiced_on_its_own_and_folded() -> None:
    events: list[Event] = [Request(t=0.0), Delta(t=0.5, text="Hi. "), Done(t=0.5), Request(t=10.0),
                           Delta(t=12.0, text="One. "), Delta(t=15.0, text="Two. "), Done(t=15.0)]
    voice = LaneVoice(ONE_WORD_A_SECOND)
    for e in events:
        voice.feed(e)
    m = voice.metrics()
    assert [t.first_audio_s for t in m.turns] == [0.5, 2.0]
    assert (m.ttfs_s, m.first_audio_max_s, m.stalls, m.stall_s, m.speech_end_s) == (0.5, 2.0, 1, 2.0, 16.0)
    assert voice.at(11.0) == (1, Playhead(0, 0.0, "waiting"))
    assert voice.at(1.0) == (0, Playhead(1, 0.5, "speaking"))  # half of "Hi."
    assert len(m.to_json()["turns"]) == 2


def test_a_tier_holds_a_conversation_only_when_it_starts_soon_and_never_stalls() -> None:
    quick = VoiceMetrics(wpm=165, tts_delay_s=0.2, first_audio_s=0.4, first_audio_max_s=0.4)
    late = VoiceMetrics(wpm=165, tts_delay_s=0.2, first_audio_s=1.5, first_audio_max_s=1.5)
    stalling = VoiceMetrics(wpm=165, tts_delay_s=0.2, first_audio_s=0.4, first_audio_max_s=0.4, stalls=2,
                            stall_s=3.25)
    assert conversation_verdict([quick]) == (True, "first audio 0.40\u00a0s, no stalls")
    # over two runs; a no-break space before the unit
    assert conversation_verdict([quick, late]) == (False, "slowest first audio 1.50\u00a0s")
    assert conversation_verdict([stalling]) == (False, "2 stalls, 3.2\u00a0s silent")
    assert conversation_verdict([VoiceMetrics(wpm=165, tts_delay_s=0.2)]) == (False, "never spoke")


# Done when: 2 tok/s stalls, 60 tok/s never does; bench reports it.

def test_a_2_tok_s_tier_stalls_and_a_60_tok_s_tier_never_does() -> None:
    slow, fast = race_virtually([synthetic("slow", ttft_ms=200, tok_s=2),
                                 synthetic("fast", ttft_ms=200, tok_s=60)], max_tokens=80)
    s, f = lane_voice(slow.events), lane_voice(fast.events)
    # The first sentence of the passage is 28 pieces; the 29th brings the whitespace after its full stop.
    assert s.ttfs_s == pytest.approx(0.2 + 28 / 2)
    assert f.ttfs_s == pytest.approx(0.2 + 28 / 60)
    assert f.first_audio_s == pytest.approx(0.2 + 28 / 60 + DEFAULT_TTS_DELAY_S)
    # Slow: sentences of 25 and 11 words spoken from 14.4 s; the third is complete at piece 64 (31.7 s).
    assert s.stalls == 2
    assert s.stall_spans[0].start == pytest.approx(14.4 + 36 * SECONDS_PER_WORD)
    assert s.stall_spans[0].end == pytest.approx(0.2 + 63 / 2 + DEFAULT_TTS_DELAY_S)
    assert s.stall_s == pytest.approx(4.772727, abs=1e-6)
    assert (s.min_margin_s, s.falls_behind) == (0.0, True)
    assert (f.stalls, f.stall_s, f.falls_behind) == (0, 0.0, False)
    assert f.min_margin_s == pytest.approx(8.890909, abs=1e-6)


def test_bench_voice_json_reports_the_stalls_of_each_tier(write_config: Callable[[str], Path], in_tmp: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from tokrace.tui.main import main

    config = write_config(SLOW_AND_FAST)
    code = main(["bench", "--config", str(config), "--voice", "--fast-forward", "--json", "-", "--no-record",
                 "--max-tokens", "80"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    slow, fast = ({k: v for k, v in t["runs"][0]["voice"].items() if k != "segments"} for t in out["tiers"])
    assert slow == {"wpm": DEFAULT_WPM, "tts_delay_s": DEFAULT_TTS_DELAY_S, "ttfs_s": 14.2,
                    "first_audio_s": 14.4, "first_audio_max_s": 14.4, "stalls": 2, "stall_s": 4.772727,
                    "min_margin_s": 0.0, "falls_behind": True, "speech_end_s": 45.354545}
    assert (fast["stalls"], fast["falls_behind"], fast["first_audio_s"]) == (0, False, 0.866667)
    assert [t["voice"]["holds_conversation"] for t in out["tiers"]] == [False, True]


def test_bench_voice_prints_a_voice_table_and_who_could_hold_a_conversation(
        write_config: Callable[[str], Path], in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tokrace.tui.main import main

    config = write_config(SLOW_AND_FAST)
    assert main(["bench", "--config", str(config), "--fast-forward", "--no-record", "--max-tokens", "80",
                 "--wpm", "150", "--tts-delay", "100"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "voice at 150 wpm, TTS delay 100 ms" in out
    assert ("could hold a conversation without a gap (first audio within 1 s and never silent mid-answer): "
            "fast; not: slow (first audio 14.30 s, ") in out


def test_bench_without_voice_has_no_voice_object(write_config: Callable[[str], Path], in_tmp: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tokrace.tui.main import main

    config = write_config(SLOW_AND_FAST)
    assert main(["bench", "--config", str(config), "--fast-forward", "--json", "-", "--no-record",
                 "--max-tokens", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "voice" not in out["tiers"][0]["runs"][0]
    assert "voice" not in out["tiers"][0]


def test_in_the_built_in_voice_chat_latency_not_throughput_decides() -> None:
    import asyncio

    from tokrace.providers.config.demo import demo_tiers
    from tokrace.providers.loop.scenario_file import load_scenario
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.runs.session import run_session

    scenario = load_scenario("voice-chat")
    result = asyncio.run(run_session(demo_tiers(), TurnRequest(scenario.first_prompt()), fast_forward=True,
                                     scenario=scenario))
    voices = [lane[0] for lane in result.voice(VoiceSettings())]
    assert [len(v.turns) for v in voices] == [5, 5, 5]
    assert [v.stalls for v in voices] == [0, 0, 0]  # short answers never run dry, even at 54 tok/s
    assert [conversation_verdict([v]) for v in voices] == [
        (False, "slowest first audio 1.78\u00a0s"), (False, "slowest first audio 1.09\u00a0s"),
        (True, "slowest first audio 0.42\u00a0s, no stalls")]


# Hearing it: --speak.

def fake_tts(tmp_path: Path, exit_code: int = 0) -> tuple[str, Path]:
    """A text-to-speech command that appends what it is told to a file (and can fail on purpose)."""
    import shlex
    import sys

    heard = tmp_path / "heard.txt"
    script = tmp_path / "tts.py"
    script.write_text("import sys\n"
                      f"open({str(heard)!r}, 'a', encoding='utf-8').write(sys.stdin.read())\n"
                      f"sys.stderr.write('no audio device\\n'); sys.exit({exit_code})\n", encoding="utf-8")
    return shlex.join([sys.executable, str(script)]), heard


def test_speak_pipes_each_completed_sentence_of_the_chosen_lane_to_the_command(
        write_config: Callable[[str], Path], in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tokrace.tui.main import main

    command, heard = fake_tts(in_tmp)
    config = write_config("""
[[tiers]]
name = "first"
provider = "synthetic"
text = "Not this lane."

[[tiers]]
name = "Second"
provider = "synthetic"
tok_s = 500
text = "Hello there. How are you?\\nFine"
""")
    assert main(["bench", "--config", str(config), "--fast-forward", "--no-record", "--speak", command,
                 "--speak-lane", "second"]) == 0
    assert heard.read_text(encoding="utf-8").splitlines() == ["Hello there.", "How are you?", "Fine"]
    assert "warning" not in capsys.readouterr().err


def test_a_failing_tts_command_is_one_warning_not_a_crash(write_config: Callable[[str], Path], in_tmp: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from tokrace.tui.main import main

    command, heard = fake_tts(in_tmp, exit_code=3)
    config = write_config('[[tiers]]\nname = "only"\nprovider = "synthetic"\ntext = "One. Two."\n')
    assert main(["bench", "--config", str(config), "--fast-forward", "--no-record", "--speak", command]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "exited with status 3: no audio device" in err
    assert err.count("warning") == 1
    assert heard.read_text(encoding="utf-8").splitlines() == ["One.", "Two."]


def test_a_missing_tts_command_is_a_clear_message_before_the_race(in_tmp: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tokrace.tui.main import main

    assert main(["bench", "--fast-forward", "--speak", "no-such-tts-program --rate 160"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing raced
    assert captured.err == ("tokrace: --speak: no command 'no-such-tts-program' found; install a "
                            "text-to-speech program (espeak-ng, say, piper) or name one that is installed\n")
    assert not list(in_tmp.iterdir())


def test_speak_lane_must_name_a_tier_of_the_race(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from tokrace.tui.main import main

    assert main(["bench", "--fast-forward", "--speak", sys.executable, "--speak-lane", "nope"]) == 2
    assert "--speak-lane: no tier named 'nope' in this race (tiers: Sol standard" in capsys.readouterr().err


def test_voice_settings_refuse_a_rate_of_zero() -> None:
    with pytest.raises(ValueError, match="above 0 words per minute"):
        VoiceSettings(wpm=0)
    with pytest.raises(ValueError, match="0 or more"):
        VoiceSettings(tts_delay_s=-0.1)


def test_an_error_before_any_sentence_means_the_voice_never_spoke() -> None:
    m = lane_voice([Request(t=0.0), Delta(t=1.0, text="Half a"), Error(t=2.0, error="x", message="boom")])
    assert (m.ttfs_s, m.first_audio_s, m.stalls, m.to_json()["falls_behind"]) == (None, None, 0, False)

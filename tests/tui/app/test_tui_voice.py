"""The voice lens on the race screen: the key, the speaking rate, the voice's states and numbers in each lane, its
silences on the timeline, the verdict at the end, speaking a lane aloud, and the command line's voice options."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.style import Style
from textual.widgets import Static
from tui_harness import at, demo_app, factory, record_demo, scripted, text_of

from tokrace.providers.metrics.turn import SENTENCE_END, SegmentSpan
from tokrace.providers.model.events import Delta, Done, Event, Request
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.timing.clock import VirtualClock
from tokrace.providers.voice.lens import SentenceSplitter, VoiceSettings, lane_voice
from tokrace.providers.voice.live import WPM_MAX, WPM_MIN, WPM_STEP, LiveVoice
from tokrace.providers.voice.speak import Speaker
from tokrace.tui import main as cli
from tokrace.tui.app import launch
from tokrace.tui.app.app import TokraceApp, build_app
from tokrace.tui.app.screens.help import HelpScreen
from tokrace.tui.app.screens.race import RaceScreen
from tokrace.tui.app.widgets.lane import LaneView
from tokrace.tui.app.widgets.palette import palette
from tokrace.tui.app.widgets.timeline import LABEL_WIDTH, Timeline
from tokrace.tui.app.widgets.voice import VoiceText, wrap_spans

ONE_WORD_A_SECOND = VoiceSettings(wpm=60, tts_delay_s=0.0)
"""Round numbers for hand-checked expectations."""

ANSWER = "One two. Three four. "

STALL_SCRIPT: list[Event] = [
    Request(t=0.0),
    Delta(t=1.0, text="One two. ", tokens=3),
    Delta(t=5.0, text="Three four. ", tokens=3),
    Done(t=6.0),
]
"""At one word a second with no TTS delay: waits until 1 s, speaks 1-3 s, falls silent 3-5 s (the second sentence
comes at 5 s), speaks 5-7 s, then has said everything."""


def voice_app(tiers: Sequence[TierSpec], settings: VoiceSettings | None = ONE_WORD_A_SECOND,
              speaker: Speaker | None = None, max_tokens: int = 40) -> tuple[TokraceApp, VirtualClock]:
    """The app on a virtual clock with the voice lens on from the start (as ``--voice``), unless ``settings`` is
    ``None``."""
    clock = VirtualClock()
    app = build_app(list(tiers), TurnRequest("Why?", max_tokens), clock_factory=lambda: clock,
                    provider_factory=factory, animate=False, freeze_gc=False, voice=settings, speaker=speaker)
    return app, clock


def stalling() -> list[TierSpec]:
    return [scripted("stalls", STALL_SCRIPT), scripted("other", [Request(t=0.0), Done(t=0.5)])]


def lane_view(app: TokraceApp, index: int = 0) -> LaneView:
    return app.screen.query_one(f"#lane-{index}", LaneView)


def voice_bar(app: TokraceApp, index: int = 0) -> str:
    """The voice bar's text, its no-break spaces (a number is never split from its unit) read as spaces."""
    return str(lane_view(app, index).voice.bar.shown).replace("\u00a0", " ")


def screen(app: TokraceApp) -> RaceScreen:
    assert isinstance(app.screen, RaceScreen)
    return app.screen


def synthetic_tier(name: str, tok_s: float) -> TierSpec:
    return TierSpec(name=name, provider="synthetic", model="m", options={"ttft_ms": 200, "tok_s": tok_s})


# The key and the lanes.

async def test_v_turns_the_voice_lens_on_in_every_lane_and_off_again() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 2.0)
        views = [lane_view(app, i) for i in range(3)]
        assert not any(view.voice.display for view in views)
        await pilot.press("v")
        assert all(view.voice.display and not view.tail.display and not view.final.display for view in views)
        assert screen(app).query_one("#voice-line", Static).display
        assert "165 wpm" in text_of(screen(app).query_one("#voice-line", Static))
        await pilot.press("v")
        assert not any(view.voice.display for view in views)
        ultrafast = views[2]  # finished at 0.71 s: its final answer comes back, the others' tails
        assert ultrafast.final.display and not ultrafast.tail.display
        assert views[0].tail.display and not views[0].final.display


async def test_the_voice_goes_from_waiting_to_speaking_to_silent_to_spoken() -> None:
    app, clock = voice_app(stalling())
    async with app.run_test(size=(160, 45)) as pilot:
        seen = []
        for t in (0.5, 2.0, 4.0, 6.0, 8.0):
            await at(pilot, clock, t)
            seen.append(voice_bar(app).split(" · ")[0].strip())
        assert seen == ["waiting to speak", "speaking", "silent", "speaking", "spoken"]


async def test_a_silence_is_counted_in_the_lane_and_drawn_on_the_timeline_in_the_stall_colour() -> None:
    app, clock = voice_app(stalling())
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 4.0)
        assert "1 stall · 1.0 s silent" in voice_bar(app)  # the silence going on counts
        await at(pilot, clock, 8.0)
        bar = voice_bar(app)
        assert "1 stall · 2.0 s silent" in bar and "1st audio 1.00 s" in bar and "margin 0.00 s" in bar
        assert screen(app)._voice_stalls(0, 8.0) == [SegmentSpan("stall", 3.0, 5.0, "voice")]
        timeline = screen(app).query_one(Timeline)
        stall = palette(app).segment("stall").color
        row = list(timeline.render_line(0))
        cells = [seg for seg in row if seg.style is not None and seg.style.color == stall]
        assert cells and "█" in cells[0].text
        start = sum(len(seg.text) for seg in row[:row.index(cells[0])]) - LABEL_WIDTH
        span = timeline.span
        cells_per_s = (timeline.size.width - LABEL_WIDTH) / span
        assert start == int(3.0 * cells_per_s)  # where the voice fell silent


async def test_the_timeline_shows_no_stall_when_the_voice_lens_is_off() -> None:
    app, clock = voice_app(stalling(), settings=None)
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 8.0)
        assert screen(app)._voice_stalls(0, 8.0) == []
        await pilot.press("v")
        assert len(screen(app)._voice_stalls(0, 8.0)) == 1


async def test_spoken_text_is_underlined_in_the_lane_colour_and_the_playhead_is_a_reversed_cell() -> None:
    app, clock = voice_app(stalling())
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 2.5)  # 1.5 words said: "One" and half of "two." (the playhead on its "o")
        text = lane_view(app).voice.query_one(VoiceText)
        runs = [(seg.text, seg.style or Style()) for seg in text.render_line(0) if seg.text.strip()]
        assert runs[0][0] == "One tw" and runs[0][1].underline
        assert runs[1][0] == "o" and runs[1][1].reverse
        assert runs[2][0] == "." and not runs[2][1].underline


async def test_text_of_an_unfinished_sentence_is_dim_until_it_can_be_spoken() -> None:
    script: list[Event] = [Request(t=0.0), Delta(t=1.0, text="Hello there. And then", tokens=4), Done(t=9.0)]
    app, clock = voice_app([scripted("a", script), scripted("b", [Request(t=0.0), Done(t=0.5)])])
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.5)
        text = lane_view(app).voice.query_one(VoiceText)
        dim = [seg.text for seg in text.render_line(0) if seg.style is not None and seg.style.dim]
        assert "".join(dim).strip() == "And then"


async def test_turning_the_lens_on_after_the_race_gives_the_numbers_it_would_have_had_all_along() -> None:
    late, clock = voice_app(stalling(), settings=None)
    async with late.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 8.0)
        await pilot.press("v")
        after = voice_bar(late)
    early, clock = voice_app(stalling(), settings=VoiceSettings())
    async with early.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 8.0)
        assert voice_bar(early) == after


async def test_the_playhead_follows_the_speech_and_keeps_its_line_in_view() -> None:
    words = " ".join(f"w{i}." for i in range(400)) + " "
    script: list[Event] = [Request(t=0.0), Delta(t=0.1, text=words, tokens=400), Done(t=0.2)]
    app, clock = voice_app([scripted("long", script), scripted("b", [Request(t=0.0), Done(t=0.5)])])
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.0)
        text = lane_view(app).voice.query_one(VoiceText)
        assert text.top() == 0
        await at(pilot, clock, 200.0)  # 200 words said of 400: far below the first screenful
        top = text.top()
        assert top > 0
        shown = [text.render_line(y) for y in range(text.size.height)]
        assert any(seg.style is not None and seg.style.reverse for strip in shown for seg in strip)


# The speaking rate.

async def test_square_brackets_change_the_speaking_rate_by_15_wpm() -> None:
    app, clock = voice_app(stalling(), settings=VoiceSettings(wpm=150))
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.5)
        await pilot.press("right_square_bracket")
        assert "165 wpm" in voice_bar(app)
        assert "165 wpm" in text_of(screen(app).query_one("#voice-line", Static))
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert "135 wpm" in voice_bar(app) and screen(app).voice.wpm == 135


def test_the_speaking_rate_stays_within_its_bounds() -> None:
    voice = LiveVoice(VoiceSettings(wpm=WPM_MIN + 5))
    assert voice.change_wpm(-WPM_STEP, 0.0) == WPM_MIN and voice.change_wpm(-WPM_STEP, 0.0) == WPM_MIN
    voice = LiveVoice(VoiceSettings(wpm=WPM_MAX - 5))
    assert voice.change_wpm(WPM_STEP, 0.0) == WPM_MAX and voice.change_wpm(WPM_STEP, 0.0) == WPM_MAX


async def test_a_faster_rate_moves_the_playhead_faster_from_the_moment_it_changed() -> None:
    app, clock = voice_app(stalling())
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.5)
        await pilot.press("right_square_bracket")  # 60 → 75 wpm at 1.5 s
        await at(pilot, clock, 2.6)
        # 0.5 words at 60 wpm, then 1.1 s at 75: 1.875 words, into the last character of "two."
        shown = lane_view(app).voice.query_one(VoiceText).voice
        assert shown is not None and shown.spoken == ANSWER.index("two.") + 3
        # The first sentence ends at 2.7 s instead of 3: the silence begins sooner.
        await at(pilot, clock, 8.0)
        [stall] = screen(app)._voice_stalls(0, 8.0)
        assert (stall.start, stall.end) == (pytest.approx(2.7), 5.0)


async def test_the_rate_keys_do_nothing_and_are_not_in_the_footer_while_the_lens_is_off() -> None:
    app, clock = voice_app(stalling(), settings=None)
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.5)
        await pilot.press("right_square_bracket")
        assert screen(app).voice.wpm == 165
        assert screen(app).check_action("voice_faster", ()) is False
        await pilot.press("v")
        assert screen(app).check_action("voice_faster", ()) is True


async def test_help_and_the_command_palette_name_the_voice_keys() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 1.0)
        keys = dict(screen(app).key_help())
        assert "voice lens" in keys["v"] and "15 words per minute" in keys["[ ]"]
        titles = [title for title, _, _ in screen(app).commands()]
        assert "Voice lens on or off" in titles and "Speak faster" not in titles
        await pilot.press("v")
        assert "Speak faster" in [title for title, _, _ in screen(app).commands()]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)


# Slow and fast tiers, and the verdict.

async def test_a_2_tok_s_tier_stalls_and_a_60_tok_s_tier_does_not_as_the_engine_counts() -> None:
    settings = VoiceSettings()
    app, clock = voice_app([synthetic_tier("slow", 2), synthetic_tier("fast", 60)], settings, max_tokens=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 60.0)
        race = app.runner.race
        assert race is not None and app.runner.live.finished
        voices = screen(app).voice.lanes
        engine = [lane_voice(lane.events, settings) for lane in race.lanes]
        assert [v.metrics().stalls for v in voices] == [m.stalls for m in engine]
        assert engine[0].stalls > 0 and engine[1].stalls == 0
        assert f"{engine[0].stalls} stall" in voice_bar(app, 0) and "0 stalls" in voice_bar(app, 1)
        verdict = text_of(screen(app).query_one("#voice-line", Static)).replace("\u00a0", " ")
        assert "could hold a conversation without a gap" in verdict
        # a late first audio is not a gap mid-answer: "not", with the reason, as bench says it (issue 26 row 11)
        assert "): fast · not: slow (first audio" in verdict and "stall" in verdict.split("not:")[1]
        assert "gaps:" not in verdict and "at 165 wpm" in verdict


async def test_the_verdict_names_the_rates_spoken_during_the_race_not_one_set_after() -> None:
    app, clock = voice_app([synthetic_tier("fast", 60)], VoiceSettings(), max_tokens=30)
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 0.2)
        await pilot.press("right_square_bracket")  # 180 wpm during the race
        await at(pilot, clock, 60.0)
        assert app.runner.live.finished
        for _ in range(12):
            screen(app).voice.change_wpm(-15, 61.0)  # after the race: spoke nothing at these rates
        screen(app)._verdict_for = None
        await at(pilot, clock, 62.0)
        verdict = text_of(screen(app).query_one("#voice-line", Static)).replace("\u00a0", " ")
        assert "at 165 then 180 wpm" in verdict and "60 wpm" not in verdict


async def test_the_voice_lens_works_on_a_replay(tmp_path: Path) -> None:
    from tui_harness import replay_app

    app, base, _control = replay_app(await record_demo(tmp_path / "demo.jsonl"))
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await base.advance_to(1.0)
        await pilot.press("v")
        assert "speaking" in voice_bar(app, 2)  # ultrafast has a sentence out by then


# Speaking aloud.

async def test_speak_pipes_the_sentences_of_the_chosen_lane_and_marks_it(tmp_path: Path) -> None:
    heard = tmp_path / "heard.txt"
    speaker = Speaker(["sh", "-c", f"cat >> '{heard}'"], lane=0)
    app, clock = voice_app(stalling(), speaker=speaker)
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 2.0)
        assert "spoken aloud: stalls" in text_of(screen(app).query_one("#voice-line", Static))
        assert "♪ aloud" in voice_bar(app, 0) and "♪ aloud" not in voice_bar(app, 1)
        await at(pilot, clock, 8.0)
        await speaker.drain()
        assert heard.read_text() == "One two.\nThree four.\n"


async def test_a_speak_command_that_fails_is_one_notification_and_the_race_goes_on(tmp_path: Path) -> None:
    speaker = Speaker([str(tmp_path / "no-such-tts")], lane=0)
    app, clock = voice_app(stalling(), speaker=speaker)
    async with app.run_test(size=(160, 45)) as pilot:
        await at(pilot, clock, 2.0)
        await speaker.drain()
        await at(pilot, clock, 8.0)
        notes = [(n.title, n.message) for n in app._notifications]
        assert len(notes) == 1 and notes[0][0] == "cannot speak aloud" and "could not start" in notes[0][1]
        assert app.runner.live.finished


# Feeding the voice: linear in the text, whatever the pieces.

def test_sentences_fed_in_any_pieces_are_cut_as_in_the_whole_text() -> None:
    text = 'It costs 3.5 dollars. He said "Stop." Then… nothing!? (Really.) Yes.\n\nA new paragraph. And the rest'
    expected, cut = [], 0
    for m in SENTENCE_END.finditer(text):
        expected.append((cut, m.end(), text[cut:m.end()]))
        cut = m.end()
    rng = random.Random(7)
    for _ in range(50):
        splitter, got, i = SentenceSplitter(), [], 0
        while i < len(text):
            n = rng.randint(1, 6)
            got += splitter.feed_sentences(text[i:i + n])
            i += n
        assert got == expected and splitter.text == text
        assert splitter.finish_sentence() == (cut, len(text), " And the rest")


# Wrapping.

def test_wrapping_a_grown_text_from_its_last_lines_gives_the_same_lines_as_wrapping_it_whole() -> None:
    text = "The quick brown fox jumps over the lazy dog.\nA  supercalifragilisticexpialidocious word. " * 3
    for width in (7, 12, 30):
        done: list[tuple[int, int]] = []
        for end in [*range(0, len(text), 5), len(text)]:
            done = wrap_spans(text[:end], width, done)
        assert done == wrap_spans(text, width)
        assert all(len(text[a:b]) <= width for a, b in done)


# The command line.

@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def keep(name: str) -> Callable[..., int]:
        def call(*args: Any, **kwargs: Any) -> int:
            seen[name] = (args, kwargs)
            return 0
        return call

    monkeypatch.setattr(launch, "run_race", keep("race"))
    monkeypatch.setattr(launch, "run_replay", keep("replay"))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    return seen


def test_demo_takes_the_voice_options_as_bench_does(calls: dict[str, Any], in_tmp: Path) -> None:
    assert cli.main(["demo", "--voice", "--wpm", "200", "--tts-delay", "300", "--no-record"]) == 0
    _, kwargs = calls["race"]
    assert kwargs["voice"] == VoiceSettings(wpm=200, tts_delay_s=0.3) and kwargs["speaker"] is None


def test_no_command_takes_speak_and_speak_lane(calls: dict[str, Any], in_tmp: Path) -> None:
    assert cli.main(["--speak", "sh -c 'cat > /dev/null'", "--speak-lane", "sol ultrafast", "--no-record"]) == 0
    _, kwargs = calls["race"]
    speaker = kwargs["speaker"]
    assert isinstance(speaker, Speaker) and speaker.lane == 2 and kwargs["voice"] is None


async def test_replay_takes_the_voice_options_on_screen(calls: dict[str, Any], tmp_path: Path) -> None:
    path = await record_demo(tmp_path / "demo.jsonl")
    assert cli.main(["replay", str(path), "--wpm", "180"]) == 0
    _, kwargs = calls["replay"]
    assert kwargs["voice"] == VoiceSettings(wpm=180)


def test_a_missing_speak_command_is_one_line_before_the_screen_opens(calls: dict[str, Any], in_tmp: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--speak", "no-such-tts-program", "--no-record"]) == 2
    err = capsys.readouterr().err
    assert "no command 'no-such-tts-program' found" in err and err.count("\n") == 1
    assert "race" not in calls


async def test_a_loop_has_one_first_audio_and_the_lane_labels_a_turns_own() -> None:
    # Reported: voice-chat with --voice: the lane read "1st audio 0.97 s" (the last turn's), the verdict
    # "first audio 1.09 s" (the slowest turn's).
    import re

    from tokrace.providers.config.demo import demo_tiers
    from tokrace.providers.loop.scenario_file import load_scenario

    settings = VoiceSettings()
    clock = VirtualClock()
    loop = load_scenario("voice-chat")
    app = build_app(demo_tiers(), TurnRequest(loop.first_prompt(), 400), clock_factory=lambda: clock,
                    provider_factory=factory, animate=False, freeze_gc=False, voice=settings, scenario=loop)
    async with app.run_test(size=(200, 45)) as pilot:
        await at(pilot, clock, 600.0)
        race = app.runner.race
        assert race is not None and app.runner.live.finished
        verdict = text_of(screen(app).query_one("#voice-line", Static)).replace("\u00a0", " ")
        assert "first audio" in verdict
        for index, run in enumerate(race.lanes):
            m = lane_voice(run.events, settings)
            turns = len(m.turns)
            assert turns > 1
            bar = voice_bar(app, index)
            last = m.turns[-1].first_audio_s
            assert f"turn {turns} 1st audio {last:.2f} s" in bar
            assert f"slowest 1st audio {m.first_audio_max_s:.2f} s" in bar
            assert not re.search(r"(?<!slowest )(?<!turn \d )1st audio", bar)  # every figure says which it is
        named = re.findall(r"first audio (\d+\.\d\d)\s+s", verdict)  # a no-break space before the unit
        assert named and all(re.search(rf"slowest first audio {n}\s+s", verdict) for n in named)


def test_the_voice_bar_never_splits_a_number_from_its_unit() -> None:
    """A wrapped bar ended a line with "1.78" and began the next with "s": every figure's unit is glued."""
    from tokrace.tui.app.widgets.voice import seconds

    assert seconds(1.78) == "1.78\u00a0s" and seconds(None) == "—"


def test_the_verdict_line_never_ends_a_line_between_a_number_and_its_unit() -> None:
    """Rich breaks at any whitespace, a no-break space too: at 80 columns the verdict read "first audio 1.78" on
    one line and "s" on the next. It is wrapped at ordinary spaces only."""
    import re
    from itertools import pairwise

    from rich.console import Console

    from tokrace.tui.app.widgets.voice import verdict_line

    line = verdict_line(["Sol standard", "Sol priority", "Sol ultrafast"],
                        [(False, "first audio 1.78\u00a0s"), (False, "first audio 1.06\u00a0s"), (True, "")], [165.0])
    for width in range(30, 121):
        console = Console(width=width, color_system=None)
        with console.capture() as captured:
            console.print(line)
        rows = captured.get().splitlines()
        assert all(len(row.rstrip()) <= width for row in rows)
        for row, after in pairwise(rows):
            assert not (re.search(r"\d$", row.rstrip()) and re.match(r"(s|wpm)\b", after)), (width, row, after)
        assert "1.78\u00a0s" in captured.get().replace("\n", " ")

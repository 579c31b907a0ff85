"""The runner behind the screen: races on a clock, lanes that cannot start, stopping, counting without usage."""

from __future__ import annotations

from pathlib import Path

from tui_harness import factory, record_demo, scripted

from tokrace.providers.adapters import Provider
from tokrace.providers.adapters.replay import ReplayProvider, replay_tiers
from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.events import Delta, Done, Request
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.model.tokens import encoding_name_for
from tokrace.providers.recording import read_recording
from tokrace.providers.runs.runner import RaceRunner, expected_turns
from tokrace.providers.timing.clock import VirtualClock


class FailsToPrepare(Provider):
    name = "fails"

    async def prepare(self, warm: bool = False) -> None:
        raise TokraceError("OPENAI_API_KEY is not set")

    async def stream(self, request: TurnRequest, clock: object):  # type: ignore[override]
        raise AssertionError("never streamed")
        yield


def runner_on(tiers: list[TierSpec], clock: VirtualClock) -> RaceRunner:
    def make(tier: TierSpec) -> Provider:
        return FailsToPrepare(tier) if tier.provider == "fails" else factory(tier)

    return RaceRunner(tiers, TurnRequest("Why?", 30), lambda: clock, make)


async def test_a_lane_that_cannot_prepare_fails_with_the_reason_and_the_others_race() -> None:
    clock = VirtualClock()
    runner = runner_on([TierSpec(name="live", provider="fails"), *demo_tiers()[2:]], clock)
    runner.start()
    await clock.drive(runner.wait_finished())
    broken, fine = runner.live.lanes
    assert (broken.state, broken.error) == ("error", "OPENAI_API_KEY is not set")
    assert fine.state == "done" and runner.problem is None and runner.live.finished


async def test_stop_while_preparing_never_starts_the_race() -> None:
    clock = VirtualClock()
    runner = runner_on(demo_tiers(), clock)
    runner.start()
    await runner.stop()
    assert runner.race is None and not runner.running


async def test_restart_races_again_with_a_new_prompt() -> None:
    clock = VirtualClock()
    runner = runner_on(demo_tiers()[2:], clock)
    runner.start()
    await clock.drive(runner.wait_finished())
    first = runner.live
    await runner.restart("Why not?")
    await clock.drive(runner.wait_finished())
    assert runner.live is not first and runner.request.prompt == "Why not?" and runner.races == 2


async def test_text_without_counts_is_counted_by_the_tokenizer_loaded_off_the_loop() -> None:
    clock = VirtualClock()
    events = [Request(t=0.0), *(Delta(t=0.1 * (i + 1), text=" token") for i in range(20)), Done(t=2.1)]
    runner = runner_on([scripted("plain", events, model="gpt-5.6-sol")], clock)
    runner.start()
    await clock.drive(runner.wait_finished())
    await runner.settle()
    lane = runner.live.lanes[0]
    assert (lane.tokens, lane.tokens_source, lane.encoding) == (20, "tokenizer", encoding_name_for("gpt-5.6-sol"))


async def test_a_replay_lane_is_finished_after_its_recorded_turns(tmp_path: Path) -> None:
    recording = read_recording(await record_demo(tmp_path / "demo.jsonl"))
    provider = ReplayProvider(replay_tiers(recording)[0])
    await provider.prepare()
    assert expected_turns(provider) == 1
    assert expected_turns(factory(demo_tiers()[0])) == 1
    assert expected_turns(factory(scripted("s", []))) is None

"""The scenario driver on the virtual clock: scripted and deciding models, tools, people, waits, limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from conftest import synthetic

from tokrace.providers.adapters import Provider
from tokrace.providers.adapters.synthetic import SyntheticProvider
from tokrace.providers.loop.scenario import Scenario
from tokrace.providers.loop.scenario_file import parse_scenario
from tokrace.providers.metrics.loop import loop_metrics
from tokrace.providers.model.events import (
    Delta,
    Done,
    Error,
    Event,
    Extra,
    Headers,
    Request,
    Segment,
    ToolCall,
    Usage,
    is_loop_end,
)
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import LaneRun, Race
from tokrace.providers.timing.clock import Clock, VirtualClock

TOOLS = """\
[[tools]]
name = "run_tests"
latency_s = 2.0
result = ["1 failed", "all passed"]

[[tools]]
name = "read_file"
latency_s = 0.5
result = "def f(): ..."
"""


def scenario(text: str, header: str = 'name = "t"\n') -> Scenario:
    return parse_scenario(header + TOOLS + text, Path("t.toml"))


class Decider(Provider):
    """A live-like model: it calls ``run_tests`` until it has read ``calls`` tool results since the last user
    words, then answers. It keeps every request it was sent."""

    name = "decider"

    def __init__(self, calls: int = 1, tool: str = "run_tests", ttft: float = 0.5) -> None:
        super().__init__(TierSpec(name="decider", provider="decider", model="m"))
        self.calls, self.tool, self.ttft = calls, tool, ttft
        self.requests: list[TurnRequest] = []

    async def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        self.requests.append(request)
        start = clock.now()
        yield Request(t=start, turn=request.turn, model="m")
        yield Headers(t=await clock.sleep_until(start + 0.05))
        history = request.conversation()
        last_user = max(i for i, m in enumerate(history) if m.role == "user")
        read = sum(1 for m in history[last_user:] if m.role == "tool")
        t = await clock.sleep_until(start + self.ttft)
        if read < self.calls:
            args = json.dumps({"path": "tests"})
            yield Delta(t=t, text=args, channel="tool_args")
            yield ToolCall(t=t, id=f"live-{request.turn}", name=self.tool, arguments=args)
            yield Done(t=t, finish_reason="tool_calls")
            return
        yield Delta(t=t, text="All green.")
        yield Usage(t=t, output=3)
        yield Done(t=t)


def run(tiers: Sequence[TierSpec], sc: Scenario, providers: Sequence[Provider] | None = None) -> list[LaneRun]:
    async def go() -> list[LaneRun]:
        clock = VirtualClock()
        race = Race(tiers, TurnRequest(prompt="", max_tokens=40), clock, providers=providers, scenario=sc)
        return await clock.drive(race.run())

    return asyncio.run(go())


def decide(sc: Scenario, model: Decider) -> LaneRun:
    return run([model.tier], sc, [model])[0]


def segments(events: Sequence[Event], kind: str | None = None) -> list[Segment]:
    return [e for e in events if isinstance(e, Segment) and (kind is None or e.seg == kind)]


FIX = """
[[steps]]
kind = "model"
prompt = "Fix it."
calls = [{ tool = "run_tests", arguments = { path = "tests" } }]

[[steps]]
kind = "model"
max_tokens = 12
"""


async def test_a_scripted_turn_streams_the_call_arguments_then_the_call_and_ends_with_tool_calls() -> None:
    provider = SyntheticProvider(synthetic(ttft_ms=100, tok_s=100, jitter=0))
    call = {"id": "c1", "name": "run_tests", "arguments": '{"path": "tests/test_checkout.py"}'}
    clock = VirtualClock()
    events = await clock.drive(_collect(provider.stream(TurnRequest("x", scripted_tool_calls=[call]), clock)))
    args = [e for e in events if isinstance(e, Delta)]
    assert {d.channel for d in args} == {"tool_args"}
    assert "".join(d.text for d in args) == call["arguments"]
    tool_call = next(e for e in events if isinstance(e, ToolCall))
    assert (tool_call.id, tool_call.name, tool_call.arguments) == ("c1", "run_tests", call["arguments"])
    assert tool_call.t == args[-1].t
    assert [e.kind for e in events[-3:]] == ["tool_call", "usage", "done"]
    done = events[-1]
    assert isinstance(done, Done) and done.finish_reason == "tool_calls"


async def test_two_scripted_calls_each_end_when_their_own_arguments_have_streamed() -> None:
    provider = SyntheticProvider(synthetic(ttft_ms=100, tok_s=10, jitter=0))
    calls = [{"id": "a", "name": "read_file", "arguments": '{"path": "a.py"}'},
             {"id": "b", "name": "read_file", "arguments": "{}"}]
    clock = VirtualClock()
    events = await clock.drive(_collect(provider.stream(TurnRequest("x", scripted_tool_calls=calls), clock)))
    order = [e.id if isinstance(e, ToolCall) else e.text for e in events if isinstance(e, ToolCall | Delta)]
    assert order[-3:] == ["a", "{}", "b"]


async def _collect(stream: AsyncIterator[Event]) -> list[Event]:
    return [e async for e in stream]


def test_a_scripted_loop_runs_model_then_tool_then_model_back_to_back_on_the_lanes_clock() -> None:
    lane = run([synthetic("s", ttft_ms=200, tok_s=100, jitter=0)], scenario(FIX))[0]
    kinds = [e.kind for e in lane.events]
    assert kinds[0] == "request" and kinds.count("request") == 2
    done, seg = (next(e for e in lane.events if isinstance(e, Done)),
                 next(e for e in lane.events if isinstance(e, Segment)))
    second = [e for e in lane.events if isinstance(e, Request)][1]
    assert (seg.seg, seg.label, seg.start, seg.end) == ("tool", "run_tests", done.t, done.t + 2.0)
    assert second.t == seg.end and second.turn == 1
    assert is_loop_end(lane.events[-1]) and lane.events[-1].t == lane.events[-2].t
    last = lane.events[-1]
    assert isinstance(last, Extra) and last.data == {"scenario": "t", "turns": 2}


def test_the_tool_result_goes_back_to_the_model_right_after_its_call() -> None:
    model = Decider(calls=1)
    decide(scenario(FIX), model)
    first, second = model.requests
    assert [m.role for m in first.messages] == ["user"]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assistant, tool = second.messages[1:]
    assert assistant.extra == {"tool_calls": [{"id": "live-0", "name": "run_tests", "arguments": '{"path": "tests"}'}]}
    assert (tool.content, tool.extra) == ("1 failed", {"tool_call_id": "live-0", "name": "run_tests"})
    assert [t["name"] for t in first.tools] == ["run_tests", "read_file"]
    assert first.scripted_tool_calls == [{"id": "call_0_0", "name": "run_tests", "arguments": '{"path": "tests"}'}]


def test_parallel_calls_of_one_turn_overlap_and_nothing_else_on_the_lane_does() -> None:
    sc = scenario("""
[[steps]]
kind = "model"
prompt = "Look around."
calls = [{ tool = "read_file", arguments = { path = "a" } }, { tool = "run_tests" }]

[[steps]]
kind = "model"
""")
    lane = run([synthetic(ttft_ms=100, tok_s=200, jitter=0)], sc)[0]
    tools = segments(lane.events, "tool")
    assert [(s.label, s.end - s.start) for s in tools] == [("read_file", 0.5), ("run_tests", 2.0)]
    assert tools[0].start == tools[1].start
    second = [e for e in lane.events if isinstance(e, Request)][1]
    assert second.t == tools[0].start + 2.0
    spans = sorted(loop_metrics(lane.events).segments, key=lambda s: s.start)
    overlapping = [(a.label, b.label) for a in spans for b in spans
                   if a is not b and a.start < b.end and b.start < a.end]
    assert overlapping and all(a.kind == b.kind == "tool" for a in spans for b in spans
                               if a is not b and a.start < b.end and b.start < a.end)


def test_without_parallel_tools_the_calls_of_a_turn_run_one_after_the_other() -> None:
    sc = scenario("""
[[steps]]
kind = "model"
prompt = "Look around."
calls = [{ tool = "read_file" }, { tool = "run_tests" }]

[[steps]]
kind = "model"
""", header='name = "t"\nparallel_tools = false\n')
    tools = segments(run([synthetic(ttft_ms=100, tok_s=200)], sc)[0].events, "tool")
    assert tools[1].start == tools[0].end


def test_every_lane_waits_exactly_as_long_for_the_same_tool_and_person() -> None:
    sc = scenario("""
[[steps]]
kind = "model"
prompt = "Go."
calls = [{ tool = "run_tests", latency_s = { dist = "lognormal", median = 5, sigma = 0.5 } }]

[[steps]]
kind = "model"

[[steps]]
kind = "human"
latency_s = { dist = "uniform", min = 10, max = 60 }
""")
    slow, fast = run([synthetic("slow", ttft_ms=900, tok_s=50, seed=1, jitter=0.2),
                      synthetic("fast", ttft_ms=100, tok_s=750, seed=2, jitter=0.1)], sc)
    durations = [[(s.seg, s.end - s.start) for s in segments(lane.events)] for lane in (slow, fast)]
    assert durations[0] == durations[1]
    assert durations[0][0][1] != 5.0 and 10 <= durations[0][1][1] <= 60


def test_a_person_and_a_harness_tool_hand_their_words_to_the_model_as_one_user_message() -> None:
    model = Decider(calls=0)
    decide(scenario("""
[[steps]]
kind = "model"
prompt = "Summarise the incident."

[[steps]]
kind = "tool"
tool = "speech_to_text"
latency_s = 0.3
output = "Caller: what broke?"

[[steps]]
kind = "human"
action = "speak"
latency_s = 2
reply = "And when?"

[[steps]]
kind = "wait"
latency_s = 1

[[steps]]
kind = "model"
"""), model)
    assert len(model.requests) == 2
    last = model.requests[1].messages[-1]
    assert (last.role, last.content) == ("user", "Caller: what broke?\n\nAnd when?")
    assert model.requests[0].messages[-1].content == "Summarise the incident."


def test_a_turn_limit_ends_the_lane_with_a_turn_limit_error_while_the_model_still_calls_tools() -> None:
    model = Decider(calls=99)
    lane = decide(scenario(FIX, header='name = "t"\nmax_turns = 3\n'), model)
    assert len(model.requests) == 3
    last = lane.events[-1]
    assert isinstance(last, Error) and last.error == "turn_limit" and "3 model requests" in last.message
    m = loop_metrics(lane.events)
    assert not m.ok and m.error == last.message and len(m.turns) == 3
    assert m.e2e_s == last.t


def test_a_scripted_turn_limit_below_the_script_stops_the_loop_there() -> None:
    lane = run([synthetic(ttft_ms=100, tok_s=200)], scenario(FIX, header='name = "t"\nmax_turns = 1\n'))[0]
    assert sum(isinstance(e, Request) for e in lane.events) == 1
    assert isinstance(lane.events[-1], Error) and lane.events[-1].error == "turn_limit"


def test_a_tool_that_fails_hands_its_error_to_the_model_and_the_loop_goes_on() -> None:
    sc = scenario("""
[[steps]]
kind = "model"
prompt = "Fix it."
calls = [{ tool = "run_tests", fail = true }]

[[steps]]
kind = "model"
""")
    lane = run([synthetic(ttft_ms=100, tok_s=200)], sc)[0]
    assert [s.label for s in segments(lane.events)] == ["run_tests (failed)"]
    assert loop_metrics(lane.events).ok
    model = Decider(calls=1)  # a live model's calls are its own: the script's fail = true does not apply
    decide(sc, model)
    assert "is_error" not in model.requests[1].messages[-1].extra
    always = parse_scenario('name = "t"\n' + TOOLS.replace('result = ["1 failed", "all passed"]', "fail_rate = 1")
                            + FIX, Path("t.toml"))
    model = Decider(calls=1)
    decide(always, model)
    tool = model.requests[1].messages[-1]
    assert tool.role == "tool" and tool.extra["is_error"] is True and tool.content == "the tool failed"


def test_a_tools_fail_rate_fails_the_same_calls_on_every_lane() -> None:
    flaky = TOOLS.replace('result = ["1 failed", "all passed"]', 'fail_rate = 0.5\nerror = "flaky runner"')
    steps = "".join(f"""
[[steps]]
kind = "model"
{'prompt = "Go."' if i == 0 else ''}
calls = [{{ tool = "run_tests" }}]
""" for i in range(8)) + '\n[[steps]]\nkind = "model"\n'
    sc = parse_scenario('name = "t"\n' + flaky + steps, Path("t.toml"))
    a, b = run([synthetic("a", ttft_ms=500, tok_s=50), synthetic("b", ttft_ms=100, tok_s=700)], sc)
    labels = [[s.label for s in segments(lane.events)] for lane in (a, b)]
    assert labels[0] == labels[1]
    assert 0 < labels[0].count("run_tests (failed)") < 8


def test_a_model_that_never_calls_a_tool_answers_once_and_the_scripted_follow_ups_are_skipped() -> None:
    model = Decider(calls=0)
    lane = decide(scenario(FIX + """
[[steps]]
kind = "human"
latency_s = 30
reply = "Thanks; and the docs?"

[[steps]]
kind = "model"
"""), model)
    assert len(model.requests) == 2
    assert [s.seg for s in segments(lane.events)] == ["human"]
    m = loop_metrics(lane.events)
    assert m.ok and len(m.turns) == 2 and m.breakdown["human"] == 30


def test_a_live_model_keeps_calling_tools_until_it_answers() -> None:
    model = Decider(calls=3)
    lane = decide(scenario("""
[[steps]]
kind = "model"
prompt = "Make the suite pass."
"""), model)
    assert len(model.requests) == 4
    assert [s.label for s in segments(lane.events)] == ["run_tests"] * 3
    assert [m.content for m in model.requests[-1].messages if m.role == "tool"] == ["1 failed", "all passed",
                                                                                     "all passed"]
    assert loop_metrics(lane.events).ok


def test_a_call_to_a_tool_the_scenario_does_not_have_gets_an_error_result_at_once() -> None:
    model = Decider(calls=1, tool="rm_rf")
    lane = decide(scenario(FIX), model)
    seg = segments(lane.events)[0]
    assert (seg.label, seg.end - seg.start) == ("rm_rf (unknown tool)", 0.0)
    tool = model.requests[1].messages[-1]
    assert tool.extra["is_error"] and "no tool named 'rm_rf'" in tool.content


def test_a_steps_max_tokens_is_capped_by_the_tiers_own_limit() -> None:
    model = Decider(calls=0)
    model.tier.max_tokens = 8
    decide(scenario('\n[[steps]]\nkind = "model"\nprompt = "Hi."\nmax_tokens = 100\n'), model)
    assert model.requests[0].max_tokens == 8


def test_a_failing_model_ends_the_loop_with_its_error() -> None:
    lane = run([synthetic(ttft_ms=100, tok_s=200, fail_after_tokens=2)], scenario(FIX + """
[[steps]]
kind = "human"
latency_s = 5
""".replace("max_tokens = 12", "")))[0]
    assert isinstance(lane.events[-1], Error) and lane.events[-1].error == "synthetic"
    assert not segments(lane.events, "human")


async def test_stopping_a_lane_during_a_tool_ends_it_stopped_with_the_tool_cut_at_the_stop() -> None:
    clock = VirtualClock()
    race = Race([synthetic(ttft_ms=100, tok_s=200, jitter=0)], TurnRequest(prompt=""), clock,
                scenario=scenario(FIX))
    task = asyncio.create_task(race.run())
    await clock.advance_to(1.0)
    assert segments(race.lanes[0].events, "tool")
    race.stop()
    await clock.advance_to(1.5)
    lanes = await task
    last = lanes[0].events[-1]
    assert isinstance(last, Error) and last.error == "stopped"
    m = loop_metrics(lanes[0].events)
    assert m.e2e_s == last.t and abs(sum(m.breakdown.values()) - m.e2e_s) < 1e-9

"""Re-timing a trace on a tier profile: model steps take the tier's time, the rest keep theirs, parallel work stays
parallel, and the trace's own durations give it back exactly."""

from __future__ import annotations

import random

import pytest
from paths import ROOT

from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.traces.analysis import analyse
from tokrace.providers.traces.model import Step, Trace
from tokrace.providers.traces.retime import TierProfile, containers, dependency_order, retime, retime_on, tier_profile

PROFILE = TierProfile(name="fast", ttft_s=0.5, tok_s=100.0)


def span(trace: Trace) -> float:
    return max(s.end for s in trace.steps) - min(s.start for s in trace.steps)


def model(id: str, start: float, end: float, out: int, after: tuple[str, ...] = (), chain: str = "main",
          inp: int | None = None) -> Step:
    return Step(id=id, kind="model", start=start, end=end, after=after, chain=chain, output_tokens=out,
                input_tokens=inp)


def tool(id: str, start: float, end: float, after: tuple[str, ...] = (), chain: str = "main") -> Step:
    return Step(id=id, kind="tool", start=start, end=end, after=after, chain=chain, label="pytest")


def sequential() -> Trace:
    return Trace(file="seq", format="test", steps=[
        model("m1", 0.0, 10.0, 200), tool("t1", 10.0, 15.0, ("m1",)), model("m2", 15.0, 25.0, 100, ("t1",))])


def sub_agent() -> Trace:
    return Trace(file="sub", format="test", steps=[
        model("m1", 0.0, 4.0, 100),
        model("s1", 4.0, 14.0, 300, ("m1",), chain="sub-agent 1"),
        tool("t1", 4.0, 6.0, ("m1",)),
        model("m2", 14.0, 20.0, 100, ("t1", "s1")),
    ])


def parallel_tools() -> Trace:
    return Trace(file="tools", format="test", steps=[
        model("m1", 0.0, 3.0, 50), tool("t1", 3.0, 8.0, ("m1",)), tool("t2", 3.0, 5.0, ("m1",)),
        model("m2", 8.0, 12.0, 100, ("t1", "t2")),
    ])


def random_trace(rng: random.Random, n: int = 30) -> Trace:
    """A trace of model and tool steps with one sub-agent chain and parallel tools, with awkward float times."""
    steps: list[Step] = []
    t = rng.random()
    last: tuple[str, ...] = ()
    for i in range(n):
        kind = rng.choice(["model", "tool", "human", "wait", "tools"])
        if kind == "tools":
            ids = []
            ends = []
            for k in range(rng.randint(2, 3)):
                end = t + rng.uniform(0.01, 7.3)
                steps.append(Step(id=f"s{i}.{k}", kind="tool", start=t, end=end, after=last))
                ids.append(f"s{i}.{k}")
                ends.append(end)
            t = max(ends) + rng.uniform(0, 0.3)
            last = tuple(ids)
            continue
        end = t + rng.uniform(0.01, 9.7)
        chain = "sub" if kind == "model" and rng.random() < 0.2 else "main"
        steps.append(Step(id=f"s{i}", kind=kind, start=t, end=end, after=last, chain=chain,  # type: ignore[arg-type]
                          output_tokens=rng.randint(1, 900) if kind == "model" else None,
                          input_tokens=rng.randint(100, 90_000) if kind == "model" else None))
        last = (f"s{i}",)
        t = end + rng.uniform(0, 0.2)
    if rng.random() < 0.5:  # inside an agent's span, the first step chained after it as the readers link it
        first = steps[0]
        steps.insert(0, Step(id="agent", kind="wait", start=first.start, end=max(s.end for s in steps) + 0.5,
                             label="agent"))
        steps[1].after = ("agent",)
    return Trace(file="random", format="test", steps=steps)


def test_retiming_on_the_recorded_durations_gives_back_every_time_exactly() -> None:
    rng = random.Random(5)
    for trace in [sequential(), sub_agent(), parallel_tools(), *(random_trace(rng) for _ in range(20))]:
        again = retime(trace, lambda s: s.duration)
        assert [(s.id, s.start, s.end) for s in again.steps] == [(s.id, s.start, s.end) for s in trace.steps]
        assert span(again) == span(trace)


def test_sequential_trace_retimed_by_hand() -> None:
    # m1: 0.5 + 200/100 = 2.5; tool keeps 5 s; m2: 0.5 + 1 = 1.5 -> 2.5 + 5 + 1.5
    out = retime_on(sequential(), PROFILE)
    assert [(s.start, s.end) for s in out.steps] == pytest.approx([(0.0, 2.5), (2.5, 7.5), (7.5, 9.0)])
    assert span(out) == pytest.approx(9.0)


def test_parallel_sub_agent_stays_parallel() -> None:
    # m1 1.5; the sub-agent's 3.5 s runs beside the 2 s tool; m2 waits for both: 1.5 + 3.5 + 1.5
    out = retime_on(sub_agent(), PROFILE)
    by_id = {s.id: s for s in out.steps}
    assert (by_id["s1"].start, by_id["s1"].end) == pytest.approx((1.5, 5.0))
    assert (by_id["t1"].start, by_id["t1"].end) == pytest.approx((1.5, 3.5))
    assert (by_id["m2"].start, by_id["m2"].end) == pytest.approx((5.0, 6.5))
    assert span(out) == pytest.approx(6.5)


def test_parallel_tools_stay_parallel() -> None:
    # m1 1.0; tools 5 s and 2 s side by side; m2 after the longer: 1 + 5 + 1.5
    out = retime_on(parallel_tools(), PROFILE)
    assert span(out) == pytest.approx(7.5)
    assert {s.id: (s.start, s.end) for s in out.steps}["t2"] == pytest.approx((1.0, 3.0))


def test_prefill_rate_adds_input_tokens_to_the_ttft() -> None:
    trace = Trace(file="p", format="test", steps=[model("m1", 0.0, 9.0, 100, inp=2000)])
    out = retime_on(trace, TierProfile(name="p", ttft_s=0.2, tok_s=50.0, prefill_tok_s=1000.0))
    assert span(out) == pytest.approx(0.2 + 2.0 + 2.0)
    assert out.steps[0].ttft_s == pytest.approx(2.2)
    assert out.steps[0].service_tier == "p"


def test_a_faster_tier_never_makes_a_trace_slower() -> None:
    rng = random.Random(11)
    for _ in range(40):
        trace = random_trace(rng)
        slow = TierProfile(name="slow", ttft_s=rng.uniform(0.1, 2), tok_s=rng.uniform(20, 100),
                           prefill_tok_s=rng.choice([None, 5000.0]))
        fast = TierProfile(name="fast", ttft_s=slow.ttft_s * rng.uniform(0.1, 1), tok_s=slow.tok_s * rng.uniform(1, 20),
                           prefill_tok_s=None if slow.prefill_tok_s is None else slow.prefill_tok_s * 2)
        assert span(retime_on(trace, fast)) <= span(retime_on(trace, slow)) + 1e-9


def test_steps_other_than_model_and_their_containers_keep_their_durations() -> None:
    rng = random.Random(3)
    trace = random_trace(rng)
    out = retime_on(trace, PROFILE)
    holders = set(containers(trace.steps).values())
    assert holders  # the agent's span holds the rest, and follows it
    for i, (before, after) in enumerate(zip(trace.steps, out.steps, strict=True)):
        if before.kind != "model" and i not in holders:
            assert after.duration == pytest.approx(before.duration)


def test_model_step_without_output_tokens_keeps_its_duration_and_says_so() -> None:
    trace = Trace(file="n", format="test", steps=[Step(id="m", kind="model", start=0.0, end=4.0)])
    out = retime_on(trace, PROFILE)
    assert out.steps[0].duration == 4.0
    assert "1 model step without an output token count kept the recorded duration" in out.notes


def test_dependency_cycle_and_unknown_ids_do_not_hang_or_crash() -> None:
    steps = [tool("a", 0, 1, ("b",)), tool("b", 1, 2, ("a", "ghost")), tool("c", 2, 3, ("b",))]
    assert sorted(dependency_order(steps)) == [0, 1, 2]
    assert span(retime(Trace(file="c", format="t", steps=steps), lambda s: s.duration)) == 3


def test_tier_profile_of_synthetic_and_http_tiers() -> None:
    synth = TierSpec(name="u", provider="synthetic", options={"ttft_ms": 180, "tok_s": 750, "prefill_tok_s": 9000})
    assert tier_profile(synth) == TierProfile(name="u", ttft_s=0.18, tok_s=750.0, prefill_tok_s=9000.0)
    measured = TierSpec(name="real", provider="openai", options={"ttft_ms": 420.5, "tok_s": 88})
    assert tier_profile(measured).ttft_s == pytest.approx(0.4205)
    with pytest.raises(ConfigError, match="tokrace calibrate --tiers 'bare'"):
        tier_profile(TierSpec(name="bare", provider="anthropic"))


def test_retiming_on_the_recorded_durations_gives_back_the_analysed_e2e_exactly() -> None:
    rng = random.Random(8)
    for trace in [sequential(), sub_agent(), parallel_tools(), *(random_trace(rng) for _ in range(20))]:
        assert analyse(retime(trace, lambda s: s.duration)).e2e_s == analyse(trace).e2e_s
        assert analyse(retime(trace, lambda s: s.duration), idle_cap_s=3.0).e2e_s == \
            analyse(trace, idle_cap_s=3.0).e2e_s


def test_the_breakdown_sums_to_e2e_on_every_tier() -> None:
    rng = random.Random(21)
    tiers = [PROFILE, TierProfile(name="slow", ttft_s=1.0, tok_s=50.0),
             TierProfile(name="ultra", ttft_s=0.18, tok_s=750.0, prefill_tok_s=20_000.0)]
    for trace in [sequential(), sub_agent(), parallel_tools(), *(random_trace(rng) for _ in range(10))]:
        for tier in tiers:
            result = analyse(retime_on(trace, tier))
            assert sum(result.breakdown.values()) == pytest.approx(result.e2e_s, abs=1e-9)
            assert result.e2e_s == pytest.approx(span(retime_on(trace, tier)))


def test_hand_computed_breakdown_of_the_retimed_sub_agent_trace() -> None:
    result = analyse(retime_on(sub_agent(), PROFILE))
    # model 0-1.5 (m1), 1.5-5.0 (the sub-agent beside the tool), 5.0-6.5 (m2): the tool is under the model
    assert result.e2e_s == pytest.approx(6.5)
    assert result.breakdown["model"] == pytest.approx(6.5)
    assert result.breakdown["tool"] == pytest.approx(0.0)


def agent_spans() -> Trace:
    """As the OTLP reader builds it: the top agent's span and a sub-agent's span are ``wait`` steps around their
    calls, the sub-agent runs in a ``sub-agent`` tool step of the main chain; dependencies as the readers link."""
    from tokrace.providers.traces.reader_tools import Chains

    chains = Chains()
    chains.add("wait", 0.0, 30.0, label="agent")
    chains.add("model", 0.0, 10.0, output_tokens=100)
    chains.add("tool", 10.0, 25.0, label="sub-agent")
    chains.add("wait", 10.0, 25.0, chain="agent-x", label="researcher")
    chains.add("model", 10.0, 20.0, chain="agent-x", output_tokens=200)
    chains.add("tool", 20.0, 25.0, chain="agent-x", label="grep")
    chains.add("model", 25.0, 30.0, output_tokens=100)
    return Trace(file="agents", format="otlp", steps=chains.finish())


def test_agent_and_sub_agent_spans_shrink_with_what_they_hold() -> None:
    # m1 1.5; the sub-agent's call 2.5 then grep 5 (1.5-9.0), its tool step and span follow it; m2 9.0-10.5;
    # the top agent's span ends with m2
    trace = agent_spans()
    out = retime_on(trace, PROFILE)
    by = {(s.kind, s.label, s.chain): (s.start, s.end) for s in out.steps}
    assert by[("tool", "sub-agent", "main")] == pytest.approx((1.5, 9.0))
    assert by[("wait", "researcher", "agent-x")] == pytest.approx((1.5, 9.0))
    assert by[("tool", "grep", "agent-x")] == pytest.approx((4.0, 9.0))
    assert by[("wait", "agent", "main")] == pytest.approx((0.0, 10.5))
    assert span(out) == pytest.approx(10.5)
    assert analyse(out).e2e_s == pytest.approx(10.5)
    again = retime(trace, lambda s: s.duration)
    assert [(s.start, s.end) for s in again.steps] == [(s.start, s.end) for s in trace.steps]


def test_a_sub_agent_tool_step_does_not_hold_its_own_chain() -> None:
    trace = Trace(file="t", format="t", steps=[
        Step(id="a", kind="tool", start=0, end=10, label="sub-agent"),
        Step(id="b", kind="model", start=2, end=4, output_tokens=100),
    ])
    assert containers(trace.steps) == {}


def test_every_fixture_trace_retimes_exactly_on_its_own_durations_and_monotonically() -> None:
    from pathlib import Path

    from tokrace.providers.traces.read import files, read_file

    traces = [t for f in files([Path(__file__).parent / "fixtures", ROOT / "examples"])
              for t in read_file(f).traces]
    assert len(traces) >= 5
    slow, fast = TierProfile(name="slow", ttft_s=2.0, tok_s=20.0), TierProfile(name="fast", ttft_s=0.1, tok_s=900.0)
    for trace in traces:
        again = retime(trace, lambda s: s.duration)
        assert [(s.start, s.end) for s in again.steps] == [(s.start, s.end) for s in trace.steps], trace.file
        assert analyse(again).e2e_s == analyse(trace).e2e_s
        assert analyse(retime_on(trace, fast)).e2e_s <= analyse(retime_on(trace, slow)).e2e_s + 1e-9, trace.file


def test_a_profile_tells_its_ttft_in_seconds_as_every_table_does() -> None:
    """The footnote under ``traces --on`` names each tier's TTFT in the one duration format (docs/design.md §6):
    "1.000 s", not "1000 ms" beside a table of seconds."""
    profile = TierProfile("Sol standard", ttft_s=1.0, tok_s=53.57, prefill_tok_s=40_000)
    assert profile.describe() == "Sol standard: TTFT 1.000 s + input ÷ 40000 tok/s, 53.57 tok/s"
    assert " ms" not in TierProfile("fast", ttft_s=0.18, tok_s=750.0).describe()

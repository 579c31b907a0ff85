"""The analysis of a trace (docs/design.md §12) on hand-built traces whose figures are computed by hand."""

from __future__ import annotations

import random

import pytest

from tokrace.providers.model.tiers import Price
from tokrace.providers.traces.analysis import analyse, critical_path, pieces, without_away
from tokrace.providers.traces.model import Step, Trace
from tokrace.providers.traces.retime import TierProfile, retime_on


def model(id: str, start: float, end: float, **kw: object) -> Step:
    return Step(id, "model", start, end, **kw)  # type: ignore[arg-type]


def trace(*steps: Step) -> Trace:
    return Trace(file="t", format="test", steps=list(steps))


def test_sequential_steps_and_an_unexplained_gap_give_a_breakdown_summing_to_e2e() -> None:
    t = trace(model("m1", 0, 2, input_tokens=100, cached_input_tokens=40, output_tokens=50),
              Step("t1", "tool", 2, 5, label="bash", after=("m1",)),
              model("m2", 6, 7, input_tokens=200, output_tokens=20, reasoning_tokens=5, after=("t1",)))
    a = analyse(t)
    assert a.e2e_s == 7.0
    assert a.breakdown == {"model": 3.0, "tool": 3.0, "human": 0.0, "retry": 0.0, "wait": 1.0}
    assert sum(a.breakdown.values()) == a.e2e_s
    assert (a.calls, a.tool_calls, a.human_steps, a.retries) == (2, 1, 0, 0)
    assert (a.input_tokens, a.cached_input_tokens, a.output_tokens, a.reasoning_tokens) == (300, 40, 70, 5)
    assert a.model_share == pytest.approx(3 / 7)
    assert a.amdahl_max_speedup == pytest.approx(7 / 4)  # measured: on an instant tier the tool and the gap remain
    assert a.instant_e2e_s == pytest.approx(4.0)
    assert a.ttft_p50 is None and a.cost_usd is None


def test_the_breakdown_is_the_critical_path_not_what_ran_at_each_instant() -> None:
    # a sub-agent (model 2-12 s, a tool 12-20 s) runs beside the person (2-32 s): the person sets the wall time
    t = trace(model("m1", 0, 2, output_tokens=10),
              Step("h", "human", 2, 32, after=("m1",), label="person"),
              model("m2", 32, 34, output_tokens=10, after=("h",)),
              model("s1", 2, 12, chain="sub", output_tokens=100, after=("m1",)),
              Step("s2", "tool", 12, 20, chain="sub", after=("s1",)))
    a = analyse(t)
    assert a.e2e_s == 34.0
    assert a.breakdown == {"model": 4.0, "tool": 0.0, "human": 30.0, "retry": 0.0, "wait": 0.0}
    assert a.parallel_s == {"model": 10.0, "tool": 8.0, "human": 0.0}
    assert [(p.kind, p.start, p.end) for p in critical_path(t)] == [("model", 0, 2), ("human", 2, 32),
                                                                     ("model", 32, 34)]
    # by precedence each instant would go to the sub-agent's model call or tool first: the person kept only 12 s
    assert {p.kind: p.end - p.start for p in pieces(t) if p.kind == "human"} == {"human": 12.0}
    for tier in (TierProfile("fast", 0.05, 2000.0), TierProfile("slow", 3.0, 10.0)):
        on = analyse(retime_on(t, tier))  # the sub-agent stays beside the person (13 + 8 s on the slow tier)
        assert on.breakdown["human"] == 30.0 and on.breakdown["tool"] == 0.0, tier.name


def test_a_sub_agent_that_outlasts_the_person_takes_the_path_but_not_the_persons_seconds() -> None:
    # the sub-agent (2-30 s) outlasts the person (2-12 s): the path runs through it, but the person's 10 s stay
    # human; the sub-agent's call beside them is parallel work, the 18 s it adds beyond them are model
    t = trace(model("m1", 0, 2), Step("h", "human", 2, 12, after=("m1",)),
              model("s1", 2, 30, chain="sub", after=("m1",)), model("m2", 30, 31, after=("h", "s1")))
    a = analyse(t)
    assert a.breakdown == {"model": 21.0, "tool": 0.0, "human": 10.0, "retry": 0.0, "wait": 0.0}
    assert a.parallel_s == {"model": 10.0, "tool": 0.0, "human": 0.0}
    assert [(p.kind, p.start, p.end) for p in critical_path(t)] == [("model", 0, 2), ("human", 2, 12),
                                                                     ("model", 12, 31)]


def test_a_tier_slow_enough_to_make_a_sub_agent_outlast_the_person_keeps_the_persons_seconds() -> None:
    # recorded: the sub-agent (2-12 s) ends before the person (2-32 s); on a slow tier it runs 2-62 s
    t = trace(model("m1", 0, 2, output_tokens=10), Step("h", "human", 2, 32, after=("m1",)),
              model("s1", 2, 12, chain="sub", output_tokens=60, after=("m1",)),
              model("m2", 32, 34, output_tokens=10, after=("h", "s1")))
    assert analyse(t).breakdown["human"] == 30.0
    slow = analyse(retime_on(t, TierProfile("slow", ttft_s=0.0, tok_s=1.0)))
    assert slow.e2e_s == 10 + 60 + 10
    assert slow.breakdown == {"model": 50.0, "tool": 0.0, "human": 30.0, "retry": 0.0, "wait": 0.0}
    assert slow.parallel_s == {"model": 30.0, "tool": 0.0, "human": 0.0}


def test_an_overlap_of_two_steps_on_the_path_goes_to_the_kind_first_in_precedence() -> None:
    # the call's last second overlaps the tool it asked for; a retry overlaps the tool; a gap is wait
    t = trace(model("m1", 0, 5), Step("t", "tool", 4, 10, after=("m1",)), Step("r", "retry", 9, 12, after=("t",)),
              model("m2", 14, 15, after=("r",)))
    a = analyse(t)
    assert a.breakdown == {"model": 6.0, "tool": 5.0, "human": 0.0, "retry": 2.0, "wait": 2.0}
    assert a.parallel_s == {"model": 0.0, "tool": 1.0, "human": 0.0}  # the tool's second under the call


def test_without_recorded_dependencies_the_path_follows_what_ran_just_before() -> None:
    # no step says what it waits for: each follows the step running (or that ended last) before it starts
    t = trace(Step("tool", "tool", 0, 10, label="Task"),
              model("sub1", 2, 4, chain="sub"),
              Step("h", "human", 8, 12),
              Step("r", "retry", 11, 14),
              Step("w", "wait", 13, 16))
    a = analyse(t)
    # (the person's 4 s stay whole: the retry that overlaps their last second keeps only what lies beyond it)
    assert a.breakdown == {"model": 0.0, "tool": 8.0, "human": 4.0, "retry": 1.0, "wait": 3.0}
    assert a.e2e_s == 16.0 and a.parallel_s == {"model": 2.0, "tool": 2.0, "human": 0.0}


def test_parallel_model_calls_count_once_in_the_breakdown() -> None:
    t = trace(model("a", 0, 4, output_tokens=9), model("b", 1, 5, chain="sub", output_tokens=9),
              Step("t", "tool", 5, 6, after=("a", "b")))
    a = analyse(t)
    assert a.breakdown["model"] == 5.0
    assert a.e2e_s == 6.0
    assert a.model_share == pytest.approx(5 / 6)
    # measured, not 6 ÷ (6 − 5): on an instant tier b still starts at 1 s, then the tool runs 1 s: 2 s
    assert a.instant_e2e_s == pytest.approx(2.0) and a.amdahl_max_speedup == pytest.approx(3.0)


def test_a_person_away_for_an_hour_counts_only_up_to_the_idle_cap() -> None:
    t = trace(model("m1", 0, 10), Step("h", "human", 10, 3610), model("m2", 3610, 3620))
    a = analyse(t, idle_cap_s=600)
    assert a.away_s == 3000.0
    assert a.e2e_s == 620.0
    assert a.breakdown == {"model": 20.0, "tool": 0.0, "human": 600.0, "retry": 0.0, "wait": 0.0}
    uncapped = analyse(t, idle_cap_s=10_000)
    assert uncapped.away_s == 0.0 and uncapped.e2e_s == 3620.0


def test_work_beside_a_person_away_is_off_the_path_and_the_away_time_stays_away() -> None:
    t = trace(Step("h", "human", 0, 1000), Step("t", "tool", 700, 800, chain="sub"))
    a = analyse(t, idle_cap_s=600)
    assert a.away_s == 400.0 and a.e2e_s == 600.0
    assert a.breakdown["tool"] == 0.0 and a.breakdown["human"] == 600.0
    assert a.parallel_s["tool"] == 100.0


def test_without_away_keeps_the_figures_and_drops_the_away_time() -> None:
    t = trace(model("m1", 5, 15), Step("h", "human", 15, 3615), Step("t", "tool", 3615, 3620),
              model("m2", 3620, 3630))
    a = analyse(t, idle_cap_s=600)
    cut = without_away(t, idle_cap_s=600)
    b = analyse(cut, idle_cap_s=600)
    assert (b.e2e_s, b.away_s, b.breakdown) == (a.e2e_s, 0.0, a.breakdown)
    assert [(s.start, s.end) for s in cut.steps] == [(0, 10), (10, 610), (610, 615), (615, 625)]


def test_ttft_percentiles_use_only_calls_that_record_one() -> None:
    t = trace(model("a", 0, 1, ttft_s=0.2), model("b", 1, 2), model("c", 2, 3, ttft_s=0.4),
              model("d", 3, 4, ttft_s=1.0))
    a = analyse(t)
    assert a.ttft_recorded == 3
    assert a.ttft_p50 == pytest.approx(0.4)
    assert a.ttft_p90 == pytest.approx(0.88)


def test_cost_prices_cached_input_apart() -> None:
    t = trace(model("a", 0, 1, input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000),
              Step("t", "tool", 1, 2))
    a = analyse(t, price=Price(input=5.0, output=30.0, cached_input=0.5))
    assert a.cost_usd == pytest.approx(0.6 * 5.0 + 0.4 * 0.5 + 0.1 * 30.0)
    assert analyse(t, price=Price(input=5.0, output=30.0)).cost_usd == pytest.approx(5.0 + 3.0)


def test_counts_retries_failed_tools_and_models_in_order() -> None:
    t = trace(model("a", 0, 1, model="m-small", failed=True), Step("r", "retry", 1, 3),
              model("b", 3, 4, model="m-big"), Step("t", "tool", 4, 5, failed=True),
              model("c", 5, 6, model="m-small"))
    a = analyse(t)
    assert a.retries == 1 and a.failed_tools == 1 and a.calls == 3
    assert a.models == ("m-small", "m-big")
    assert a.breakdown["retry"] == 2.0


def test_an_empty_trace_has_no_time_and_no_shares() -> None:
    a = analyse(trace())
    assert a.e2e_s == 0.0 and a.model_share is None and a.amdahl_max_speedup is None
    assert a.to_json()["breakdown"] == {"model": 0.0, "tool": 0.0, "human": 0.0, "retry": 0.0, "wait": 0.0}


def test_a_trace_that_is_all_model_has_no_amdahl_bound() -> None:
    a = analyse(trace(model("a", 0, 2, output_tokens=5), model("b", 2, 3, output_tokens=5, after=("a",))))
    assert a.model_share == 1.0 and a.amdahl_max_speedup is None
    # calls without token counts cannot be re-timed: the bound says no model can make them faster
    assert analyse(trace(model("a", 0, 2), model("b", 2, 3, after=("a",)))).amdahl_max_speedup == 1.0


def test_a_step_ending_before_it_starts_is_an_instant() -> None:
    a = analyse(trace(model("a", 0, 2), Step("t", "tool", 3, 1)))
    assert a.e2e_s == 3.0 and a.breakdown["wait"] == 1.0


def test_pieces_merge_consecutive_stretches_of_a_kind() -> None:
    t = trace(model("a", 0, 1), model("b", 1, 2), Step("t", "tool", 3, 4))
    assert [(p.kind, p.start, p.end) for p in pieces(t)] == [("model", 0, 2), ("wait", 2, 3), ("tool", 3, 4)]


def test_to_json_has_the_stable_keys() -> None:
    out = analyse(trace(model("a", 0, 1, ttft_s=0.25))).to_json()
    for key in ("calls", "tool_calls", "human_steps", "retries", "input_tokens", "cached_input_tokens",
                "output_tokens", "e2e_s", "away_s", "breakdown", "model_share", "amdahl_max_speedup", "ttft_s"):
        assert key in out
    assert out["ttft_s"] == {"p50": 0.25, "p90": 0.25}


def test_work_beside_other_work_is_reported_apart_as_parallel_seconds() -> None:
    # a sub-agent's model call (1–5 s) beside the main call (0–4 s); two tools side by side (5–6 s, 5–8 s)
    t = trace(model("a", 0, 4, output_tokens=9), model("b", 1, 5, chain="sub", output_tokens=9),
              Step("t1", "tool", 5, 6, after=("a", "b")), Step("t2", "tool", 5, 8, after=("a", "b")))
    a = analyse(t)
    assert a.breakdown["model"] == 5.0 and a.breakdown["tool"] == 3.0 and a.e2e_s == 8.0
    assert a.parallel_s == {"model": 3.0, "tool": 1.0, "human": 0.0}
    assert a.to_json()["parallel_s"] == {"model": 3.0, "tool": 1.0, "human": 0.0}


def test_the_critical_path_covers_the_span_once_on_random_dags_with_cycles_and_overlaps() -> None:
    for seed in range(300):
        r = random.Random(seed)
        n = r.randint(1, 25)
        steps = []
        for i in range(n):
            start = r.uniform(0, 100)
            length = r.choice([0.0, r.uniform(0, 30), r.uniform(0, 900)])
            after = tuple(f"s{j}" for j in r.sample(range(n), r.randint(0, min(3, n))) if j != i)
            steps.append(Step(f"s{i}", r.choice(["model", "tool", "human", "retry", "wait"]), start, start + length,
                              after=after, chain=r.choice(["main", "main", "sub"]), label=r.choice(["", "sub-agent"])))
        a = analyse(trace(*steps), idle_cap_s=60)
        span = max(s.end for s in steps) - min(s.start for s in steps)
        assert sum(a.breakdown.values()) == pytest.approx(a.e2e_s, abs=1e-6), seed
        assert a.e2e_s + a.away_s == pytest.approx(span, abs=1e-6), seed
        assert min(a.breakdown.values()) >= 0 and min(a.parallel_s.values()) >= 0, seed


TIERS = (TierProfile("instant", ttft_s=0.0, tok_s=float("inf")), TierProfile("very slow", ttft_s=60.0, tok_s=0.2),
         TierProfile("slow", ttft_s=3.0, tok_s=10.0), TierProfile("fast", ttft_s=0.05, tok_s=2000.0,
                                                                   prefill_tok_s=1e6))


def one_persons_dag(r: random.Random) -> Trace:
    """A trace as readers build one: a main chain (model, tool, human, retry steps, each after the one before,
    gaps between), sub-agents run inside a ``sub-agent`` tool step or in the background beside the main chain
    (joined later or never), with parallel tool calls; each step starts after what it waits for ends."""
    steps: list[Step] = []
    t, prev, n = 0.0, "", 0

    def add(kind: str, start: float, length: float, after: tuple[str, ...], chain: str = "main",
            label: str = "") -> Step:
        nonlocal n
        n += 1
        tokens = r.choice([None, r.randint(0, 4000)]) if kind == "model" else None
        step = Step(f"s{n}", kind, start, start + length, after=after, chain=chain, label=label,  # type: ignore[arg-type]
                    output_tokens=tokens, input_tokens=r.choice([None, r.randint(0, 200_000)]))
        steps.append(step)
        return step

    def length() -> float:
        return r.choice([0.0, r.uniform(0, 20), r.uniform(0, 900)])

    def sub_chain(start: float, after: tuple[str, ...], chain: str) -> Step:
        last = add("model", start, r.uniform(0, 30), after, chain)
        for _ in range(r.randint(0, 4)):
            last = add(r.choice(["model", "tool"]), last.end + r.choice([0.0, r.uniform(0, 3)]), length(),
                       (last.id,), chain)
        return last

    background: list[Step] = []
    for _ in range(r.randint(1, 14)):
        t += r.choice([0.0, r.uniform(0, 5)])
        after = (prev,) if prev else ()
        if background and r.random() < 0.3:  # wait for a background sub-agent too
            joined = background.pop(r.randrange(len(background)))
            after, t = (*after, joined.id), max(t, joined.end)
        what = r.random()
        if what < 0.15:  # a sub-agent inside its tool step
            last = sub_chain(t + r.uniform(0, 1), after, f"sub{n}")
            box = add("tool", t, last.end + r.uniform(0, 1) - t, after, label="sub-agent")
            t, prev = box.end, box.id
        elif what < 0.3 and prev:  # a background sub-agent beside what comes next
            background.append(sub_chain(t, after, f"bg{n}"))
        elif what < 0.4:  # parallel tool calls
            tools = [add("tool", t, length(), after) for _ in range(r.randint(2, 3))]
            t = max(s.end for s in tools)
            nxt = add("model", t, r.uniform(0, 30), tuple(s.id for s in tools))
            t, prev = nxt.end, nxt.id
        else:
            step = add(r.choice(["model", "model", "tool", "human", "human", "retry"]), t, length(), after)
            t, prev = step.end, step.id
    return trace(*steps)


def test_human_seconds_are_recorded_time_the_same_on_every_tier_on_random_dags() -> None:
    moved = 0
    for seed in range(400):
        r = random.Random(seed)
        t = one_persons_dag(r)
        cap = r.choice([60.0, 600.0])
        a = analyse(t, idle_cap_s=cap)
        recorded = sum(min(s.duration, cap) for s in t.steps if s.kind == "human")
        assert a.breakdown["human"] == pytest.approx(recorded, abs=1e-6), seed
        for tier in TIERS:
            on = retime_on(t, tier)
            b = analyse(on, idle_cap_s=cap)
            span = max(s.end for s in on.steps) - min(s.start for s in on.steps)
            assert sum(b.breakdown.values()) == pytest.approx(b.e2e_s, abs=1e-6), (seed, tier.name)
            assert b.e2e_s + b.away_s == pytest.approx(span, abs=1e-6), (seed, tier.name)
            assert b.breakdown["human"] == pytest.approx(recorded, abs=1e-6), (seed, tier.name)
            assert b.away_s == pytest.approx(a.away_s, abs=1e-6), (seed, tier.name)
            assert min(b.breakdown.values()) >= -1e-9 and min(b.parallel_s.values()) >= -1e-9, (seed, tier.name)
            if b.e2e_s > a.e2e_s + 1 and a.breakdown["human"] > 0:
                moved += 1
    assert moved > 20  # tiers slow enough to move the path around a person happen

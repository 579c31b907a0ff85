"""WEKA traces as their field notes describe them (docs/traces.md): ``think_time`` is the gap *before* a request,
sub-agents are records of their own, a request that never finished is still a call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokrace.providers.traces.analysis import analyse
from tokrace.providers.traces.read import read_file
from tokrace.providers.traces.retime import TierProfile, retime_on

FIXTURES = Path(__file__).parent / "fixtures" / "weka"


def test_sibling_subagent_records_are_chains_of_their_own_and_an_unfinished_request_still_counts() -> None:
    found = read_file(FIXTURES / "w-siblings.json")
    assert found.problem is None and found.traces[0].skipped == 0
    t = found.traces[0]
    a = analyse(t)
    # main 4 requests (one unfinished) + sub-agent 1 (2 requests) + sub-agent 2 (1 request, relative times)
    assert a.calls == 7
    assert a.output_tokens == 100 + 40 + 60 + 50 + 200 + 700 + 80
    assert sorted({s.chain for s in t.steps}) == ["main", "subagent-1", "subagent-2"]
    unfinished = [s for s in t.steps if s.unfinished]
    assert [(s.start, s.end, s.output_tokens) for s in unfinished] == [(60.0, 60.0, 700)]
    assert any("1 request never finished" in n and "700 output tokens" in n for n in t.notes)
    # wall: the last t + its api_time; the gap the sub-agents ran in is a sub-agent tool step; the gap across the
    # unfinished request runs from the last completed answer (33 s) to the next request (133 s): the person's
    assert a.e2e_s == pytest.approx(135.0) and a.away_s == 0
    # the critical path runs through sub-agent 1 (6-13 s); sub-agent 2's call (6-10 s) is off it
    assert a.breakdown == pytest.approx({"model": 18.0, "tool": 17.0, "human": 100.0, "retry": 0.0, "wait": 0.0})
    assert a.parallel_s == pytest.approx({"model": 4.0, "tool": 0.0, "human": 0.0})
    sub = [s for s in t.steps if s.label == "sub-agent"]
    assert [(s.start, s.end) for s in sub] == [(5.0, 27.0)]


def test_think_time_is_the_gap_before_a_request_so_a_gap_after_end_turn_is_the_persons(tmp_path: Path) -> None:
    # end_turn at 2 s, the person answers 452 s later; tool_use at 456 s, the tool runs 4 s
    doc = {"id": "x", "requests": [
        {"t": 0, "model": "m", "in": 10, "out": 5, "api_time": 2, "think_time": 0, "stop": "end_turn"},
        {"t": 454, "model": "m", "in": 10, "out": 5, "api_time": 2, "think_time": 452, "stop": "tool_use"},
        {"t": 460, "model": "m", "in": 10, "out": 5, "api_time": 2, "think_time": 4, "stop": "end_turn"}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    a = analyse(read_file(path).traces[0])
    assert a.e2e_s == pytest.approx(462.0)  # last t + its api_time, never more
    assert a.breakdown["human"] == pytest.approx(452.0) and a.breakdown["tool"] == pytest.approx(4.0)
    assert a.human_steps == 1 and a.tool_calls == 1


def test_a_think_time_well_short_of_its_gap_leaves_the_rest_to_wait(tmp_path: Path) -> None:
    doc = {"requests": [
        {"t": 0, "in": 1, "out": 1, "api_time": 1, "think_time": 0, "stop": "tool_use"},
        {"t": 11, "in": 1, "out": 1, "api_time": 1, "think_time": 3, "stop": "end_turn"}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    a = analyse(read_file(path).traces[0])
    assert a.breakdown == pytest.approx({"model": 2.0, "tool": 3.0, "human": 0.0, "retry": 0.0, "wait": 7.0})


def test_an_unfinished_request_keeps_its_instant_on_every_tier() -> None:
    t = read_file(FIXTURES / "w-siblings.json").traces[0]
    on = retime_on(t, TierProfile("fast", ttft_s=0.0, tok_s=1e9))
    assert [s.duration for s in on.steps if s.unfinished] == [0.0]

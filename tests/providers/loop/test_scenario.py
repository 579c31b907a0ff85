"""Scenarios as TOML: the built-ins load, and a bad file gets one message with its file, line and key."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from paths import ROOT

from tokrace.providers.loop.scenario import HumanStep, Latency, ModelStep, ToolStep, WaitStep
from tokrace.providers.loop.scenario_file import builtin_names, builtin_scenarios, load_scenario, parse_scenario
from tokrace.providers.model.errors import ConfigError

SMALL = """\
name = "small"
description = "one call, a review, a wait"
seed = 4
max_turns = 6

[[tools]]
name = "run_tests"
description = "Run the tests."
parameters = { type = "object", properties = { path = { type = "string" } } }
latency_s = { dist = "lognormal", median = 2.0, sigma = 0.2 }
result = ["1 failed", "all passed"]

[[steps]]
kind = "model"
prompt = "Fix the test."
calls = [{ tool = "run_tests", arguments = { path = "tests" } }]

[[steps]]
kind = "model"
max_tokens = 30

[[steps]]
kind = "human"
action = "approval"
latency_s = 12
reply = "Ship it."

[[steps]]
kind = "wait"
label = "deploy"
latency_s = { dist = "uniform", min = 1, max = 3 }

[[steps]]
kind = "tool"
tool = "notify"
latency_s = 0.2
"""


def parse(text: str) -> object:
    return parse_scenario(text, Path("loop.toml"))


def test_every_built_in_scenario_loads_and_the_four_of_the_issue_are_there() -> None:
    names = builtin_names()
    assert {"incident", "coding-loop", "voice-support", "research"} <= set(names)
    assert [s.name for s in builtin_scenarios()] == names


def test_the_coding_loop_makes_about_thirty_model_requests_with_test_runs_and_edits_between_them() -> None:
    loop = load_scenario("coding-loop")
    assert 28 <= loop.model_steps <= 32
    called = [c.tool for s in loop.steps if isinstance(s, ModelStep) for c in s.calls]
    assert called.count("run_tests") >= 5 and called.count("edit_file") >= 5


def test_the_incident_queries_logs_and_metrics_then_waits_for_a_human_approval() -> None:
    incident = load_scenario("incident")
    called = [c.tool for s in incident.steps if isinstance(s, ModelStep) for c in s.calls]
    assert called[:2] == ["query_logs", "query_metrics"]
    assert any(isinstance(s, HumanStep) and s.action == "approval" for s in incident.steps)


def test_a_scenario_is_built_with_its_tools_and_steps() -> None:
    sc = parse_scenario(SMALL, Path("loop.toml"))
    assert sc.name == "small" and sc.seed == 4 and sc.max_turns == 6 and sc.parallel_tools
    assert [type(s) for s in sc.steps] == [ModelStep, ModelStep, HumanStep, WaitStep, ToolStep]
    first = sc.steps[0]
    assert isinstance(first, ModelStep) and first.prompt == "Fix the test."
    assert json.loads(first.calls[0].arguments) == {"path": "tests"}
    assert sc.tool_schemas() == [{"name": "run_tests", "description": "Run the tests.",
                                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    assert sc.tools["run_tests"].latency == Latency("lognormal", 2.0, 0.2)


def test_a_canned_result_list_gives_the_nth_call_the_nth_result_and_repeats_the_last() -> None:
    tool = parse_scenario(SMALL, Path("loop.toml")).tools["run_tests"]
    assert [tool.result(n) for n in range(4)] == ["1 failed", "all passed", "all passed", "all passed"]


def test_a_scenario_file_loads_by_path_and_takes_its_name_from_the_file_when_it_has_none(tmp_path: Path) -> None:
    path = tmp_path / "nightly.toml"
    path.write_text(SMALL.replace('name = "small"\n', ""), encoding="utf-8")
    sc = load_scenario(str(path))
    assert sc.name == "nightly" and sc.source == str(path)


def test_an_unknown_scenario_name_lists_the_built_in_ones() -> None:
    with pytest.raises(ConfigError, match=r"no scenario 'nope'.*coding-loop.*incident"):
        load_scenario("nope")


@pytest.mark.parametrize("dist,a,b", [("lognormal", 2.0, 0.5), ("uniform", 1.0, 3.0), ("normal", 0.5, 2.0)])
def test_latency_draws_are_seeded_and_never_negative(dist: str, a: float, b: float) -> None:
    latency = Latency(dist, a, b)  # type: ignore[arg-type]
    first = [latency.draw(random.Random(f"7:{i}")) for i in range(200)]
    again = [latency.draw(random.Random(f"7:{i}")) for i in range(200)]
    assert first == again and min(first) >= 0
    assert len(set(first)) > 100
    if dist == "uniform":
        assert min(first) >= 1.0 and max(first) <= 3.0


BAD = {
    "unknown top key": ('colour = "red"\n' + SMALL, 1, "colour: unknown key for a scenario"),
    "unknown step kind": (SMALL.replace('kind = "wait"', 'kind = "nap"'), 29,
                          "steps[3].kind: expected one of model, tool, human, wait, got 'nap'"),
    "undeclared tool": (SMALL.replace('tool = "run_tests", arguments', 'tool = "run_test", arguments'), 16,
                        "steps[0].calls[0].tool: no tool named 'run_test' (tools: run_tests)"),
    "unknown distribution": (SMALL.replace('dist = "lognormal"', 'dist = "gamma"'), 10,
                             "tools[0].latency_s.dist: expected one of lognormal, uniform, normal"),
    "missing sigma": (SMALL.replace(", sigma = 0.2", ""), 10,
                      "tools[0].latency_s: a lognormal latency needs median, sigma"),
    "uniform upside down": (SMALL.replace("min = 1, max = 3", "min = 3, max = 1"), 31,
                            "steps[3].latency_s.max: must not be below min (3)"),
    "latency as text": (SMALL.replace("latency_s = 12", 'latency_s = "12s"'), 25,
                        'steps[2].latency_s: expected a number of seconds or a table like { dist = "lognormal"'),
    "unknown human action": (SMALL.replace('action = "approval"', 'action = "nod"'), 24,
                             "steps[2].action: expected one of approval, review, speak"),
    "tool name with a space": (SMALL.replace('name = "run_tests"', 'name = "run tests"'), 7,
                               "tools[0].name: 'run tests': use letters, digits, _ or -"),
    "harness tool without latency": (SMALL.replace("latency_s = 0.2\n", ""), 34,
                                     "steps[4]: missing key 'latency_s'"),
    "unknown step key": (SMALL.replace("max_tokens = 30", 'prompt_text = "hi"'), 20,
                         "steps[1].prompt_text: unknown key for a model step (expected one of: kind, label, prompt"),
    "follow-up with nothing to read": (
        SMALL.replace('calls = [{ tool = "run_tests", arguments = { path = "tests" } }]\n', ""), 18,
        "steps[1]: a follow-up model step needs something new to read"),
    "tool without latency": (SMALL.replace('latency_s = { dist = "lognormal", median = 2.0, sigma = 0.2 }\n', ""), 7,
                             "tools[0]: missing key 'latency_s'"),
    "no turns allowed": (SMALL.replace("max_turns = 6", "max_turns = 0"), 4, "max_turns: expected 1 to 10,000, got 0"),
    "no steps": ('name = "x"\n', None, "steps: a scenario needs at least one [[steps]] table"),
    "no model step": ('[[steps]]\nkind = "wait"\nlatency_s = 1\n', None,
                      "a scenario needs at least one model step"),
    "not TOML": ("name = [", None, "not valid TOML"),
}


@pytest.mark.parametrize("text,line,message", BAD.values(), ids=BAD.keys())
def test_a_bad_scenario_gets_one_message_with_file_line_and_key(text: str, line: int | None, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    text_of = str(info.value)
    assert text_of.startswith(f"loop.toml, line {line}: " if line else "loop.toml")
    assert message in text_of
    assert "\n" not in text_of


def test_the_documented_scenario_example_is_valid() -> None:
    page = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    block = page.split("A scenario is a TOML file:\n\n```toml\n", 1)[1].split("```", 1)[0]
    sc = parse_scenario(block, Path("docs/scenarios.md"))
    assert [s.kind for s in sc.steps] == ["model", "model", "human", "wait", "tool"]

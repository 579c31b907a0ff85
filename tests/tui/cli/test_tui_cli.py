"""How the command line opens the screen: in a terminal the race or replay screen, piped the bench output."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tui_harness import record_demo

from tokrace.providers.config.demo import DEMO_PROMPT
from tokrace.tui import main as cli
from tokrace.tui.app import launch
from tokrace.tui.cli import headless


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Record what the screen (and the headless runner) would have been asked to run."""
    seen: dict[str, Any] = {}

    def keep(name: str) -> Callable[..., int]:
        def call(*args: Any, **kwargs: Any) -> int:
            seen[name] = (args, kwargs)
            return 0
        return call

    monkeypatch.setattr(launch, "run_race", keep("race"))
    monkeypatch.setattr(launch, "run_replay", keep("replay"))
    monkeypatch.setattr(headless, "run_headless", keep("headless"))
    return seen


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)


def test_no_command_in_a_terminal_opens_the_race_on_the_demo(calls: dict[str, Any], terminal: None,
                                                             in_tmp: Path) -> None:
    assert cli.main([]) == 0
    (tiers, request, scenario), _ = calls["race"]
    assert [t.name for t in tiers] == ["Sol standard", "Sol priority", "Sol ultrafast"]
    assert request.prompt == DEMO_PROMPT and scenario is None


def test_no_command_takes_config_tiers_and_prompt_as_bench_does(calls: dict[str, Any], terminal: None,
                                                                write_config: Callable[[str], Path],
                                                                in_tmp: Path) -> None:
    path = write_config('[[tiers]]\nname = "a"\nprovider = "synthetic"\n\n'
                        '[[tiers]]\nname = "b"\nprovider = "synthetic"\n')
    assert cli.main(["--config", str(path), "--tiers", "b", "--prompt", "Why?", "--max-tokens", "7"]) == 0
    (tiers, request, _), _ = calls["race"]
    assert [t.name for t in tiers] == ["b"] and (request.prompt, request.max_tokens) == ("Why?", 7)


def test_no_command_piped_runs_the_bench_with_the_same_options(calls: dict[str, Any], in_tmp: Path) -> None:
    assert cli.main(["--prompt", "Why?"]) == 0
    assert "race" not in calls
    args, kwargs = calls["headless"]
    assert args[1].prompt == "Why?" and kwargs["record"] is not None  # bench records by default


def test_demo_in_a_terminal_opens_the_race_on_the_demo_tiers(calls: dict[str, Any], terminal: None,
                                                             write_config: Callable[[str], Path],
                                                             in_tmp: Path) -> None:
    write_config('[[tiers]]\nname = "mine"\nprovider = "synthetic"\n')
    assert cli.main(["demo", "--prompt", "Hello"]) == 0
    (tiers, request, _), _ = calls["race"]
    assert len(tiers) == 3 and request.prompt == "Hello"


def test_demo_piped_prints_the_table_and_records_as_bench_does(calls: dict[str, Any], in_tmp: Path) -> None:
    assert cli.main(["demo"]) == 0
    _, kwargs = calls["headless"]
    assert kwargs["record"] is not None and "race" not in calls
    assert cli.main(["demo", "--no-record"]) == 0
    assert calls["headless"][1]["record"] is None


async def test_replay_in_a_terminal_opens_the_replay_screen_at_its_speed(calls: dict[str, Any], terminal: None,
                                                                         tmp_path: Path) -> None:
    path = await record_demo(tmp_path / "demo.jsonl")
    assert cli.main(["replay", str(path), "--speed", "2", "--idle-cap", "0.5"]) == 0
    (recording, tiers, speed, idle_cap, run), _ = calls["replay"]
    assert recording.path == path and (speed, idle_cap, run) == (2.0, 0.5, None)
    assert [t.options["speed"] for t in tiers] == [1.0, 1.0, 1.0]  # the screen's clock applies the speed


async def test_replay_piped_falls_back_to_the_headless_table(calls: dict[str, Any], tmp_path: Path) -> None:
    path = await record_demo(tmp_path / "demo.jsonl")
    assert cli.main(["replay", str(path)]) == 0
    assert "headless" in calls and "replay" not in calls


def test_more_lanes_than_the_screen_holds_is_one_clear_line() -> None:
    from tokrace.providers.model.errors import TokraceError
    from tokrace.providers.model.messages import TurnRequest
    from tokrace.providers.model.tiers import TierSpec

    tiers = [TierSpec(name=f"t{i}", provider="synthetic") for i in range(7)]
    with pytest.raises(TokraceError) as caught:
        launch.run_race(tiers, TurnRequest("Why?"))
    assert str(caught.value) == ("the screen races up to 6 tiers and this race has 7; "
                                 "choose some with --tiers NAME,NAME")

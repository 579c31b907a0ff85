"""Scenarios on the command line: tokrace scenarios, bench --scenario (table, what-if, JSON), replay of a loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wall_clock import without_started_at

from tokrace.tui.main import main

LOOP_KEYS = {"turns", "breakdown", "model_share", "amdahl_max_speedup"}


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, in_tmp: Path) -> None:
    """Tables as wide as they need, and no ./tokrace.toml but the test's own."""
    monkeypatch.setenv("COLUMNS", "250")


def test_scenarios_lists_every_built_in_with_its_model_requests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    for name in ("incident", "coding-loop", "voice-support", "research"):
        assert name in out
    assert "run_tests" in out


def test_bench_with_a_scenario_shows_where_the_time_goes_and_the_what_if(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--scenario", "coding-loop", "--fast-forward", "--no-record", "--what-if", "10"])
    out = capsys.readouterr().out
    assert code == 0
    assert "where the time goes — coding-loop" in out
    for header in ("model", "tool", "human", "Amdahl", "10× faster model", "speed-up e2e | tok/s"):
        assert header in out
    assert "Sol ultrafast streams 14." in out and "finishes the loop 1." in out


def test_bench_json_of_a_scenario_has_the_loop_keys_on_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--scenario", "incident", "--fast-forward", "--no-record", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    for tier in data["tiers"]:
        run = tier["runs"][0]
        assert set(run) >= LOOP_KEYS
        assert abs(sum(run["breakdown"].values()) - run["e2e_s"]) < 0.001


def test_a_scenario_and_a_prompt_together_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--scenario", "incident", "--prompt", "Hi", "--fast-forward", "--no-record"]) == 2
    assert "--scenario and --prompt" in capsys.readouterr().err


def test_a_broken_scenario_file_is_one_line_naming_the_file_and_line(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('[[steps]]\nkind = "model"\nprompt = "Hi."\nmax_tokens = "lots"\n', encoding="utf-8")
    assert main(["bench", "--scenario", str(path), "--fast-forward", "--no-record"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tokrace: {path}, line 4: steps[0].max_tokens: expected an integer")
    assert err.count("\n") == 1


def test_the_configs_default_scenario_runs_unless_a_prompt_is_given(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tokrace.toml"
    config.write_text('[defaults]\nscenario = "voice-support"\n\n[[tiers]]\nname = "quick"\n'
                      'provider = "synthetic"\ntok_s = 500\nttft_ms = 100\n', encoding="utf-8")
    assert main(["bench", "--fast-forward", "--no-record", "--json", "-"]) == 0
    assert set(json.loads(capsys.readouterr().out)["tiers"][0]["runs"][0]) >= LOOP_KEYS
    assert main(["bench", "--fast-forward", "--no-record", "--json", "-", "--prompt", "Hi"]) == 0
    assert not LOOP_KEYS & set(json.loads(capsys.readouterr().out)["tiers"][0]["runs"][0])


def test_replaying_a_scenario_recording_headless_shows_the_same_loop(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "loop.jsonl"
    assert main(["bench", "--scenario", "research", "--fast-forward", "--record", str(path), "--json", "-"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert main(["replay", str(path), "--headless", "--fast-forward", "--json", "-"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert without_started_at([t["runs"] for t in replayed["tiers"]]) == \
        without_started_at([t["runs"] for t in live["tiers"]])
    assert main(["replay", str(path), "--headless", "--fast-forward"]) == 0
    assert "where the time goes — research" in capsys.readouterr().out

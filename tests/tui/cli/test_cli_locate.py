"""`tokrace locate` says where everything lives; the screen's commands take the race options bench takes, and an
option given before a command counts as the command's."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tokrace.providers.config.load import user_config_path
from tokrace.providers.recording import recordings_dir
from tokrace.themes.loader import user_themes_dir
from tokrace.tui import main as cli
from tokrace.tui.app import launch
from tokrace.tui.cli.settings import settings_path
from tokrace.tui.main import build_parser, main


def located(capsys: pytest.CaptureFixture[str], *what: str) -> list[str]:
    assert main(["locate", *what]) == 0
    return capsys.readouterr().out.splitlines()


def test_locate_lists_every_place_and_whether_it_exists(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    recordings_dir().mkdir(parents=True)
    (recordings_dir() / "one.jsonl").write_text("")
    (recordings_dir() / "two.jsonl").write_text("")
    lines = located(capsys)
    assert [re.split(r" {2,}", line) for line in lines[:-1]] == [
        ["config", str(in_tmp / "tokrace.toml"), "missing", "looked for first, in this folder"],
        ["config", str(user_config_path()), "missing", "then in the user config dir"],
        ["themes", str(user_themes_dir()), "missing"],
        ["recordings", str(recordings_dir()), "exists", "2 recordings"],
        ["settings", str(settings_path()), "missing", "remembers the theme chosen last"],
    ]
    assert lines[-1] == "no config file: tokrace races the built-in offline demo tiers"


def test_locate_marks_the_config_in_use(capsys: pytest.CaptureFixture[str], in_tmp: Path,
                                        write_config: Callable[[str], Path]) -> None:
    write_config("")
    user_config_path().parent.mkdir(parents=True)
    user_config_path().write_text("")
    local, user = (re.split(r" {2,}", line) for line in located(capsys)[:2])
    assert local == ["config", str(in_tmp / "tokrace.toml"), "exists", "in use"]
    assert user == ["config", str(user_config_path()), "exists", "then in the user config dir"]


@pytest.mark.parametrize("what, where", [
    ("themes", user_themes_dir), ("recordings", recordings_dir), ("settings", settings_path),
    ("config", user_config_path),
])
def test_locate_what_prints_that_path_alone(capsys: pytest.CaptureFixture[str], in_tmp: Path, what: str,
                                            where: Callable[[], Path]) -> None:
    assert located(capsys, what) == [str(where())]


def test_locate_config_is_the_file_in_use(capsys: pytest.CaptureFixture[str], in_tmp: Path,
                                          write_config: Callable[[str], Path]) -> None:
    path = write_config("")
    assert located(capsys, "config") == [str(path)]


def test_locate_something_unknown_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["locate", "keys"])
    assert exited.value.code == 2 and "invalid choice: 'keys'" in capsys.readouterr().err


def options(*command: str) -> set[str]:
    """Every option string the command takes."""
    parser = build_parser()
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return {flag for action in parser._actions for flag in action.option_strings}


RACE_OPTIONS = {"--tiers", "--prompt", "--prompt-file", "--max-tokens", "--scenario", "--record", "--no-record"}
"""What every command that races takes, as bench does."""


@pytest.mark.parametrize("command, also", [((), {"--config", "--theme"}), (("demo",), {"--theme"}),
                                           (("bench",), {"--config"})])
def test_every_racing_command_takes_the_race_options(command: tuple[str, ...], also: set[str]) -> None:
    assert RACE_OPTIONS | also <= options(*command)


def test_the_replay_screen_takes_a_theme_and_is_never_recorded_again() -> None:
    assert "--theme" in options("replay") and not {"--record", "--no-record"} & options("replay")


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the race screen would have been asked to run, in a terminal (a test using it cannot use capsys, which
    swaps stdout for one that is not a terminal)."""
    seen: dict[str, Any] = {}

    def run_race(*args: Any, **kwargs: Any) -> int:
        seen["args"], seen["kwargs"] = args, kwargs
        return 0

    monkeypatch.setattr(launch, "run_race", run_race)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    return seen


def test_options_before_the_command_count_as_the_commands(screen: dict[str, Any], in_tmp: Path) -> None:
    assert cli.main(["--prompt", "Hi", "--no-record", "--theme", "projector", "demo", "--max-tokens", "9"]) == 0
    request = screen["args"][1]
    assert (request.prompt, request.max_tokens) == ("Hi", 9)
    assert screen["kwargs"]["record"] is None and screen["kwargs"]["theme"] == "projector"


def test_an_option_given_after_the_command_too_wins(screen: dict[str, Any], in_tmp: Path) -> None:
    assert cli.main(["--prompt", "Hi", "demo", "--prompt", "Hello"]) == 0
    assert screen["args"][1].prompt == "Hello"


def test_an_option_the_command_does_not_take_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--config", "x.toml", "demo"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "tokrace: error: --config does not apply to `tokrace demo`"


def test_demo_tiers_picks_among_the_demo_tiers(screen: dict[str, Any], in_tmp: Path) -> None:
    assert cli.main(["demo", "--tiers", "sol ultrafast,Sol standard"]) == 0
    assert [t.name for t in screen["args"][0]] == ["Sol ultrafast", "Sol standard"]


def test_demo_tiers_names_the_demo_tiers_when_one_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--tiers", "Sol turbo"]) == 2
    assert "no tier named 'Sol turbo' (tiers: Sol standard, Sol priority, Sol ultrafast)" in capsys.readouterr().err

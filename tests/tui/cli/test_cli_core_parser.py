"""A command line that cannot name a command of its own module (proxy, traces, serve...) is parsed without
importing those modules, and gets exactly what the whole parser gives (issue 29's cold start)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from paths import ROOT

from tokrace.tui.cli.parser import COMMAND_MODULES, build_parser, parse_command_line
from tokrace.tui.main import main

MODULES = tuple(f"tokrace.tui.cli.{name}" for name in sorted(COMMAND_MODULES))


def loaded_after(code: str) -> list[str]:
    """The command modules (and their heavy imports) loaded in a fresh process once ``code`` ran."""
    heavy = (*MODULES, "tokrace.tui.cli.traces_common", "tokrace.providers.traces.read", "tokrace.providers.proxy",
             "tokrace.providers.serve", "httpx")
    script = (f"import sys\n{code}\n"
              f"print(sorted(m for m in sys.modules if m.split('.')[0] == 'httpx' or m in {heavy!r} "
              f"or m.rsplit('.', 1)[0] in {heavy!r}))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=60)
    return eval(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return] # (a list of names we printed)


@pytest.mark.parametrize("argv", [["demo"], ["demo", "--theme", "projector", "--tiers", "Sol ultrafast"],
                                  ["bench", "--fast-forward"], ["replay", "x.jsonl"],
                                  ["--prompt", "hi"], []])
def test_a_race_command_line_is_parsed_without_the_command_modules(argv: list[str]) -> None:
    assert loaded_after(f"from tokrace.tui.cli.parser import parse_command_line\nparse_command_line({argv!r})") == []


def test_the_whole_parser_still_imports_them() -> None:
    assert set(MODULES) <= set(loaded_after("from tokrace.tui.cli.parser import build_parser\nbuild_parser()"))


@pytest.mark.parametrize("argv", [
    ["demo"], ["demo", "--present", "--no-record"], ["--theme", "projector", "demo"], ["bench", "--runs", "3"],
    ["--tiers", "a,b", "--unknown"], ["replay", "x.jsonl", "--on", "a", "--original-price", "1,2,0.5"],
    ["traces", "a.jsonl"], ["serve", "--port", "0"], ["--prompt", "proxy"], []])
def test_the_core_parser_reads_exactly_what_the_whole_one_reads(argv: list[str]) -> None:
    assert parse_command_line(argv) == build_parser().parse_known_args(argv)


@pytest.mark.parametrize("argv", [["--help"], ["--max-tokens", "x"], ["nope"], ["demo", "--max-tokens", "0"],
                                  ["--theme", "projector", "recordings"], ["demo", "--help"]])
def test_help_and_usage_errors_are_the_whole_parsers(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as whole:
        build_parser().parse_known_args(argv)
    expected = capsys.readouterr()
    with pytest.raises(SystemExit) as core:
        parse_command_line(argv)
    assert (core.value.code, capsys.readouterr()) == (whole.value.code, expected)


def test_top_level_help_still_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert all(f"    {name}" in listing for name in COMMAND_MODULES)


def test_an_unknown_argument_is_one_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--bogus"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "tokrace: error: unrecognized arguments: --bogus"


def test_every_command_module_command_is_a_command_of_the_whole_parser() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(COMMAND_MODULES) <= set(commands.choices)


@pytest.mark.parametrize("argv", [["demo"], ["demo", "--theme", "projector"], ["--prompt", "hi"], []])
def test_the_race_screens_command_lines_build_no_other_commands_options(argv: list[str]) -> None:
    """Bench's and replay's options (and the modules declaring their exports and ``--on``) wait for a command line
    that names them."""
    script = (f"import sys\nfrom tokrace.tui.cli.parser import parse_command_line\nparse_command_line({argv!r})\n"
              "print(sorted(m for m in sys.modules if m.startswith('tokrace.tui.cli.')))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=60)
    loaded = eval(done.stdout.strip().splitlines()[-1])
    assert "tokrace.tui.cli.export_files" not in loaded and "tokrace.tui.cli.traces_compare" not in loaded

"""The command line (docs/design.md §8): bench, replay --headless, recordings, tiers; the JSON contract and exit
codes."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT
from wall_clock import without_started_at

from tokrace.providers import __version__
from tokrace.tui.main import build_parser, main

WriteConfig = Callable[..., Path]

EXACT = """\
[defaults]
prompt = "Count to six hundred."
max_tokens = 600

[[tiers]]
name = "exact"
provider = "synthetic"
model = "gpt-5.6-sol"
ttft_ms = 200
tok_s = 750
jitter = 0
price = { input = 5.0, output = 30.0 }
"""

TWO_LANES_ONE_FAILING = """\
[defaults]
max_tokens = 40

[[tiers]]
name = "steady"
provider = "synthetic"
tok_s = 400

[[tiers]]
name = "flaky"
provider = "synthetic"
tok_s = 400
fail_after_tokens = 5
"""

RUN_KEYS = {"ok", "error", "started_at", "connect_s", "ttfb_s", "ttft_s", "ttfa_s", "ttfs_s", "e2e_s", "output_tokens",
            "tokens_source", "decode_tok_s", "e2e_tok_s", "itl_ms", "stalls", "cost_usd", "segments",
            "retries", "service_tier", "provider_timing", "reads_paced_ms"}
"""The keys of one run in docs/design.md §8, and the ones README adds (what the details view shows)."""


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, in_tmp: Path) -> None:
    """Tables as wide as they need (no ellipsis), and no ./tokrace.toml but the test's own."""
    monkeypatch.setenv("COLUMNS", "250")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def bench_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, "bench", "--json", "-", "--no-record", "--fast-forward", *argv)
    return code, json.loads(out)


def test_version_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0  # answered before the parser is imported (tests/tui/cli/test_cold_version.py)
    assert capsys.readouterr().out.strip() == f"tokrace {__version__}"


def commands() -> list[str]:
    """Every subcommand the parser knows (so a new command without --help fails here)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_the_commands_of_the_design_exist() -> None:
    assert {"bench", "replay", "recordings", "tiers"} <= set(commands())


@pytest.mark.parametrize("command", [[], *([c] for c in commands())], ids=lambda c: c[0] if c else "tokrace")
def test_every_command_has_help(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tokrace {' '.join(command)}".rstrip())
    assert "--help" in out


def test_bench_json_has_exactly_the_keys_of_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = bench_json(capsys)
    assert code == 0
    assert set(report) == {"tool", "version", "tiers"}
    assert (report["tool"], report["version"]) == ("tokrace", __version__)
    assert len(report["tiers"]) >= 3
    for tier in report["tiers"]:
        assert set(tier) == {"name", "provider", "model", "runs", "summary"}
        assert set(tier["summary"]) == {"ttft_s", "decode_tok_s", "e2e_s"}
        assert set(tier["summary"]["ttft_s"]) == {"p50", "p90"}
        (one,) = tier["runs"]
        assert set(one) == RUN_KEYS
        assert set(one["itl_ms"]) == {"mean", "p50", "p90", "p99", "max"}
        assert all(set(seg) == {"kind", "label", "start_s", "end_s"} for seg in one["segments"])


def test_fast_forward_gives_exact_numbers(capsys: pytest.CaptureFixture[str], write_config: WriteConfig) -> None:
    code, report = bench_json(capsys, "--config", str(write_config(EXACT)))
    assert code == 0
    (one,) = report["tiers"][0]["runs"]
    assert one["ttft_s"] == 0.2
    assert one["decode_tok_s"] == 750
    assert one["output_tokens"] == 600 and one["tokens_source"] == "usage"
    assert one["e2e_s"] == pytest.approx(0.2 + 599 / 750)
    assert one["itl_ms"]["max"] == round(1000 / 750, 3)
    assert one["stalls"] == 0
    assert one["cost_usd"] == pytest.approx((5 * 5.0 + 600 * 30.0) / 1e6)  # 5 input tokens


def test_a_failed_run_exits_1_and_the_other_lane_still_reports(capsys: pytest.CaptureFixture[str],
                                                               write_config: WriteConfig) -> None:
    code, report = bench_json(capsys, "--config", str(write_config(TWO_LANES_ONE_FAILING)))
    assert code == 1
    steady, flaky = (t["runs"][0] for t in report["tiers"])
    assert steady["ok"] and steady["output_tokens"] == 40
    assert not flaky["ok"] and "fail_after_tokens" in flaky["error"]


def test_a_missing_key_fails_its_lane_and_the_others_run(capsys: pytest.CaptureFixture[str],
                                                         write_config: WriteConfig,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Reported: bench refused the whole run for a missing key while the screen failed only that lane.
    monkeypatch.delenv("TOKRACE_TEST_MISSING_KEY", raising=False)
    config = write_config('[defaults]\nmax_tokens = 20\n\n[[tiers]]\nname = "steady"\nprovider = "synthetic"\n'
                          '\n[[tiers]]\nname = "keyless"\nprovider = "openai"\nmodel = "m"\n'
                          'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "TOKRACE_TEST_MISSING_KEY"\n')
    code, out, err = run(capsys, "bench", "--json", "-", "--no-record", "--config", str(config))
    assert code == 1, err
    steady, keyless = (t["runs"][0] for t in json.loads(out)["tiers"])
    assert steady["ok"] and steady["output_tokens"] == 20
    assert not keyless["ok"] and "TOKRACE_TEST_MISSING_KEY is not set" in keyless["error"]


def test_runs_n_reports_every_run_and_percentiles(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = bench_json(capsys, "--runs", "3", "--tiers", "Sol ultrafast")
    assert code == 0
    (tier,) = report["tiers"]
    assert len(tier["runs"]) == 3
    ttfts = sorted(r["ttft_s"] for r in tier["runs"])
    assert tier["summary"]["ttft_s"]["p50"] == ttfts[1]


def test_max_tokens_on_the_command_line_overrides_the_config(capsys: pytest.CaptureFixture[str],
                                                             write_config: WriteConfig) -> None:
    path = write_config(EXACT.replace("jitter = 0\n", "jitter = 0\nmax_tokens = 100\n"))
    assert bench_json(capsys, "--config", str(path))[1]["tiers"][0]["runs"][0]["output_tokens"] == 100
    assert bench_json(capsys, "--config", str(path), "--max-tokens", "30")[1]["tiers"][0]["runs"][0][
        "output_tokens"] == 30


def test_record_then_replay_gives_the_same_metrics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    recording = tmp_path / "demo.jsonl"
    code, out, err = run(capsys, "bench", "--fast-forward", "--record", str(recording), "--json", "-")
    assert code == 0 and f"recorded to {recording}" in err
    live = json.loads(out)
    code, out, _ = run(capsys, "replay", str(recording), "--headless", "--fast-forward", "--json", "-")
    assert code == 0
    replayed = json.loads(out)
    assert without_started_at([t["runs"] for t in replayed["tiers"]]) == \
        without_started_at([t["runs"] for t in live["tiers"]])
    assert [t["name"] for t in replayed["tiers"]] == [t["name"] for t in live["tiers"]]


def test_bench_records_into_the_user_data_dir_and_recordings_lists_it(
        capsys: pytest.CaptureFixture[str], isolated_user_dirs: Path) -> None:
    code, _, _ = run(capsys, "bench", "--fast-forward", "--prompt", "Is it fast?")
    assert code == 0
    folder = isolated_user_dirs / "data" / "tokrace" / "recordings"
    (path,) = folder.glob("*.jsonl")
    assert path.name.endswith("-is-it-fast-sol-standard-sol-priority-sol-ultrafast.jsonl")
    code, out, _ = run(capsys, "recordings")
    assert code == 0
    (row,) = [line for line in out.splitlines() if path.name in line]
    assert "Is it fast?" in row and "Sol standard, Sol priority, Sol ultrafast" in row
    assert re.search(r"│ +8\.\d s +│", row)  # the slowest lane's duration (about 8.5 s)


def test_recordings_says_when_there_are_none(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "recordings", "--dir", str(tmp_path / "empty"))
    assert code == 0 and out.startswith("no recordings in")


def test_the_table_names_every_tier_and_its_result(capsys: pytest.CaptureFixture[str],
                                                   write_config: WriteConfig) -> None:
    config = write_config(TWO_LANES_ONE_FAILING.replace('"flaky"', '"flaky [beta]"'))
    code, out, _ = run(capsys, "bench", "--fast-forward", "--no-record", "--config", str(config))
    assert code == 1
    assert "steady" in out and "flaky [beta]" in out
    assert "1 failed" in out and "fail_after_tokens" in out


def test_json_can_go_to_a_file_beside_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    code, out, _ = run(capsys, "bench", "--fast-forward", "--no-record", "--json", str(target))
    assert code == 0 and "Sol ultrafast" in out
    assert json.loads(target.read_text(encoding="utf-8"))["tool"] == "tokrace"


@pytest.mark.parametrize("argv", [
    ["bench", "--runs", "0"],
    ["bench", "--no-such-option"],
    ["bench", "--record", "x.jsonl", "--no-record"],
    ["replay", "--speed", "-1", "f.jsonl"],
])
def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "usage: tokrace" in capsys.readouterr().err


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("tokrace: ") and err.count("\n") == 1
    return err


def test_an_unknown_tier_name_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert "no tier named 'nope'" in one_line_error(capsys, "bench", "--tiers", "nope", "--no-record")


def test_a_missing_prompt_file_is_bad_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "cannot read the prompt" in one_line_error(capsys, "bench", "--prompt-file", str(tmp_path / "no.txt"))


def test_an_unwritable_json_target_is_bad_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = one_line_error(capsys, "bench", "--fast-forward", "--no-record", "--json", str(tmp_path / "no" / "x.json"))
    assert "cannot write" in err


def test_an_unwritable_recording_is_bad_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    assert "cannot write the recording" in one_line_error(capsys, "bench", "--record", str(blocker / "r.jsonl"))


def test_replaying_a_file_that_is_not_a_recording_is_refused(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("shopping list\n", encoding="utf-8")
    assert one_line_error(capsys, "replay", str(path), "--headless") == (
        f"tokrace: {path}: neither a tokrace recording nor an agent trace tokrace reads\n")


def test_replaying_a_newer_recording_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    path.write_text('{"format": "tokrace-recording", "version": 7}\n', encoding="utf-8")
    assert "version 7 is newer than this tokrace reads (1); upgrade tokrace" in one_line_error(
        capsys, "replay", str(path), "--headless")


def test_a_truncated_recording_replays_with_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    recording = tmp_path / "cut.jsonl"
    run(capsys, "bench", "--fast-forward", "--record", str(recording), "--tiers", "Sol ultrafast,Sol priority")
    text = recording.read_text(encoding="utf-8")
    recording.write_text(text[: text.rindex('"kind":"done"') + 8], encoding="utf-8")
    code, out, err = run(capsys, "replay", str(recording), "--headless", "--fast-forward", "--json", "-")
    assert err.count("the last line is incomplete") == 1
    report = json.loads(out)
    assert [r["ok"] for t in report["tiers"] for r in t["runs"]] == [True, False]
    assert code == 1


def test_no_key_reaches_a_recording_or_the_tiers_listing(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, write_config: WriteConfig,
                                                         tmp_path: Path) -> None:
    key = "sk-live-cli-test-9876543210"
    monkeypatch.setenv("TOKRACE_FAKE_KEY", key)
    config = write_config(EXACT.replace('model = "gpt-5.6-sol"\n',
                                        'model = "gpt-5.6-sol"\napi_key_env = "TOKRACE_FAKE_KEY"\n'
                                        f'text = "The key {key} must never be written."\n'))
    recording = tmp_path / "r.jsonl"
    code, out, err = run(capsys, "bench", "--fast-forward", "--config", str(config), "--record", str(recording))
    assert code == 0
    assert key not in recording.read_text(encoding="utf-8") and key not in out + err
    code, out, err = run(capsys, "tiers", "--config", str(config))
    assert code == 0 and key not in out + err


def test_tiers_lists_the_tiers_their_key_variables_and_the_presets(capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, _ = run(capsys, "tiers")
    assert code == 0
    assert "built-in offline demo" in out
    assert all(name in out for name in ("Sol standard", "Sol priority", "Sol ultrafast"))
    assert "groq" in out and "GROQ_API_KEY" in out and "https://api.groq.com/openai/v1" in out


def test_tiers_race_when_another_tier_of_the_config_is_broken(capsys: pytest.CaptureFixture[str],
                                                               write_config: WriteConfig) -> None:
    config = str(write_config('[defaults]\nmax_tokens = 5\n\n[[tiers]]\nname = "good"\nprovider = "synthetic"\n\n'
                              '[[tiers]]\nname = "bad"\nprovider = "synthetic"\ntok_s = "fast"\n'))
    code, report = bench_json(capsys, "--config", config, "--tiers", "good")
    assert code == 0 and [t["name"] for t in report["tiers"]] == ["good"]
    code, out, err = run(capsys, "bench", "--no-record", "--fast-forward", "--config", config, "--tiers", "bad")
    assert code == 2 and err == f"tokrace: {config}, line 11: tiers[1].tok_s: expected a number, got 'fast'\n"
    code, out, err = run(capsys, "tiers", "--config", config)
    assert code == 2 and "good" in out and "line 11: tiers[1].tok_s" in err


def test_a_bad_config_is_one_line_exit_2_and_never_a_traceback(write_config: WriteConfig) -> None:
    config = write_config('[[tiers]]\nname = "a"\nprovider = "synthetic"\ntok_s = "fast"\n')
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "bench", "--config", str(config), "--no-record"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"tokrace: {config}, line 4: tiers[0].tok_s: expected a number, got 'fast'\n"


def test_the_console_script_runs_the_demo_headless(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("tokrace")
    done = subprocess.run([str(script), "bench", "--fast-forward", "--no-record", "--json", "-"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tool"] == "tokrace"


def test_counts_without_usage_are_marked_and_the_encoding_named(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    recording = tmp_path / "r.jsonl"
    run(capsys, "bench", "--fast-forward", "--record", str(recording), "--tiers", "Sol ultrafast")
    lines = recording.read_text(encoding="utf-8").splitlines(keepends=True)
    recording.write_text("".join(line for line in lines if '"kind":"usage"' not in line), encoding="utf-8")
    code, out, err = run(capsys, "replay", str(recording), "--headless", "--fast-forward")
    assert code == 0
    assert re.search(r"│ +≈\d+ │", out)
    assert "≈ counted by tiktoken cl100k_base" in err


def test_ci_runs_exactly_the_readme_test_command() -> None:
    root = ROOT
    readme = (root / "README.md").read_text(encoding="utf-8")
    test_block = readme.split("**Test it**", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0].strip()
    ci = (root / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == test_block


def test_fast_forward_refuses_tiers_that_talk_to_real_servers() -> None:
    from tokrace.providers.model.errors import ConfigError
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.runs.session import check_fast_forward

    check_fast_forward([TierSpec(name="s", provider="synthetic"), TierSpec(name="r", provider="replay")])
    with pytest.raises(ConfigError, match="these talk to real servers: Live API"):
        check_fast_forward([TierSpec(name="s", provider="synthetic"), TierSpec(name="Live API", provider="openai")])


def test_a_broken_tier_in_tiers_is_one_line_on_a_piped_stderr_however_long_its_path(tmp_path: Path) -> None:
    folder = tmp_path / ("a-folder-with-a-long-name-" * 4)
    folder.mkdir()
    config = folder / "tokrace.toml"
    config.write_text('[[tiers]]\nname = "good"\nprovider = "synthetic"\n\n'
                      '[[tiers]]\nname = "bad"\nprovider = "synthetic"\ntok_s = "fast"\n')
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "tiers", "--config", str(config)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 2
    assert done.stderr == f"tokrace: {config}, line 8: tiers[1].tok_s: expected a number, got 'fast'\n"


def test_a_lane_that_never_ran_has_no_e2e_and_no_token_count(capsys: pytest.CaptureFixture[str],
                                                             write_config: WriteConfig,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_26", raising=False)
    config = str(write_config('[[tiers]]\nname = "keyless"\nprovider = "openai"\nmodel = "m"\n'
                              'api_key_env = "NO_SUCH_KEY_26"\n'))
    code, out, _ = run(capsys, "bench", "--json", "-", "--no-record", "--config", config)
    assert code == 1 and json.loads(out)["tiers"][0]["runs"][0]["e2e_s"] is None
    code, out, _ = run(capsys, "bench", "--no-record", "--config", config)
    row = next(line for line in out.splitlines() if "keyless" in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[2:7] == ["—"] * 5  # TTFT, decode, e2e, tokens, cost: not "0.00 s", not "~0"
